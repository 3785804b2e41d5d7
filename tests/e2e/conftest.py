"""Real sandboxes: `stockade run` as a subprocess, a fake HOME with canaries, host-side checks.

The whole suite runs once as root and once as an unprivileged user (test.sh).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.netfixtures import NetWorld
from tests.sandboxed import require_sandbox
from tests.visible import force_rmtree, visible_root


@pytest.fixture(scope="session", autouse=True)
def _require_sandbox() -> None:
    require_sandbox()


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


@pytest.fixture(scope="module")
def net_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetWorld]:
    """Loopback origins, a resolver table and a HOME whose proxy daemon is this module's alone."""
    w = NetWorld(tmp_path_factory.mktemp("net"))
    try:
        yield w
    finally:
        w.close()
