"""The Typer application: every command but the hot path of `run`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from stockade.cli import allow, approve, audit_cmd, check, doctor, explain, init, install, learn, mcp, review, trust, undo
from stockade.cli.run_options import RUN_OPTIONS
from stockade.cli.version import VERSION
from stockade.core.errors import ExitCode, StockadeError, UsageError

app = typer.Typer(
    name="stockade",
    help="Run any command inside the operating system's sandbox, from a per-project TOML policy.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _help(dest: str) -> str:
    """A run option's help, from the one table the lean parser uses (run_options.py)."""
    return next(option.help for option in RUN_OPTIONS if option.dest == dest)


def _version(value: bool) -> None:
    if value:
        print(f"stockade {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    """stockade: a sandbox you can leave switched on."""


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help="Run COMMAND inside the sandbox: stockade run [OPTIONS] -- COMMAND [ARGS...]",
)
def run(
    ctx: typer.Context,
    policy: Annotated[Path | None, typer.Option("--policy", "-p", help=_help("policy"), metavar="FILE")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help=_help("profile"), metavar="NAME")] = None,
    shell: Annotated[str | None, typer.Option("-c", help=_help("shell"), metavar="STRING")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help=_help("dry_run"))] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=_help("quiet"))] = False,
    platform: Annotated[str | None, typer.Option("--platform", help=_help("platform"), metavar="NAME")] = None,
    max_output: Annotated[str | None, typer.Option("--max-output", help=_help("max_output"), metavar="BYTES")] = None,
    ci: Annotated[bool, typer.Option("--ci", help=_help("ci"))] = False,
    report: Annotated[Path | None, typer.Option("--report", help=_help("report"), metavar="FILE")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help=_help("verbose"))] = False,
    trace: Annotated[bool, typer.Option("--trace", help=_help("trace"))] = False,
    approve: Annotated[bool, typer.Option("--approve", help=_help("approve"))] = False,
    no_approve: Annotated[bool, typer.Option("--no-approve", help=_help("no_approve"))] = False,
    stage: Annotated[bool, typer.Option("--stage", help=_help("stage"))] = False,
    gpu: Annotated[bool, typer.Option("--gpu", help=_help("gpu"))] = False,
    mcp_server: Annotated[str | None, typer.Option("--mcp", help=_help("mcp"), metavar="NAME")] = None,
    agent_session: Annotated[str | None, typer.Option("--agent-session", help=_help("agent_session"), metavar="ID")] = None,
    tool_call: Annotated[str | None, typer.Option("--tool-call", help=_help("tool_call"), metavar="ID")] = None,
) -> None:
    # Reached only through `stockade --debug run` variants that Typer parses; the
    # console script sends `run` to the lean parser first.
    from stockade.cli.run_command import run as lean_run

    argv: list[str] = []
    for flag, value in (
        ("--policy", policy), ("--profile", profile), ("-c", shell), ("--platform", platform),
        ("--max-output", max_output), ("--report", report), ("--agent-session", agent_session), ("--mcp", mcp_server),
        ("--tool-call", tool_call),
    ):  # fmt: skip
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--dry-run"] * dry_run + ["--quiet"] * quiet + ["--ci"] * ci + ["--verbose"] * verbose + ["--trace"] * trace
    argv += ["--approve"] * approve + ["--no-approve"] * no_approve + ["--stage"] * stage + ["--gpu"] * gpu
    raise typer.Exit(lean_run([*argv, "--", *ctx.args]) if ctx.args or shell else lean_run(argv))


app.command(name="check", help="Validate a policy and print the effective policy after extends and merge.")(check.check)
app.command(name="explain", help="Say in plain words what the effective policy allows and denies.")(explain.explain)
app.command(name="init", help="Write a commented starter .stockade.toml for this project.")(init.init)
app.command(name="doctor", help="Check that this machine can sandbox, and say how to fix what is missing.")(doctor.doctor)
app.command(name="allow", help="Add a host to [network] allow of this project's policy (comments kept), as every denial's hint says.")(allow.allow)
app.command(
    name="learn",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help="Run COMMAND in the sandbox, and propose the policy entries its refusals need (--write applies them): "
    "stockade learn [OPTIONS] -- COMMAND [ARGS...]. The command runs up to --rounds times, each round with what "
    "the earlier ones learned; the exit status is the last round's.",
)(learn.learn)
app.command(name="approve", help="Answer the requests a run holds for you (list and ask, or ID ANSWER; --watch keeps asking).")(approve.approve)
app.command(name="trust", help="Trust a project policy (record its hash), or --revoke that trust.")(trust.trust)
app.command(name="runs", help="List the runs that changed this project (RUN: what one changed), newest last.")(undo.runs)
app.command(
    name="undo", help="Put back what the last run changed in this project (RUN: a given one); undoing that undo makes the run's changes again."
)(undo.undo)
app.command(name="review", help="Show a staged run's changes to the project, marked ones first, with diffs.")(review.review)
app.command(name="accept", help="Apply a staged run's changes (PATH: only those; marked ones only when named or with --marked).")(review.accept)
app.command(name="reject", help="Drop a staged run's changes (PATH: only those).")(review.reject)
app.add_typer(mcp.app, name="mcp")
app.command(name="audit", help="Show the network audit log: what sandboxed commands tried to reach.")(audit_cmd.audit)
app.command(name="install", help="Add stockade's shell hook to a coding agent's settings (claude, codex, gemini, cursor), or --remove it.")(
    install.install
)


@app.command(
    name="hook",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help="Agent hook: read the agent's shell-tool JSON on stdin, answer with the command wrapped in `stockade run` "
    "(AGENT: claude, codex, gemini or cursor; option --max-output BYTES). Installed by `stockade install`.",
)
def hook(ctx: typer.Context, agent: Annotated[str, typer.Argument(metavar="AGENT")]) -> None:
    # The console script sends `hook` to the lean module first; Typer only shows the help.
    from stockade.cli.hook import main as hook_main

    raise typer.Exit(hook_main([agent, *ctx.args]))


class ClickFailure(StockadeError):
    """One of Click's own failures other than a usage error, with Click's exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _is_click_error(error: BaseException) -> bool:
    """Click's errors, by their documented interface (Typer raises them from a copy of Click of its own)."""
    return callable(getattr(error, "format_message", None)) and isinstance(getattr(error, "exit_code", None), int)


def usage_line(error: Exception) -> str:
    """A usage error as one line: the command, what is wrong, where the help is."""
    context = getattr(error, "ctx", None)
    path = context.command_path if context is not None else "stockade"
    where = path.removeprefix("stockade").strip()
    message = error.format_message().strip().rstrip(".")  # type: ignore[attr-defined]
    message = message[:1].lower() + message[1:]
    if where:
        return f"{where}: {message}; `{path} --help` lists the options"
    if message.startswith("option"):  # an option of a command, told before its context was made
        return f"{message}; `stockade COMMAND --help` lists a command's options"
    return f"{message}; `stockade --help` lists the commands"


def run_app(args: list[str]) -> int:
    """The Typer application's exit status. Click's usage errors (an unknown command or option,
    a missing value) are raised as stockade's, one line each and 2, and so are its other errors
    with their codes; stockade's own errors pass through: cli/main.py prints every one of them."""
    if not args:  # `stockade` alone: the help, on stderr, as a usage error's status
        import contextlib

        with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(SystemExit):
            app(args=["--help"], prog_name="stockade", standalone_mode=False)
        return ExitCode.USAGE
    try:
        result = app(args=args, prog_name="stockade", standalone_mode=False)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else ExitCode.USAGE)
    except typer.Abort:
        raise KeyboardInterrupt from None
    except StockadeError:
        raise
    except Exception as error:
        if not _is_click_error(error):
            raise
        if getattr(error, "ctx", False) is not False:  # a usage error carries the context it was told in
            raise UsageError(usage_line(error)) from None
        raise ClickFailure(error.format_message(), error.exit_code) from None  # type: ignore[attr-defined]
    return result if isinstance(result, int) else 0
