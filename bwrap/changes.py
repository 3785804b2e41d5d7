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


QUARANTINE_SUFFIX = ".stockade-quarantine-"


def quarantine(paths: list[str], session: str, roots: list[str] | None = None) -> list[tuple[str, str]]:
    """Rename each path to NAME.stockade-quarantine-SESSION in its own folder; (original, new name).

    The folder is reached from its writable root one component at a time
    with O_NOFOLLOW, and the rename happens relative to that folder's fd: a
    concurrent sandbox that swaps a parent for a symlink makes the move fail,
    never aims it at a host file. Renamed files no longer have the name that
    makes a tool run them, and stay where the user will see them.
    """
    moved: list[tuple[str, str]] = []
    for path in paths:
        parent = _open_parent(path, roots or ["/"])
        if parent is None:
            continue
        name = os.path.basename(path)
        new_name = f"{name}{QUARANTINE_SUFFIX}{session}"
        try:
            os.rename(name, new_name, src_dir_fd=parent, dst_dir_fd=parent)
            moved.append((path, os.path.join(os.path.dirname(path), new_name)))
        except OSError:
            pass
        finally:
            os.close(parent)
    return moved


def _open_parent(path: str, roots: list[str]) -> int | None:
    """An O_PATH fd of path's folder, reached from its writable root without following links."""
    inside = [root for root in roots if path == root or path.startswith(root.rstrip("/") + "/")]
    if not inside:
        return None
    root = max(inside, key=len)
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return None
    for part in os.path.relpath(os.path.dirname(path), root).split("/"):
        if part in ("", "."):
            continue
        try:
            child = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = child
    return fd
