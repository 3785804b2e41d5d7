"""Helpers for the agent-hook, CI and example tests: worlds the sandbox can see, real `stockade` runs.

Sandboxed runs use the installed console script (the one an agent hook would
name), with a HOME, project and outside folder on the sandbox's read-only
root (not under /tmp, which the sandbox replaces with a private one), so a
write outside the project meets the real wall.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.netkit import stop_daemon
from tests.sandboxed import MUST_SANDBOX, sandbox_unavailable
from tests.visible import force_rmtree, visible_root

STOCKADE = str(Path(sys.executable).parent / "stockade")


@pytest.fixture(scope="session")
def sandbox() -> None:
    """Tests that run a real sandbox ask for this: skipped where bwrap cannot work (failed under MUST_SANDBOX)."""
    reason = sandbox_unavailable() or (None if os.access(STOCKADE, os.X_OK) else f"no stockade executable at {STOCKADE}")
    if reason is None:
        return
    if MUST_SANDBOX:
        pytest.fail(f"STOCKADE_MUST_SANDBOX=1 but {reason}")
    pytest.skip(reason)


@dataclass
class World:
    """A HOME, a project and a folder outside every rule, all visible (read-only) inside the sandbox."""

    root: Path
    home: Path
    project: Path
    outside: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(
        self, argv: list[str], *, stdin: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, input=stdin, cwd=cwd or self.project, env={**self.env, **(env or {})},
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def stockade(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return self.run([STOCKADE, *args], stdin=stdin, env=env)


@pytest.fixture
def world() -> Iterator[World]:
    root = visible_root("i")
    runtime = Path(tempfile.mkdtemp(prefix="si"))  # short: the proxy daemon's control socket lives here
    home, project, outside = root / "home", root / "project", root / "outside"
    for folder in (home, project, outside):
        folder.mkdir()
    env = {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "XDG_RUNTIME_DIR": str(runtime),
        "STOCKADE_PROXY_IDLE": "20",
    }
    try:
        yield World(root=root, home=home, project=project, outside=outside, env=env)
    finally:
        stop_daemon(runtime / "stockade")
        force_rmtree(root)
        shutil.rmtree(runtime, ignore_errors=True)
