"""`stockade run`: the hot path. Imports no Typer, Rich, psutil, pyseccomp or mitmproxy.

It reads the policy, asks the platform's backend for a plan, and runs it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from stockade.cli.run_options import BY_FLAG
from stockade.profiles.backend import RunRequest
from stockade.profiles.errors import UsageError
from stockade.profiles.locations import locate
from stockade.profiles.resolve import Resolution, resolve

if TYPE_CHECKING:
    from stockade.profiles.backend import Backend


@dataclass
class RunArgs:
    policy: str | None = None
    profile: str | None = None
    shell: str | None = None
    dry_run: bool = False
    quiet: bool = False
    platform: str | None = None
    max_output: str | None = None
    ci: bool = False
    report: str | None = None
    command: list[str] = field(default_factory=list)


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
                raise UsageError(f"run: unknown option {word!r}; put the command after '--' (stockade run -- {' '.join(argv[index:])})")
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
    if args.platform and not args.dry_run and args.platform != _host_platform():
        raise UsageError(f"run: --platform {args.platform} is for --dry-run inspection only on this {_host_platform()} machine")
    return args


def _host_platform() -> str:
    return "darwin" if sys.platform == "darwin" else "linux"


def backend_for(platform: str) -> Backend:
    if platform == "darwin":
        from stockade.seatbelt.backend import SeatbeltBackend

        return SeatbeltBackend()
    from stockade.bwrap.backend import BwrapBackend

    return BwrapBackend()


def untrusted_note(resolution: Resolution) -> str | None:
    """One line saying an untrusted project policy was only allowed to narrow."""
    if resolution.trusted or resolution.project_file is None:
        return None
    ignored = f" (ignored: {'; '.join(resolution.dropped)})" if resolution.dropped else ""
    return (
        f"stockade: {resolution.project_file} is not trusted, so it can only narrow your own policy{ignored}; "
        f"to trust it: stockade trust {resolution.project_file}"
    )


def run(argv: list[str]) -> int:
    """Parse, resolve, build and run; StockadeError propagates to the caller's one handler."""
    args = parse_run_args(argv)
    cwd = Path(os.getcwd())
    locations = locate()
    resolution = resolve(
        cwd,
        locations,
        policy_file=Path(args.policy) if args.policy else None,
        profile=args.profile,
    )
    note = untrusted_note(resolution)
    if note and not args.quiet:
        print(note, file=sys.stderr)
    platform = args.platform or _host_platform()
    request = RunRequest(
        policy=resolution.policy,
        command=tuple(args.command),
        cwd=cwd,
        host_env=dict(os.environ),
        locations=locations,
        quiet=args.quiet,
        session_id=os.urandom(6).hex(),
    )
    limit = _output_limit(args.max_output)
    if (args.ci or args.report) and not args.dry_run:
        from stockade.cli.ci import run_ci  # CI mode only: the plain hot path never loads it

        return run_ci(request, lambda: _execute(args, request, platform, limit), report=args.report, announce=args.ci and not args.quiet)
    return _execute(args, request, platform, limit)


def _execute(args: RunArgs, request: RunRequest, platform: str, limit: int | None) -> int:
    if platform == "darwin" and not args.dry_run:
        from stockade.seatbelt.network import run as run_on_macos

        return _limited(limit, lambda: run_on_macos(request))
    backend = backend_for(platform)
    plan = backend.build(request)
    if args.dry_run:
        sys.stdout.write(backend.explain(plan))
        return 0
    return _limited(limit, lambda: backend.run(plan))


def _limited(limit: int | None, go: Callable[[], int]) -> int:
    """Run `go` with its output capped by --max-output (agent hooks), else untouched."""
    if limit is None:
        return go()
    from stockade.cli.output_limit import OutputLimit

    with OutputLimit(limit):
        return go()


def _output_limit(value: str | None) -> int | None:
    """--max-output as bytes ("65536", "1M"); None when not given."""
    if value is None:
        return None
    from stockade.profiles.units import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise UsageError(f"run: --max-output {value!r}: {exc}") from None
