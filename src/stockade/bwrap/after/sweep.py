"""After a run: protected paths that were absent when the run was planned (nothing is
mounted there, so nothing shows in the project) and that the run created are renamed
aside, never deleted.

The sweep never follows a symlink: it walks down from the first folder that
was absent at planning with lstat, and a symlink the sandbox planted on the way
is itself what gets moved (ESCAPES 4).
"""

from __future__ import annotations

import os
import stat

from stockade.bwrap.after.changes import _open_parent, quarantine

# An entry (link, LINK_PIN + target) pins a symlink on the way to a protected path: after the
# run it must still be that link. (A first-absent path is always absolute, so the two kinds of
# entry never meet.)
LINK_PIN = "symlink:"


def _to_move(path: str, first_absent: str, roots: list[str]) -> str | None:
    """The entry to move aside: `path`, or a symlink planted above it, or a folder the run took
    search permission off (what is inside cannot be checked); None if nothing appeared."""
    current = first_absent
    relative = os.path.relpath(path, first_absent)
    remainder = relative.split("/") if relative != "." else []
    for part in ["", *remainder]:
        if part:
            current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        except PermissionError:
            locked = os.path.dirname(current)
            return locked if any(locked.startswith(root.rstrip("/") + "/") for root in roots) else None
        if stat.S_ISLNK(mode):
            return current
        if current != path and not stat.S_ISDIR(mode):
            return current  # a file where a folder should be: move it, it is not ours to keep
    return path


def sweep_unguarded(paths: list[tuple[str, str]], session: str, roots: list[str]) -> list[tuple[str, str]]:
    pins = [(path, mark.removeprefix(LINK_PIN)) for path, mark in paths if mark.startswith(LINK_PIN)]
    replaced = [path for path, target in pins if not _same_link(path, target)]
    entries = [_to_move(path, first_absent, roots) for path, first_absent in paths if not first_absent.startswith(LINK_PIN)]
    entries = [entry for entry in entries if entry is None or not _made_by_git_init(entry)]
    moved = quarantine(list(dict.fromkeys([*(p for p in replaced if os.path.lexists(p)), *(e for e in entries if e is not None)])), session, roots)
    for path, target in pins:
        if path in replaced:
            _put_back(path, target, roots)
    return moved


def _made_by_git_init(entry: str) -> bool:
    """What `git init` writes where the floor's paths were absent (the project's own first
    repository) and that runs nothing on the host: a config of inert keys (gitcheck.py), a hooks
    folder of git's own `*.sample` files. Anything else there is moved aside as before."""
    from stockade.bwrap.after.gitcheck import inert_config, is_git_dir_by_content, named_work_trees

    name, git_dir = os.path.basename(entry), os.path.dirname(entry)
    if name not in ("config", "hooks") or not is_git_dir_by_content(git_dir):
        return False
    try:
        info = os.lstat(entry)
    except OSError:
        return False
    if name == "config":  # and where git init leaves the work tree: a moved one moves a relative core.hooksPath
        return stat.S_ISREG(info.st_mode) and inert_config(entry) and not named_work_trees(entry, git_dir)
    return stat.S_ISDIR(info.st_mode) and _only_samples(entry)


def _only_samples(hooks: str) -> bool:
    """Every entry a plain file named `*.sample`: git never runs those."""
    try:
        names = os.listdir(hooks)
    except OSError:
        return False
    for name in names:
        try:
            regular = stat.S_ISREG(os.lstat(os.path.join(hooks, name)).st_mode)
        except OSError:
            return False
        if not regular or not name.endswith(".sample"):
            return False
    return True


def _put_back(path: str, target: str, roots: list[str]) -> None:
    """The user's link as it was before the run, made in its folder reached without following
    links (a folder the run swapped for a link gets nothing)."""
    parent = _open_parent(path, roots)
    if parent is None:
        return
    try:
        os.symlink(target, os.path.basename(path), dir_fd=parent)
    except OSError:
        pass
    finally:
        os.close(parent)


def _same_link(path: str, target: str) -> bool:
    try:
        return os.readlink(path) == target
    except OSError:
        return False
