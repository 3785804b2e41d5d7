"""Console entry point: sends `run` to the lean path, everything else to Typer."""

from __future__ import annotations

import os
import sys

from stockade.core.errors import ExitCode, StockadeError
from stockade.profiles.text import say

HELP_FLAGS = frozenset({"-h", "--help"})


def _report(error: BaseException, debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exception(error)
    say(f"stockade: error: {error}")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = False
    while args and args[0] == "--debug":
        debug = True
        args.pop(0)
    if args == ["--version"]:  # answered without loading Typer and Rich
        from stockade.cli.version import VERSION

        print(f"stockade {VERSION}")
        return 0
    if args and args[0] == "run" and not (HELP_FLAGS & set(_run_options_part(args[1:]))):
        try:
            return _run(args[1:])
        except StockadeError as error:
            _report(error, debug)
            return int(error.exit_code)
        except KeyboardInterrupt:
            return ExitCode.SIGNAL_BASE + 2
        except Exception as error:  # the last resort: one line, and "could not set up"
            from stockade.cli.failure import report

            report(error, debug)
            return ExitCode.SETUP
    if args and args[0] == "hook" and not (HELP_FLAGS & set(args[1:])):
        from stockade.cli.hook import main as hook_main  # on every agent command: no Typer, no Rich

        return hook_main(args[1:])
    try:
        from stockade.cli.app import run_app

        return run_app(args, debug=debug)
    except Exception as error:  # anything run_app did not turn into a line already
        from stockade.cli.failure import report

        report(error, debug)
        return ExitCode.USAGE


def _run(argv: list[str]) -> int:
    """A stored plan whose inputs are unchanged runs without planning (bwrap/plan_cache.py)."""
    if sys.platform.startswith("linux"):
        from stockade.cli.run_options import limited, parse_run_args

        if os.environ.get("STOCKADE_SANDBOX") == "1":
            from stockade.cli.nested import inside_stockade, run_as_is

            if inside_stockade():
                args = parse_run_args(argv)
                return run_as_is(args.command, args.quiet, args.dry_run)
        from stockade.bwrap.journal import finish_abandoned
        from stockade.core.locations import state_folder

        _say_moved(finish_abandoned(state_folder(os.environ), "abandoned"))
        from stockade.bwrap import plan_cache

        args = parse_run_args(argv)
        found = plan_cache.cached_launch(args) if plan_cache.enabled(args) else None
        if found is not None:
            from stockade.bwrap.execute import execute

            launch, note = found
            if note and not args.quiet:
                say(note)
            session = os.urandom(6).hex()
            bridge = None
            if launch.session_rules is not None:
                from stockade.bwrap.network import Bridge
                from stockade.core.locations import locate

                bridge = Bridge(session, launch.session_rules, locate(), tuple(launch.command), launch.cwd)
            return limited(args.max_output, lambda: execute(launch, session, bridge))
    from stockade.cli.run_command import run

    return run(argv)


def _say_moved(moved: list[tuple[str, str]]) -> None:
    for original, new in moved:
        say(f"stockade: {original} was created by an earlier run that was killed before its check; renamed to {new}")


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
    sys.exit(main())
