"""After a run: protected files that could not be held read-only (their folder did not
exist yet) and were created inside the sandbox are moved aside, never deleted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def sweep_unguarded(paths: list[str], quarantine: Path) -> list[tuple[str, str]]:
    moved: list[tuple[str, str]] = []
    for path in paths:
        if not os.path.lexists(path):
            continue
        target = quarantine / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.move(path, target)  # the project and the state folder may be on different filesystems
        moved.append((path, str(target)))
    return moved
