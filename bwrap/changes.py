"""What the run created or changed among files that run code later (ESCAPES 58, 62, 64, 68).

Two kinds, both found by one walk of the project before and after the run:
- ordinary project work that runs later (a Makefile, a conftest.py) stays
  writable, and the end-of-run summary names each one created or changed;
- floor files in places that did not exist at the start (a repository made
  with `git init` during the run) could not be held read-only, so each one
  created or changed is moved aside into the quarantine folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from stockade.bwrap import globs
from stockade.profiles.floor import reported_patterns, swept_patterns

Stamps = dict[str, tuple[int, int, int]]


@dataclass
class Snapshot:
    reported: Stamps = field(default_factory=dict)
    swept: Stamps = field(default_factory=dict)


def patterns(project: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return reported_patterns(project), swept_patterns(project)


def from_matches(project: str, matches: dict[str, list[str]]) -> Snapshot:
    """A snapshot from a walk that included `patterns(project)` (the planning walk does)."""
    reported, swept = patterns(project)
    return Snapshot(
        reported=_stamps(p for pattern in reported for p in matches[pattern]),
        swept=_stamps(p for pattern in swept for p in matches[pattern] if not p.endswith(".sample")),
    )


def take(project: str) -> Snapshot:
    reported, swept = patterns(project)
    matches, _notes = globs.expand((*reported, *swept))
    return from_matches(project, matches)


def _stamps(paths: object) -> Stamps:
    state: Stamps = {}
    for path in paths:  # type: ignore[attr-defined]
        try:
            info = os.lstat(path)
        except OSError:
            continue
        state[path] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return state


def changes(before: Stamps, after: Stamps) -> list[tuple[str, str]]:
    """(path, "created" | "changed") for each watched file the run touched."""
    found = [(path, "created") for path in after if path not in before]
    found += [(path, "changed") for path, stamp in after.items() if path in before and before[path] != stamp]
    return sorted(found)


def quarantine(paths: list[str], folder: Path) -> list[tuple[str, str]]:
    """Move each path (never following a link) under `folder`; (original, new place)."""
    import shutil

    moved: list[tuple[str, str]] = []
    for path in paths:
        if not os.path.lexists(path):
            continue
        target = folder / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.move(path, target)  # the project and the state folder may be on different filesystems
        moved.append((path, str(target)))
    return moved
