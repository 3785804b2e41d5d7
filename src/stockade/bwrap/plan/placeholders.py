"""Leftovers of stockade 0.1, which held absent protected paths with mount points.

bwrap created each mount point on the host (an empty file or folder) and the
run removed it afterwards; a run killed with SIGKILL left them behind, named
in a record under the state folder. Absent paths are now only checked after
the run (sweep.py), so planning finishes the old records once and removes
their folder.
"""

from __future__ import annotations

import os
import stat

RECORD_SUFFIXES = (".paths", ".json")  # NUL-separated paths; a json list (the first release)


def clear_leftovers(state_dir: str) -> None:
    folder = os.path.join(state_dir, "placeholders")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(RECORD_SUFFIXES):
            for recorded in _recorded_paths(path):
                _remove_if_empty(recorded)
        try:
            os.unlink(path)
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _recorded_paths(record: str) -> list[str]:
    try:
        with open(record, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return []
    if record.endswith(".json"):
        import json

        try:
            paths = json.loads(data)
        except ValueError:
            return []
        return [path for path in paths if isinstance(path, str)] if isinstance(paths, list) else []
    return [path for path in data.decode("utf-8", "surrogateescape").split("\0") if path]


def _remove_if_empty(path: str) -> None:
    """Only an empty file or an empty folder, never through a link: anything with content stays."""
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.unlink(path)
        elif stat.S_ISDIR(info.st_mode):
            os.rmdir(path)
    except OSError:
        pass
