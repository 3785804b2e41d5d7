"""The options of `stockade run`, as one table both parsers use.

`stockade run` sits in front of every command an agent runs, so it is parsed
by the small hand-written parser below, which imports no Typer or Rich;
the Typer `run` command exists for help text. A test checks they agree.
"""

from __future__ import annotations

import sys

from stockade.core.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    Result = TypeVar("Result")


class RunOption:
    """One option (a plain class: this module is on every run's path)."""

    __slots__ = ("dest", "flags", "takes_value", "help", "metavar")

    def __init__(self, dest: str, flags: tuple[str, ...], takes_value: bool, help: str, metavar: str = "") -> None:
        self.dest = dest
        self.flags = flags
        self.takes_value = takes_value
        self.help = help
        self.metavar = metavar


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("policy", ("--policy", "-p"), True, "Policy file to use (trusted: you chose it).", "FILE"),
    RunOption("profile", ("--profile",), True, "Built-in profile to use instead of the project policy.", "NAME"),
    RunOption("shell", ("-c",), True, "Run this shell string with /bin/sh -c inside the sandbox.", "STRING"),
    RunOption("dry_run", ("--dry-run",), False, "Print the exact sandbox plan and exit without running."),
    RunOption("quiet", ("--quiet", "-q"), False, "No end-of-run summary of what was blocked."),
    RunOption("platform", ("--platform",), True, "Plan for this platform (linux or darwin); with --dry-run only.", "NAME"),
    RunOption(
        "max_output",
        ("--max-output",),
        True,
        "Forward at most this much of the command's output (e.g. 1M), then one line saying how much was cut.",
        "BYTES",
    ),
    RunOption("ci", ("--ci",), False, "CI job mode: a Markdown summary in $GITHUB_STEP_SUMMARY when set, and a one-line result on stderr."),
    RunOption(
        "report",
        ("--report",),
        True,
        "Write a JSON report of the run (exit status, duration, hosts, denials, limits, files moved aside; "
        "refused file accesses with --trace) to FILE.",
        "FILE",
    ),  # fmt: skip
    RunOption("verbose", ("--verbose",), False, "Also say after the run what the plan skipped (allow_write folders that could not be made)."),
    RunOption(
        "trace",
        ("--trace",),
        False,
        "Trace the sandbox's file syscalls (with strace, outside it) and report every refused access with the rule that refused it.",
    ),
    RunOption(
        "approve",
        ("--approve",),
        False,
        "Hold a request to a host the policy does not allow until you answer (at this terminal, or `stockade approve` "
        "from another); the default when stdin and stderr are a terminal.",
    ),
    RunOption(
        "stage",
        ("--stage",),
        False,
        "Keep the command's changes to the project in a stage: `stockade review` shows them, `stockade accept` applies them.",
    ),
    RunOption(
        "gpu",
        ("--gpu",),
        False,
        "Give the sandbox the host's GPUs: their device nodes and nothing else of /dev (as [devices] gpu = true).",
    ),
    RunOption(
        "mcp",
        ("--mcp",),
        True,
        "Run an agent's MCP server NAME under its own policy (~/.config/stockade/mcp/NAME.toml, else the built-in mcp profile).",
        "NAME",
    ),
    RunOption("no_approve", ("--no-approve",), False, "Refuse such a request at once, as without a terminal (agents' and CI runs)."),
    RunOption(
        "agent_session",
        ("--agent-session",),
        True,
        "The agent session this command belongs to (the agent hook gives it): notices are said once per session.",
        "ID",
    ),
    RunOption(
        "tool_call",
        ("--tool-call",),
        True,
        "The agent's tool call this command is (the agent hook gives it): every audit record of the run names it.",
        "ID",
    ),
)

BY_FLAG: dict[str, RunOption] = {flag: option for option in RUN_OPTIONS for flag in option.flags}


class RunArgs:
    """The parsed options: one attribute per RunOption.dest, and the command."""

    def __init__(self) -> None:
        self.policy: str | None = None
        self.profile: str | None = None
        self.shell: str | None = None
        self.dry_run = False
        self.quiet = False
        self.platform: str | None = None
        self.max_output: str | None = None
        self.ci = False
        self.report: str | None = None
        self.verbose = False
        self.trace = False
        self.approve = False
        self.no_approve = False
        self.stage = False
        self.gpu = False
        self.mcp: str | None = None
        self.agent_session: str | None = None
        self.tool_call: str | None = None
        self.command: list[str] = []


def parse_run_args(argv: list[str]) -> RunArgs:
    """Options up to `--` or the first word that is not an option; the rest is the command."""
    args = RunArgs()
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            args.command = argv[index + 1 :]
            break
        flag, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        option = BY_FLAG.get(flag)
        if option is None:
            if word.startswith("-") and word != "-":
                raise UsageError(_unknown_option(word, argv[index:]))
            args.command = argv[index:]
            break
        if option.takes_value:
            if eq:
                value = inline
            elif index + 1 < len(argv):
                index += 1
                value = argv[index]
            else:
                raise UsageError(f"run: {flag} needs a value ({option.metavar})")
            setattr(args, option.dest, value)
        elif eq:
            raise UsageError(f"run: {flag} takes no value")
        else:
            setattr(args, option.dest, True)
        index += 1
    if args.shell is not None:
        if args.command:
            raise UsageError("run: give either -c 'STRING' or a command after '--', not both")
        args.command = ["/bin/sh", "-c", args.shell]
    if not args.command:
        raise UsageError("run: no command given; usage: stockade run [OPTIONS] -- COMMAND [ARGS...]")
    if args.platform not in (None, "linux", "darwin"):
        raise UsageError(f"run: --platform must be linux or darwin, not {args.platform!r}")
    if args.platform and not args.dry_run and args.platform != host_platform():
        raise UsageError(f"run: --platform {args.platform} is for --dry-run inspection only on this {host_platform()} machine")
    return args


def host_platform() -> str:
    return "darwin" if sys.platform == "darwin" else "linux"


def max_output_bytes(value: str) -> int:
    """--max-output as bytes ("65536", "1M")."""
    from stockade.profiles.units import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise UsageError(f"run: --max-output {value!r}: {exc}") from None


def limited(max_output: str | None, go: Callable[[], Result]) -> Result:
    """Run `go` with its output capped by --max-output (agent hooks), else untouched."""
    if max_output is None:
        return go()
    limit = max_output_bytes(max_output)
    from stockade.cli.output_limit import OutputLimit

    with OutputLimit(limit):
        return go()


def _unknown_option(word: str, rest: list[str]) -> str:
    """The one line for an option `run` does not know: the option it is most likely a typo of, or, when
    the command itself starts here (a program named like an option), where to put the '--'."""
    flag = word.partition("=")[0]
    near = [f for f in BY_FLAG if f.startswith("--") and flag.startswith("--") and _one_edit_apart(flag[2:], f[2:])]
    if near:
        return f"run: unknown option {word!r} (did you mean {near[0]}?)"
    if "--" in rest:
        return f"run: unknown option {word!r}; `stockade run --help` lists the options"
    return f"run: unknown option {word!r}; put the command after '--' (stockade run -- {' '.join(rest)})"


def _one_edit_apart(a: str, b: str) -> bool:
    """One character inserted, removed or changed, or two neighbours swapped (difflib would cost the
    hot path its import)."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]:
            return True
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]
