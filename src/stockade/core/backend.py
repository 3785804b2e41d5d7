"""The interface every sandbox backend implements, and the request its planner works from.

`cli` turns the command line into an `Invocation` and hands it to the
platform's backend, which owns everything after that: reading the policy,
planning (and, on Linux, reusing a stored plan), the network session and
execution. `RunRequest` is an invocation with its policy read: what a
backend's planner turns into a plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.core.invocation import Invocation, RunResult
    from stockade.core.locations import Locations
    from stockade.profiles.model import Policy


@dataclass(frozen=True)
class RunRequest:
    """Everything a planner needs to sandbox one command."""

    policy: Policy
    command: tuple[str, ...]
    cwd: Path
    host_env: Mapping[str, str]
    locations: Locations
    quiet: bool = False  # no end-of-run summary on stderr
    verbose: bool = False  # the summary also says what the plan skipped
    session_id: str = ""  # names this run in the audit log (core.invocation.new_session_id)
    dry_run: bool = False  # only the plan is wanted: change nothing on the host
    mcp: str = ""  # the agent's MCP server this run is (`--mcp NAME`): named in its audit records

    @classmethod
    def of(cls, invocation: Invocation, policy: Policy, locations: Locations) -> RunRequest:
        return cls(
            policy=policy,
            command=tuple(invocation.command),
            cwd=Path(invocation.cwd),
            host_env=invocation.env,
            locations=locations,
            quiet=invocation.quiet,
            verbose=invocation.verbose,
            session_id=invocation.session_id,
            dry_run=invocation.dry_run,
            mcp=invocation.mcp or "",
        )


class Backend(Protocol):
    """A platform's whole `stockade run`."""

    name: str

    def run(self, invocation: Invocation) -> RunResult:
        """Read the policy, plan, run; the result's status is the exit code to leave with (128+N for signal N).

        Raises StockadeError when the command cannot be sandboxed (with the result so far as `partial`)."""

    def explain(self, invocation: Invocation) -> str:
        """The exact plan as text (`stockade run --dry-run`), changing nothing on the host."""
