"""Paths under a writable place, opened without following a link: what a sandbox swaps leads nowhere else.

A checkpoint reads the user's files on the sandbox's behalf while the
sandbox runs, and undo moves them back (perhaps while another run goes on in
the project). A sandbox can replace any folder on such a path with a link at
any moment, to make stockade read or write outside the places it may write.
So every such act opens the path's folder one component at a time from the
root of its place, refusing links (O_NOFOLLOW), then acts on the last name in
that folder with the *at calls, never following it either.
"""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def root_of(path: str, roots: Sequence[str]) -> str | None:
    """The deepest root that holds `path` (itself included)."""
    found = None
    for root in roots:
        if (path == root or path.startswith(root.rstrip("/") + "/")) and (found is None or len(root) > len(found)):
            found = root
    return found


def open_folder(path: str, roots: Sequence[str], *, make: bool = False) -> int:
    """An O_PATH fd on the folder `path`, reached from its root one real folder at a time; `make`
    makes the missing ones. OSError: ENOENT when one is missing, ELOOP or ENOTDIR when one is a
    link or no folder, EXDEV when `path` is under no root."""
    root = root_of(path, roots)
    if root is None:
        raise OSError(errno.EXDEV, f"{path} is in no place this run could write")
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # the root is the user's own (a bind's source)
    try:
        for name in path[len(root) :].split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                raise OSError(errno.EINVAL, f"{path} climbs out of its place")
            try:
                inner = os.open(name, FOLDER, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)  # as makedirs: the umask decides
                except FileExistsError:
                    pass
                inner = os.open(name, FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_parent(path: str, roots: Sequence[str], *, make: bool = False) -> tuple[int, str]:
    """(an O_PATH fd on the folder holding `path`, its last name). A root's own folder (a file
    allowed on its own, the project) is outside every place the run writes: opened as it is."""
    parent, _, name = path.rstrip("/").rpartition("/")
    if not name or name in (".", ".."):
        raise OSError(errno.EINVAL, f"{path} names no entry")
    if path.rstrip("/") in (root.rstrip("/") for root in roots):
        return os.open(parent or "/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), name
    return open_folder(parent or "/", roots, make=make), name


def open_listing(name: str, folder: int) -> int:
    """A readable fd on the folder `name` in `folder` (for scandir), never through a link."""
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
