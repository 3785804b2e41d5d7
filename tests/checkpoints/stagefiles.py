"""A stage's upper folder made by hand, as overlay makes one."""

from __future__ import annotations

import os
from pathlib import Path


def whiteout(path: Path) -> None:
    """A removal as overlay writes it: a character device 0/0 (anyone may make one)."""
    os.mknod(path, 0o20000 | 0o600, os.makedev(0, 0))
