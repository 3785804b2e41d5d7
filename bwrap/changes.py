"""Files that run code later and are ordinary project work: noticed, not blocked (ESCAPES 64, 68).

A Makefile or a conftest.py must stay writable for a build to work, so the
end-of-run summary names every such file that the run created or changed.
"""

from __future__ import annotations

import os

from stockade.bwrap import globs
from stockade.profiles.floor import reported_patterns

Snapshot = dict[str, tuple[int, int, int]]


def snapshot(project: str) -> Snapshot:
    matches, _notes = globs.expand(reported_patterns(project))
    return stamps(matches)


def stamps(matches: dict[str, list[str]]) -> Snapshot:
    """lstat stamps of every matched path (the planning walk shares its results here)."""
    state: Snapshot = {}
    for paths in matches.values():
        for path in paths:
            try:
                info = os.lstat(path)
            except OSError:
                continue
            state[path] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return state


def changes(before: Snapshot, after: Snapshot) -> list[tuple[str, str]]:
    """(path, "created" | "changed") for each watched file the run touched."""
    found = [(path, "created") for path in after if path not in before]
    found += [(path, "changed") for path, stamp in after.items() if path in before and before[path] != stamp]
    return sorted(found)
