"""One `stockade run` as plain inputs: what the CLI hands a backend, and what the backend reports back.

A plain class, not a dataclass: it is made before every sandboxed command,
on the path a stored plan takes, where importing dataclasses would cost more
than the rest of the decision.
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
    """The command, where and how it was asked to run; the backend fills in policy, locations, troubles and findings."""

    __slots__ = (
        "command", "cwd", "env", "policy_file", "profile", "quiet", "verbose", "dry_run", "reuse_plans", "session_id", "trace",
        "additions", "approve", "policy", "locations", "troubles", "findings", "agent_session", "policy_note",
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
        findings: dict[str, object] | None = None,
        approve: int = 0,
        agent_session: str | None = None,
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
        self.policy: Policy | None = None  # the effective policy, once the backend has read it
        self.locations: Locations | None = None  # stockade's folders, once the backend has found them
        self.troubles: list[str] = []  # why the run's audit record may be incomplete (the daemon died...)
        # Given as {} by a caller that wants the run's refusals as data (learn, --report); the
        # backend fills "files", "network", "limits", "moved" and "no_route" (see bwrap/running/execute.py).
        self.findings = findings
        self.policy_note = ""  # what of an untrusted policy file was ignored (resolve.untrusted_note): a CI summary shows it
