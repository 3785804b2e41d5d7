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
import json
import os
import stat
from pathlib import Path


class PlaceholderGuard:
    def __init__(self, state_dir: Path, session: str) -> None:
        self.folder = state_dir / "placeholders"
        self.record = self.folder / f"{session}.json"
        self.lock_fd = -1

    def __enter__(self) -> PlaceholderGuard:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.lock_fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.lock_fd, fcntl.LOCK_SH)
        return self

    def remember(self, paths: list[str]) -> None:
        """Record the paths bwrap is about to create, before it starts."""
        absent = [path for path in paths if not os.path.lexists(path)]
        if absent:
            self.record.write_text(json.dumps(absent), encoding="utf-8")

    def __exit__(self, *_exc: object) -> None:
        fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.lock_fd)  # another run still needs them; the last one out cleans up
            return
        try:
            for record in self.folder.glob("*.json"):
                _remove_recorded(record)
        finally:
            os.close(self.lock_fd)


def _remove_recorded(record: Path) -> None:
    try:
        paths = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        paths = []
    for path in paths if isinstance(paths, list) else []:
        _remove_if_placeholder(str(path))
    record.unlink(missing_ok=True)


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
