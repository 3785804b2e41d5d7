"""Console entry point: sends `run` to the lean path, everything else to Typer."""

from __future__ import annotations

import os
import sys

from stockade.core import phases
from stockade.core.errors import ExitCode, StockadeError
from stockade.profiles.text import say

HELP_FLAGS = frozenset({"-h", "--help"})
_ran = False  # this process took the lean `run` path (see `exit_with`)


def main(argv: list[str] | None = None) -> int:
    """The one place a failure becomes its line and its exit code (httpie's shape): a
    `StockadeError` says what and how to fix it, with its class's code; Ctrl-C ends as SIGINT
    does; anything else is one line (cli/failure.py), 125 for `run` and 2 for the rest, its
    traceback only with --debug. `program` below catches nothing."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = False
    while args and args[0] == "--debug":
        debug = True
        args.pop(0)
    running = _is_run(args)
    debug = debug or (not running and "--debug" in args)
    if running:
        global _ran
        _ran = True
        _die_by_ctrl_c()
        phases.mark("start")
    try:
        return program(args)
    except StockadeError as error:
        if debug:
            import traceback

            traceback.print_exception(error)
        say(f"stockade: error: {error}")
        return int(error.exit_code)
    except KeyboardInterrupt:
        if running:  # Ctrl-C before the sandbox started: stockade ends by it
            from stockade.core import ending

            ending.end_by(2)
        return ExitCode.SIGNAL_BASE + 2
    except Exception as error:  # the last resort: one line, and "could not set up" for a run
        from stockade.cli.failure import report

        report(error, debug)
        return ExitCode.SETUP if running else ExitCode.USAGE
    finally:
        if running and phases.ENABLED:
            say(phases.said())


def program(args: list[str]) -> int:
    """What the words ask for, as an exit status: `run` and `hook` on their lean paths (no
    Typer, no Rich), everything else through the Typer application. Raises what goes wrong."""
    if args == ["--version"]:  # answered without loading Typer and Rich
        from stockade.cli.version import VERSION

        print(f"stockade {VERSION}")
        return 0
    if _is_run(args):
        return _run(args[1:])
    if args and args[0] == "hook" and not (HELP_FLAGS & set(args[1:])):
        from stockade.cli.hook import main as hook_main  # on every agent command: no Typer, no Rich

        return hook_main(args[1:])
    from stockade.cli.app import run_app

    return run_app(args)


def _is_run(args: list[str]) -> bool:
    return bool(args) and args[0] == "run" and not (HELP_FLAGS & set(_run_options_part(args[1:])))


def _die_by_ctrl_c() -> None:
    """A Ctrl-C before the sandbox exists ends `run` at once by SIGINT, as SIGTERM does: Python's
    KeyboardInterrupt can land in a callback that swallows it (an import lock's), and the run would
    go on. The sandbox's own handling takes over once it starts (bwrap/running/supervise.py Relay)."""
    import _signal

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:  # not ignored by our parent
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)


def exit_with(code: int) -> None:
    """End the process with `code` (the console script's last step).

    After a `run`, the interpreter's own teardown (freeing every module and
    object, 3 to 5 ms on 2 cores) is skipped: nothing on that path registers
    an atexit handler or leaves a file half written, and stdout and stderr
    are flushed here first. A stdout that is a closed pipe loses nothing
    there is to lose, and no "Exception ignored" line is printed for it.
    Every other command exits the usual way (Rich, Typer and logging have
    their own exit work)."""
    from stockade.core import ending

    if _ran or ending.pending() is not None:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:  # None: the fd was closed when stockade started
                    stream.flush()
            except (OSError, ValueError):
                pass
        ending.finish()  # the command was killed by a signal that came through stockade: so is stockade
    if _ran:
        os._exit(code & 0xFF)
    sys.exit(code)


def _run(argv: list[str]) -> int:
    """Inside a stockade sandbox already, the command runs as it is (nested.py); else the backend runs it."""
    if sys.platform.startswith("linux") and os.environ.get("STOCKADE_SANDBOX") == "1":
        from stockade.cli.nested import inside_stockade, run_as_is

        if inside_stockade():
            from stockade.cli.run_options import parse_run_args

            args = parse_run_args(argv)
            return run_as_is(args.command, args.quiet, args.dry_run)
    from stockade.cli.run_command import run

    return run(argv)


def _run_options_part(args: list[str]) -> list[str]:
    """The words before the command: `stockade run -- ls --help` is not a help request."""
    from stockade.cli.run_options import BY_FLAG

    out: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word == "--" or not word.startswith("-"):
            break
        out.append(word)
        option = BY_FLAG.get(word)
        skip = bool(option and option.takes_value)
    return out


if __name__ == "__main__":
    exit_with(main())
