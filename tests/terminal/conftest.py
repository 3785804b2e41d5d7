"""A user's terminal, for real: an interactive bash on a pty (pexpect) runs each scenario once
bare and once under `stockade run`, and both must behave the same.

The HOME and project are on the sandbox's read-only root (tests/visible.py), not under /tmp.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.integration_support import STOCKADE
from tests.sandboxed import require_sandbox
from tests.terminal.shell import Shell, World
from tests.visible import force_rmtree, visible_root


@pytest.fixture(scope="session", autouse=True)
def _require_sandbox() -> None:
    require_sandbox()


@pytest.fixture
def world() -> Iterator[World]:
    root = visible_root("t")
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    bin_dir = str(Path(STOCKADE).parent)
    env = {
        "HOME": str(home),
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "PS1": "PROMPT$ ",
        "PS2": "",
        "INPUTRC": "/dev/null",
    }
    try:
        yield World(root=root, home=home, project=project, env=env)
    finally:
        force_rmtree(root)


@pytest.fixture
def shell(world: World) -> Iterator[Shell]:
    opened = Shell.start(world)
    try:
        yield opened
    finally:
        opened.close()


def need(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        pytest.skip(f"{program} is not installed")
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if os.sep + "terminal" + os.sep in str(item.path):
            item.add_marker(pytest.mark.sandbox)
