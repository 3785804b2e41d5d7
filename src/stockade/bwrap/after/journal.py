"""Sweeps a run still owes, kept where the next run finds them.

Absent protected paths are checked only after the run (sweep.py). If the
stockade process is killed first (an agent's tool timeout ends in SIGKILL),
bwrap and the sandbox die with it and nothing would ever move aside what the
sandbox planted there. So before bwrap starts, a run writes what it will
sweep into stockade's hidden state folder and holds a lock on that record;
it removes the record after its sweep. Every run first finishes the records
whose lock nobody holds, before it plans or loads a plan (a plan made with a
planted `.envrc` present would hold it read-only instead of moving it).
"""

from __future__ import annotations

import fcntl
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass

FOLDER = "sweeps"
SUFFIX = ".sweep"


class Journal:
    """This run's record: open before bwrap starts, closed (removed) after the sweep."""

    def __init__(self, state_dir: str, session: str) -> None:
        self.path = os.path.join(state_dir, FOLDER, session + SUFFIX)
        self.fd = -1

    def open(self, unguarded: list[tuple[str, str]], writable: list[str]) -> None:
        words = [str(len(writable)), *writable, *(part for pair in unguarded for part in pair)]
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            try:
                self.fd = os.open(self.path, flags, 0o600)
            except FileNotFoundError:  # the first run for this user: the folder is made once
                os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
                self.fd = os.open(self.path, flags, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            os.write(self.fd, "\0".join(words).encode("utf-8", "surrogateescape"))
        except OSError:
            self.close()  # a full or read-only state folder: the run goes on, its own sweep still runs

    def close(self) -> None:
        if self.fd < 0:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = -1


def finish_abandoned(state_dir: str, session: str) -> list[tuple[str, str]]:
    """Sweep for every record whose run is gone; (original, new name) of what was moved."""
    folder = os.path.join(state_dir, FOLDER)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    moved: list[tuple[str, str]] = []
    for name in names:
        if name.endswith(SUFFIX):
            moved += _finish(os.path.join(folder, name), session)
    return moved


def _finish(record: str, session: str) -> list[tuple[str, str]]:
    try:
        fd = os.open(record, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # its run is alive and will sweep itself
        parsed = _parse(os.read(fd, 1 << 24))
        if parsed is None:
            os.unlink(record)
            return []
        writable, entries = parsed
        from stockade.bwrap.after.sweep import sweep_unguarded

        moved = sweep_unguarded(entries, session, writable)
        os.unlink(record)
        return moved
    except OSError:
        return []
    finally:
        os.close(fd)


def changed_pins(state_dir: str) -> list[tuple[str, str]]:
    """(link, session) for each link a running run pinned (sweep.py LINK_PIN) that no longer
    holds the text that run recorded: a sandbox changed it, and that run puts it back at its end.
    A run planned meanwhile would follow the sandbox's link, leaving the real target writable,
    and would pin the sandbox's link as the user's (its own sweep putting it back after)."""
    from stockade.bwrap.after.sweep import LINK_PIN

    folder = os.path.join(state_dir, FOLDER)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    changed: list[tuple[str, str]] = []
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        try:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                continue  # nobody holds it: an abandoned record, finished before planning
            except BlockingIOError:
                pass
            parsed = _parse(os.read(fd, 1 << 24))
        except OSError:
            continue
        finally:
            os.close(fd)
        for path, mark in parsed[1] if parsed else ():
            if not mark.startswith(LINK_PIN):
                continue
            try:
                now = os.readlink(path)
            except OSError:
                now = None
            if now != mark.removeprefix(LINK_PIN):
                changed.append((path, name.removesuffix(SUFFIX)))
    return list(dict.fromkeys(changed))


def _parse(data: bytes) -> tuple[list[str], list[tuple[str, str]]] | None:
    """(writable roots, unguarded entries) of a record as Journal.open wrote it; None if malformed."""
    words = data.decode("utf-8", "surrogateescape").split("\0")
    count = int(words[0]) if words and words[0].isdigit() else -1
    if count < 0 or (len(words) - 1 - count) % 2:
        return None
    rest = words[1 + count :]
    return words[1 : 1 + count], list(zip(rest[::2], rest[1::2], strict=False))
