"""A folder's whole state as data, for tests that compare a tree before and after (undo's)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

Snapshot = dict[str, tuple[object, ...]]


def snapshot(root: Path, *, times: bool = True) -> Snapshot:
    """Every entry under `root`: (kind, mode, content or link target[, a file's mtime])."""
    found: Snapshot = {}
    for folder, names, files in os.walk(root):
        for name in [*names, *files]:
            path = Path(folder) / name
            info = path.lstat()
            relative = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir", stat.S_IMODE(info.st_mode))
            else:
                found[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes(), *((info.st_mtime_ns,) if times else ()))
        names[:] = [name for name in names if not (Path(folder) / name).is_symlink()]
    return found
