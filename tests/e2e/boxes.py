"""The sandbox test harness: a project, a HOME with canaries, and `stockade run` as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Box:
    """One test's world: a project, a HOME with canaries, a folder outside every rule."""

    root: Path
    home: Path
    project: Path
    outside: Path
    env: dict[str, str] = field(default_factory=dict)

    def policy(self, text: str) -> Path:
        path = self.root / "policy.toml"
        path.write_text(text)
        return path

    def command_words(self, options: list[str] | None = None) -> list[str]:
        """`stockade run [options]`, for a run the test drives itself (Popen)."""
        return [sys.executable, "-m", "stockade.cli.main", "run", *(options or [])]

    def run(
        self,
        script: str | None = None,
        *,
        argv: list[str] | None = None,
        policy: str | None = None,
        options: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 60,
        **kwargs: object,
    ) -> subprocess.CompletedProcess[str]:
        """`stockade run [options] -- sh -c SCRIPT` (or argv) with this box's HOME."""
        words = self.command_words(options)
        if policy is not None:
            words += ["--policy", str(self.policy(policy))]
        command = argv if argv is not None else ["/bin/sh", "-c", script or "true"]
        return subprocess.run(
            [*words, "--", *command],
            cwd=cwd or self.project,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,  # type: ignore[arg-type]
        )
