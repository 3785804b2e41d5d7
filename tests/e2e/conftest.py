"""Real sandboxes: `stockade run` as a subprocess, a fake HOME with canaries, host-side checks.

The whole suite runs once as root and once as an unprivileged user (test.sh).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from boxes import Box
from visible import force_rmtree, visible_root

MUST_SANDBOX = os.environ.get("STOCKADE_MUST_SANDBOX") == "1"


def _sandbox_works() -> str | None:
    """None when bwrap can create namespaces here, else why not."""
    for candidate in ("/usr/bin/bwrap", "/usr/local/bin/bwrap"):
        if os.access(candidate, os.X_OK):
            break
    else:
        return "bwrap is not installed"
    result = subprocess.run(
        [candidate, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "true"],
        capture_output=True, text=True,
    )
    return None if result.returncode == 0 else f"bwrap cannot create namespaces: {result.stderr.strip()}"


@pytest.fixture(scope="session", autouse=True)
def _require_sandbox() -> None:
    reason = _sandbox_works()
    if reason is None:
        return
    if MUST_SANDBOX:
        pytest.fail(f"STOCKADE_MUST_SANDBOX=1 but {reason}")
    pytest.skip(reason)


def _make_box(root: Path) -> Box:
    home = root / "home"
    project = root / "project"
    outside = root / "outside"
    for folder in (home / ".ssh", home / ".aws", project, outside):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_test").write_text("CANARY-SSH\n")
    (home / ".aws" / "credentials").write_text("CANARY-AWS\n")
    (outside / "secret.txt").write_text("CANARY-O\n")
    env = {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),  # the stockade under test
    }
    return Box(root=root, home=home, project=project, outside=outside, env=env)


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return _make_box(tmp_path)


@pytest.fixture
def vbox() -> Iterator[Box]:
    """A Box whose HOME, project and outside folder are on the sandbox's read-only root, not under /tmp."""
    root = visible_root("b")
    try:
        yield _make_box(root)
    finally:
        force_rmtree(root)
