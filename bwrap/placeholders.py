"""Mount points bwrap creates for absent protected files, removed again after the run.

To keep `.envrc` or `.vscode/` from being created inside a writable project,
bwrap mounts something read-only at that path, which creates an empty file
or folder there on the host. Runs in one project share a lock: each holds it
shared while its sandbox lives, and whoever can take it exclusively at the end
removes every recorded placeholder that is still empty and still the same inode.

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
        """Record the inodes bwrap created, once the sandbox is up."""
        entries = []
        for path in paths:
            try:
                info = os.lstat(path)
            except OSError:
                continue
            entries.append({"path": path, "dev": info.st_dev, "ino": info.st_ino})
        if entries:
            self.record.write_text(json.dumps(entries), encoding="utf-8")

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
        entries = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        entries = []
    for entry in entries:
        _remove_if_placeholder(entry["path"], entry["dev"], entry["ino"])
    record.unlink(missing_ok=True)


def _remove_if_placeholder(path: str, dev: int, ino: int) -> None:
    """Remove only an empty file or folder that is still the inode bwrap made."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if (info.st_dev, info.st_ino) != (dev, ino):
        return
    try:
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.unlink(path)
        elif stat.S_ISDIR(info.st_mode):
            os.rmdir(path)  # fails, harmlessly, if anything is inside
    except OSError:
        pass
