"""The Typer application: every command but the hot path of `run`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

try:  # the click Typer raises from: its own copy (typer 0.20 and later), else click itself
    from typer._click import exceptions as clicks
except ImportError:  # pragma: no cover - an older Typer
    from click import exceptions as clicks  # type: ignore[no-redef]

from stockade.cli import allow, approve, audit_cmd, check, doctor, explain, init, install, learn, trust
from stockade.cli.console import error_line
from stockade.cli.run_options import RUN_OPTIONS
from stockade.cli.version import VERSION
from stockade.core.errors import ExitCode, StockadeError

app = typer.Typer(
    name="stockade",
    help="Run any command inside the operating system's sandbox, from a per-project TOML policy.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    no_args_is_help=True,
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
    agent_session: Annotated[str | None, typer.Option("--agent-session", help=_help("agent_session"), metavar="ID")] = None,
) -> None:
    # Reached only through `stockade --debug run` variants that Typer parses; the
    # console script sends `run` to the lean parser first.
    from stockade.cli.run_command import run as lean_run

    argv: list[str] = []
    for flag, value in (
        ("--policy", policy), ("--profile", profile), ("-c", shell), ("--platform", platform),
        ("--max-output", max_output), ("--report", report), ("--agent-session", agent_session),
    ):  # fmt: skip
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--dry-run"] * dry_run + ["--quiet"] * quiet + ["--ci"] * ci + ["--verbose"] * verbose + ["--trace"] * trace
    argv += ["--approve"] * approve + ["--no-approve"] * no_approve
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


def usage_line(error: clicks.UsageError) -> str:
    """A usage error as one line: the command, what is wrong, where the help is."""
    path = error.ctx.command_path if error.ctx is not None else "stockade"
    where = path.removeprefix("stockade").strip()
    message = error.format_message().strip().rstrip(".")
    message = message[:1].lower() + message[1:]
    if where:
        return f"{where}: {message}; `{path} --help` lists the options"
    if message.startswith("option"):  # an option of a command, told before its context was made
        return f"{message}; `stockade COMMAND --help` lists a command's options"
    return f"{message}; `stockade --help` lists the commands"


def run_app(args: list[str], *, debug: bool = False) -> int:
    """Run Typer with one error handler: one line on stderr, DESIGN.md exit codes.

    Click's usage errors (an unknown command or option, a missing value) become
    one line with exit 2, like stockade's own errors, which are caught here, once.
    """
    debug = debug or "--debug" in args
    try:
        result = app(args=args, prog_name="stockade", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except clicks.UsageError as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # `stockade` alone: the help, as --help shows it
            print(error.ctx.get_help() if error.ctx is not None else "", file=sys.stderr)
            return ExitCode.USAGE
        error_line(usage_line(error))
        return ExitCode.USAGE
    except clicks.ClickException as error:
        error_line(error.format_message())
        return int(error.exit_code)
    except typer.Abort:
        return ExitCode.SIGNAL_BASE + 2
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else ExitCode.USAGE)
    except StockadeError as error:
        if debug:
            import traceback

            traceback.print_exception(error)
        error_line(str(error))
        return int(error.exit_code)
    except KeyboardInterrupt:
        return ExitCode.SIGNAL_BASE + 2
    except Exception as error:  # the last resort (cli/failure.py): one line, never a traceback
        from stockade.cli.failure import report

        report(error, debug)
        return ExitCode.USAGE
    return 0
