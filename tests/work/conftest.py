"""Fixtures of the real-work suite: a sandbox that works (or a reason), and a fresh workplace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sandboxed import require_sandbox
from tests.visible import force_rmtree, visible_root
from tests.work.realwork import Workplace, home_environment


@pytest.fixture(scope="session", autouse=True)
def _require_sandbox() -> None:
    require_sandbox()


@pytest.fixture
def work() -> Iterator[Workplace]:
    root = visible_root("w")
    env = home_environment(root, "Work")
    try:
        yield Workplace(root, root / "home", root / "project", env)
    finally:
        force_rmtree(root)
