"""`stockade run`: the hot path. Imports no Typer, Rich, psutil, pyseccomp or mitmproxy.

It reads the policy, asks the platform's backend for a plan, and runs it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stockade.cli.run_options import RunArgs, host_platform, limited, max_output_bytes, parse_run_args
from stockade.core.backend import RunRequest
from stockade.core.locations import locate
from stockade.profiles.resolve import Resolution, resolve
from stockade.profiles.text import say

if TYPE_CHECKING:
    from stockade.bwrap.plan_cache import Recorder as PlanRecorder
    from stockade.core.backend import Backend


def backend_for(platform: str) -> Backend:
    if platform == "darwin":
        from stockade.seatbelt.backend import SeatbeltBackend

        return SeatbeltBackend()
    from stockade.bwrap.backend import BwrapBackend

    return BwrapBackend()


def untrusted_note(resolution: Resolution) -> str | None:
    """One line saying what of an untrusted project policy was ignored and what was kept; none when
    nothing was ignored (the run is what the file says, trusted or not)."""
    if resolution.trusted or resolution.project_file is None or not resolution.dropped:
        return None
    kept = f"kept: {', '.join(resolution.kept)}" if resolution.kept else "none of its own rules apply"
    why = "changed since you trusted it" if resolution.changed else "not trusted"
    return (
        f"stockade: {resolution.project_file} is {why}, so it can only narrow your own policy "
        f"(ignored: {'; '.join(resolution.dropped)}; {kept}); to trust it: stockade trust {resolution.project_file}"
    )


def run(argv: list[str]) -> int:
    """Parse, resolve, build and run; StockadeError propagates to the caller's one handler."""
    args = parse_run_args(argv)
    recorder = None
    if not args.platform or args.platform == "linux":
        from stockade.bwrap import plan_cache
        from stockade.bwrap.placeholders import clear_leftovers

        clear_leftovers(str(locate().state))  # before recording: no plan depends on this folder

        if plan_cache.enabled(args):
            recorder = plan_cache.Recorder().start()  # what planning reads decides when the plan is stale
    try:
        return _plan_and_run(args, recorder)
    finally:
        if recorder is not None:
            recorder.stop()


def _plan_and_run(args: RunArgs, recorder: PlanRecorder | None) -> int:
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
        say(note)
    platform = args.platform or host_platform()
    request = RunRequest(
        policy=resolution.policy,
        command=tuple(args.command),
        cwd=cwd,
        host_env=dict(os.environ),
        locations=locations,
        quiet=args.quiet,
        verbose=args.verbose,
        session_id=os.urandom(6).hex(),
        dry_run=args.dry_run,
    )
    limit = args.max_output
    if limit is not None:
        max_output_bytes(limit)  # a bad value is a usage error before anything runs
    if (args.ci or args.report) and not args.dry_run:
        from stockade.cli.ci import run_ci  # CI mode only: the plain hot path never loads it

        return run_ci(request, lambda: _execute(args, request, platform, limit), report=args.report, announce=args.ci and not args.quiet)
    return _execute(args, request, platform, limit, recorder, note)


def _execute(
    args: RunArgs, request: RunRequest, platform: str, limit: str | None, recorder: PlanRecorder | None = None, note: str | None = None
) -> int:
    if platform == "darwin" and not args.dry_run:
        from stockade.seatbelt.network import run as run_on_macos

        return limited(limit, lambda: run_on_macos(request))
    backend = backend_for(platform)
    plan = backend.build(request)
    if args.dry_run:
        sys.stdout.write(backend.explain(plan))
        return 0
    if recorder is not None:
        recorder.stop()
        _remember(args, plan, recorder, note)
    return limited(limit, lambda: backend.run(plan))


def _remember(args: RunArgs, plan: object, recorder: PlanRecorder, note: str | None) -> None:
    """Store the plan for the next run with the same inputs (bwrap/plan_cache.py)."""
    from stockade.bwrap import plan_cache
    from stockade.bwrap.backend import BwrapPlan, launch_of

    if isinstance(plan, BwrapPlan):
        audit_log = plan.policy.audit.log
        plan_cache.store(
            plan_cache.run_key(args), launch_of(plan), recorder, plan.view.walk, note, _audit_files(audit_log),
            (plan.view.socket_scope, plan.view.sockets),
        )


def _audit_files(log: str | None) -> tuple[str, ...]:
    """A custom audit log and its rotated generations: stockade's own files, made before planning
    (bwrap/backend.py), which the plan counts by identity, not content."""
    if not log:
        return ()
    from pathlib import Path

    from stockade.proxy.audit import KEEP_ROTATED, rotated_path

    return tuple(str(rotated_path(Path(log), generation)) for generation in range(KEEP_ROTATED + 1))
