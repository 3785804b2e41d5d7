"""`stockade run`: parse the options, hand the platform's backend one Invocation, pass its status through.

The hot path: imports no Typer, Rich, psutil, pyseccomp or mitmproxy, and
nothing of the planner unless the backend has to plan.
"""

from __future__ import annotations

import os
import sys

from stockade.cli.run_options import RunArgs, host_platform, limited, max_output_bytes, parse_run_args
from stockade.core.errors import UsageError
from stockade.core.invocation import Invocation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from stockade.core.backend import Backend

DEFAULT_APPROVE_SECONDS = 60
APPROVE_SECONDS_VARIABLE = "STOCKADE_APPROVE_SECONDS"


def backend_for(platform: str) -> Backend:
    if platform == "darwin":
        from stockade.seatbelt.run import MacOSBackend

        return MacOSBackend()
    from stockade.bwrap.run import LinuxBackend

    return LinuxBackend()


def run(argv: list[str]) -> int:
    """Parse and run; StockadeError propagates to the caller's one handler."""
    args = parse_run_args(argv)
    if args.max_output is not None:
        max_output_bytes(args.max_output)  # a bad value is a usage error before anything runs
    invocation = invocation_of(args)
    backend = backend_for(args.platform or host_platform())
    if args.dry_run:
        sys.stdout.write(backend.explain(invocation))
        return 0
    if args.ci or args.report:
        from stockade.cli.ci import run_ci  # CI mode only: the plain hot path never loads it

        execute = lambda: limited(args.max_output, lambda: backend.run(invocation))  # noqa: E731
        return run_ci(invocation, execute, report=args.report, announce=args.ci and not args.quiet)
    return limited(args.max_output, lambda: backend.run(invocation)).status


def invocation_of(args: RunArgs) -> Invocation:
    """The parsed options as plain inputs: no backend sees a CLI type."""
    policy_file, profile = args.policy, args.profile
    if args.mcp is not None:
        from stockade.cli.mcp_policy import server_policy

        if policy_file or profile:
            raise UsageError("run: --mcp chooses the server's own policy; give it without --policy or --profile")
        policy_file, profile = server_policy(args.mcp, os.environ)
    return Invocation(
        list(args.command),
        os.getcwd(),
        os.environ,
        policy_file=policy_file,
        profile=profile,
        quiet=args.quiet,
        verbose=args.verbose,
        dry_run=args.dry_run,
        reuse_plans=not (args.dry_run or args.ci or args.report or args.platform),
        trace=args.trace,
        stage=args.stage,
        gpu=args.gpu,
        mcp=args.mcp,
        want_findings=bool(args.ci or args.report),  # the report carries the sandbox's refusals
        approve=approve_seconds(args, os.environ),
        agent_session=session_name(args.agent_session),
        tool_call=session_name(args.tool_call),
    )


def session_name(raw: str | None) -> str | None:
    """--agent-session as a safe file name (imported only when given: the lean path stays lean)."""
    if not raw:
        return None
    from stockade.core.notices import session_name as name

    return name(raw)


def approve_seconds(args: RunArgs, env: Mapping[str, str]) -> int:
    """How long a refused request waits for the user's answer (proxy/filter/approvals.py); 0 for not at all.
    On by itself only for a person at a terminal: stdin and stderr both are one."""
    if args.no_approve:
        if args.approve:
            raise UsageError("run: give either --approve or --no-approve, not both")
        return 0
    if not args.approve and not (_isatty(0) and _isatty(2)):
        return 0
    text = env.get(APPROVE_SECONDS_VARIABLE, "")
    if not text:
        return DEFAULT_APPROVE_SECONDS
    if not text.isdigit() or not 1 <= int(text) <= 300:
        raise UsageError(f"{APPROVE_SECONDS_VARIABLE}={text!r}: give a number of seconds from 1 to 300")
    return int(text)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
