"""One `stockade run`: the inputs the CLI hands a backend (`Invocation`), and what the run reports back (`RunResult`).

Plain classes, not dataclasses: both are made for every sandboxed command,
on the path a stored plan takes, where importing dataclasses would cost more
than the rest of the decision. A backend never writes into an `Invocation`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from stockade.core.locations import Locations
    from stockade.profiles.model import Policy


def new_session_id() -> str:
    """Names one run in the audit log and the daemon: 12 hex digits, made here and nowhere else."""
    return os.urandom(6).hex()


class Invocation:
    """The command, where and how it was asked to run: inputs only."""

    __slots__ = (
        "command", "cwd", "env", "policy_file", "profile", "quiet", "verbose", "dry_run", "reuse_plans", "session_id", "trace",
        "additions", "approve", "want_findings", "agent_session", "stage", "gpu", "mcp", "tool_call",
    )  # fmt: skip

    def __init__(
        self,
        command: list[str],
        cwd: str,
        env: Mapping[str, str],
        *,
        policy_file: str | None = None,
        profile: str | None = None,
        quiet: bool = False,
        verbose: bool = False,
        dry_run: bool = False,
        reuse_plans: bool = True,
        session_id: str = "",
        trace: bool = False,
        additions: str | None = None,
        want_findings: bool = False,
        approve: int = 0,
        agent_session: str | None = None,
        stage: bool = False,
        gpu: bool = False,
        mcp: str | None = None,
        tool_call: str | None = None,
    ) -> None:
        self.command = command
        self.cwd = cwd  # as the user's shell spells it (os.getcwd())
        self.env = env  # the host environment the command was started from
        self.policy_file = policy_file  # --policy
        self.profile = profile  # --profile
        self.quiet = quiet  # no end-of-run summary on stderr
        self.verbose = verbose  # the summary also says what the plan skipped
        self.dry_run = dry_run  # only the plan is wanted: change nothing on the host
        self.reuse_plans = reuse_plans  # a stored plan may be used and this one stored (not for CI reports)
        self.session_id = session_id or new_session_id()
        self.trace = trace  # --trace: trace the sandbox's file syscalls and report the refused ones
        # TOML of one more layer, applied last as the user's own (stockade learn's later rounds)
        self.additions = additions
        self.approve = approve  # seconds a refused request waits for the user's answer (proxy/filter/approvals.py); 0: none
        self.agent_session = agent_session  # the agent session's id (core/notices.py): its notices are said once
        self.tool_call = tool_call  # the agent's tool call this run is (the hook gives it): named in every audit record
        # the run's refusals as data in its result (RunResult.findings): stockade learn, --ci, --report
        self.want_findings = want_findings
        self.mcp = mcp  # --mcp NAME: the agent's MCP server this run is (cli/mcp_policy.py), named in the audit
        self.gpu = gpu  # --gpu: the host's GPU device nodes inside ([devices], bwrap/parts/devices.py)
        self.stage = stage  # --stage: the project's changes wait in a stage for review (checkpoints/stage.py)


class RunResult:
    """What one run reports back: the command's status, and what a CI report or `stockade learn` reads.

    A backend that fails after reading the policy raises its StockadeError with the result so far
    as `error.partial`, so a CI report still names the policy that was read."""

    __slots__ = ("status", "policy", "locations", "policy_note", "troubles", "findings")

    def __init__(self, want_findings: bool = False) -> None:
        self.status = 0  # the exit code to leave with (128+N for signal N)
        self.policy: Policy | None = None  # the effective policy, once read (not on the stored plan's path)
        self.locations: Locations | None = None  # stockade's folders, once found
        self.policy_note = ""  # what of an untrusted policy file was ignored (resolve.untrusted_note)
        self.troubles: list[str] = []  # why the run's audit record may be incomplete (the daemon died...)
        # With want_findings: "files", "network", "limits", "moved" and "no_route" (bwrap/running/execute.py)
        self.findings: dict[str, object] | None = {} if want_findings else None
