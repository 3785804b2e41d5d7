"""Fixtures of the real-work suite: a sandbox that works (or a reason), and a fresh workplace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sandboxed import require_sandbox
from tests.visible import force_rmtree, visible_root
from tests.work.realwork import FIXED_DATES, Workplace


@pytest.fixture(scope="session", autouse=True)
def _require_sandbox() -> None:
    require_sandbox()


@pytest.fixture
def work() -> Iterator[Workplace]:
    root = visible_root("w")
    home = root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Work Test\n\temail = work@example.test\n[init]\n\tdefaultBranch = main\n"
        "[protocol \"file\"]\n\tallow = always\n[advice]\n\tdetachedHead = false\n"
    )
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **FIXED_DATES}
    try:
        yield Workplace(root, home, root / "project", env)
    finally:
        force_rmtree(root)
