"""The one interface every sandbox backend implements: build, explain, run.

`cli` picks a backend by platform and never looks inside its plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from stockade.core.locations import Locations
from stockade.profiles.model import Policy


@dataclass(frozen=True)
class RunRequest:
    """Everything a backend needs to sandbox one command."""

    policy: Policy
    command: tuple[str, ...]
    cwd: Path
    host_env: Mapping[str, str]
    locations: Locations
    quiet: bool = False  # no end-of-run summary on stderr
    verbose: bool = False  # the summary also says what the plan skipped
    session_id: str = ""  # names this run in the audit log; made by the caller
    dry_run: bool = False  # only the plan is wanted: change nothing on the host
    troubles: list[str] = field(default_factory=list)  # filled by the backend: why the run's audit record is incomplete


class Backend(Protocol):
    name: str

    def build(self, request: RunRequest) -> Any:
        """Turn a request into a backend plan; raise StockadeError when it cannot be sandboxed."""

    def explain(self, plan: Any) -> str:
        """The exact plan as text, for `stockade run --dry-run`."""

    def run(self, plan: Any) -> int:
        """Run the plan and return the exit code to leave with (128+N for signal N)."""
