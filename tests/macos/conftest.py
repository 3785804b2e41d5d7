"""Fixtures for real Seatbelt runs (macOS only; see macos_support.PLATFORM)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.macos.macos_support import World


@pytest.fixture
def world(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> World:
    """$H, $P and $O under a resolved temp folder (Seatbelt compares resolved paths)."""
    return World(root=Path(os.path.realpath(tmp_path)), capfd=capfd)
