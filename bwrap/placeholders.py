"""Mount points bwrap creates for absent protected files, removed again after the run.

To keep `.envrc` or `.vscode/` from being created inside a writable project,
bwrap mounts something read-only at that path, which creates an empty file
or folder there on the host. Runs in one project share a lock: each holds it
shared while its sandbox lives, and whoever can take it exclusively at the end
removes every recorded placeholder that is still empty. A path is recorded
only if it did not exist when the run was planned, and the record is written
before bwrap starts, so a crash leaves a record the next run finishes.

The lock is per user, not per project: two projects can share a writable
place (a home folder), and removing a placeholder another sandbox still has
mounted would detach that sandbox's protection.
"""

from __future__ import annotations

import fcntl
import os
import stat

RECORD_SUFFIX = ".paths"  # the paths, NUL-separated (json would cost every run its import)
LEGACY_SUFFIX = ".json"  # records of stockade 0.1


class PlaceholderGuard:
    def __init__(self, state_dir: str, session: str) -> None:
        self.folder = os.path.join(state_dir, "placeholders")
        self.record = os.path.join(self.folder, session + RECORD_SUFFIX)
        self.lock_fd = -1

    def __enter__(self) -> PlaceholderGuard:
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        self.lock_fd = os.open(os.path.join(self.folder, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.lock_fd, fcntl.LOCK_SH)
        return self

    def remember(self, paths: list[str]) -> None:
        """Record the paths bwrap is about to create, before it starts."""
        absent = [path for path in paths if not os.path.lexists(path)]
        if absent:
            with open(self.record, "wb") as record:
                record.write("\0".join(absent).encode("utf-8", "surrogateescape"))

    def __exit__(self, *_exc: object) -> None:
        fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.lock_fd)  # another run still needs them; the last one out cleans up
            return
        try:
            for name in os.listdir(self.folder):
                if name.endswith((RECORD_SUFFIX, LEGACY_SUFFIX)):
                    _remove_recorded(os.path.join(self.folder, name))
        finally:
            os.close(self.lock_fd)


def _recorded_paths(record: str) -> list[str]:
    try:
        with open(record, "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    if record.endswith(LEGACY_SUFFIX):
        import json

        try:
            paths = json.loads(data)
        except ValueError:
            return []
        return [str(path) for path in paths] if isinstance(paths, list) else []
    return [path for path in data.decode("utf-8", "surrogateescape").split("\0") if path]


def _remove_recorded(record: str) -> None:
    for path in _recorded_paths(record):
        _remove_if_placeholder(path)
    try:
        os.unlink(record)
    except FileNotFoundError:
        pass


def _remove_if_placeholder(path: str) -> None:
    """Remove only an empty file or an empty folder: anything with content is kept."""
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.unlink(path)
        elif stat.S_ISDIR(info.st_mode):
            os.rmdir(path)  # fails, harmlessly, if anything is inside
    except OSError:
        pass
