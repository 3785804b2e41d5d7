"""What the run created or changed among files that run code later (ESCAPES 58, 62, 64, 68).

Two kinds, both found by walking the project before and after the run:
- ordinary project work that runs later (a Makefile, a conftest.py) stays
  writable, and the end-of-run summary names each one created or changed;
- floor files in places that did not exist at the start (a repository made
  with `git init` during the run) could not be held read-only, so each one
  created or changed is moved aside into the quarantine folder.

The walk before the run records every project folder with its stamp (inode,
mtime, ctime: any entry added, removed or renamed changes them) and a digest
of its entries. After the run a folder with the same stamp is not listed; one
whose stamp changed is listed, and only if its entries differ (not just the
placeholders that came and went) are they matched against the patterns. The
files seen before are stamped again one by one. A run that created nothing
imports no pattern matcher.
"""

from __future__ import annotations

import os

from stockade.bwrap import folders

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from stockade.bwrap.globs import Tree

Stamps = dict[str, tuple[int, int, int, int]]  # inode, size, mtime, ctime (mtime can be set back, ctime cannot)


class Snapshot:
    """Runs-later files at one moment, and the project's folders (None when the walk was cut short)."""

    __slots__ = ("reported", "swept", "tree")

    def __init__(self, reported: Stamps | None = None, swept: Stamps | None = None, tree: Tree | None = None) -> None:
        self.reported: Stamps = reported or {}
        self.swept: Stamps = swept or {}
        self.tree = tree


def patterns(project: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from stockade.profiles.floor import reported_patterns, swept_patterns

    return reported_patterns(project), swept_patterns(project)


def from_matches(reported: tuple[str, ...], swept: tuple[str, ...], matches: dict[str, list[str]], tree: Tree | None) -> Snapshot:
    """A snapshot from a walk that included `reported` and `swept` (the planning walk does)."""
    return Snapshot(
        reported=_stamps(p for pattern in reported for p in matches[pattern]),
        swept=_stamps(p for pattern in swept for p in matches[pattern] if not p.endswith(".sample")),
        tree=tree,
    )


def take_since(project: str, reported: tuple[str, ...], swept: tuple[str, ...], before: Snapshot) -> Snapshot:
    """The snapshot after the run, listing only folders that changed since `before`."""
    if before.tree is None:
        from stockade.bwrap import globs

        matches, _notes = globs.expand((*reported, *swept))
        return from_matches(reported, swept, matches, None)
    found: dict[str, list[str]] = {pattern: [] for pattern in (*reported, *swept)}
    matcher = None
    stack = [project]
    while stack:
        folder = stack.pop()
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        known = before.tree.get(folder)
        if known is not None and known[0] == folders.folder_stamp(info):
            stack += [os.path.join(folder, name) for name in known[1]]
            continue
        if known is not None:  # touched: the same entries (our placeholders came and went)?
            listed = folders.listing(folder)
            if listed is not None and listed[0] == known[2]:
                stack += [os.path.join(folder, name) for name in listed[1]]
                continue
        from stockade.bwrap import globs  # new entries: now the patterns are needed

        if matcher is None:
            matcher = globs.Patterns((*reported, *swept))
        listed = globs.list_folder(folder, matcher, found, None)
        if listed is not None:
            stack += listed[1]
    after = from_matches(reported, swept, found, None)
    after.reported = {**_stamps(before.reported), **after.reported}
    after.swept = {**_stamps(before.swept), **after.swept}
    return after


def _stamps(paths: Iterable[str]) -> Stamps:
    state: Stamps = {}
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        state[path] = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
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
