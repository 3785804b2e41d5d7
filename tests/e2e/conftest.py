"""Real sandboxes: `stockade run` as a subprocess, a fake HOME with canaries, host-side checks.

The whole suite runs once as root and once as an unprivileged user (test.sh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from boxes import Box

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


# The escape suite needs HOME and the outside folder *visible* inside the
# sandbox: under /tmp (pytest's tmp_path) they sit below the sandbox's private
# /tmp, so a canary would be unreadable for the wrong reason and a write would
# fail with ENOENT instead of meeting the real wall. The runner's own home is
# on the read-only root for root and for the unprivileged test user alike.
VISIBLE_BASE = Path(os.environ.get("STOCKADE_E2E_VISIBLE_ROOT") or Path.home() / ".stockade-e2e")


def _force_rmtree(path: Path) -> None:
    """Remove a box even where a test left folders without write or search permission."""
    for folder, subdirs, _files in os.walk(path):
        for name in subdirs:
            target = os.path.join(folder, name)
            if not os.path.islink(target):
                try:
                    os.chmod(target, 0o700)
                except OSError:
                    pass
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def vbox() -> Iterator[Box]:
    """A Box whose HOME, project and outside folder are on the sandbox's read-only root, not under /tmp."""
    VISIBLE_BASE.mkdir(mode=0o700, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="b", dir=VISIBLE_BASE))
    try:
        yield _make_box(root)
    finally:
        _force_rmtree(root)
