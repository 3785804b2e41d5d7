"""macOS checkpoints: the project cloned before the run, compared with it after the run.

macOS has no seccomp listener to stop each write before it happens, but APFS
clones a folder without copying its data: `clonefile(2)` makes a copy-on-write
copy of the whole tree (modes, times, links, extended attributes kept), in
stockade's own state folder, where no sandbox can see it. After the run, the
project and its clone are walked side by side; each path that differs (new,
removed, another kind, another size, mtime, mode or link target) is recorded
in an ordinary checkpoint (store.Recorder.was) from the clone, by hard link
where the volume allows, and the clone is removed. `stockade runs` and
`stockade undo` (restore.py) then work as on Linux.

The clone's cost grows with the project's number of entries (metadata only),
so a project over CLONE_LIMIT entries keeps no checkpoint, and says so. The
clone function is a parameter: tests on Linux pass a copy that keeps times
and links (the plumbing is the same; only APFS makes it cheap).
"""

from __future__ import annotations

import os
import stat
import time

from stockade.checkpoints import beneath, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

CLONES = "clones"
CLONE_NOFOLLOW = 0x0001  # <sys/clonefile.h>: the source itself is not followed if a link
CLONE_LIMIT = 200_000  # entries: past this, cloning before every run costs more than it is worth


def clonefile(source: str, target: str) -> None:
    """macOS clonefile(2) of a file or a whole folder (copy-on-write, on APFS)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.clonefile(os.fsencode(source), os.fsencode(target), CLONE_NOFOLLOW) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), source)


class Cloned:
    """One run's checkpoint taken by a clone: `take` before the run, `finish` after it."""

    def __init__(
        self,
        state_dir: str,
        project: str,
        max_size: int,
        meta: dict[str, object],
        clone: Callable[[str, str], None] = clonefile,
    ) -> None:
        self.project = project
        self.folder = store.project_folder(state_dir, project)
        self.clone_dir = os.path.join(self.folder, CLONES, f"{os.getpid()}-{time.time_ns()}")
        self.max_size = max_size
        self.meta = meta
        self.clone = clone
        self.taken = False

    def take(self, entries: int | None = None) -> str | None:
        """Clone the project; None when done, else why no checkpoint is kept."""
        if entries is not None and entries > CLONE_LIMIT:
            return f"the project holds more than {CLONE_LIMIT:,} entries: cloning it before every run would cost more than it saves"
        if store.within(self.folder, self.project):
            return "stockade's state folder is inside the project"
        try:
            os.makedirs(os.path.dirname(self.clone_dir), mode=0o700, exist_ok=True)
            self.clone(self.project, self.clone_dir)
        except OSError as exc:
            _remove(self.clone_dir)
            return f"the project could not be cloned ({exc.strerror or exc}): APFS clones, other volumes do not"
        self.taken = True
        return None

    def finish(self, status: int | None) -> dict[str, object] | None:
        """Record what the run changed, from the clone; the clone removed. The checkpoint's meta, or
        None when the run changed nothing."""
        if not self.taken:
            return None
        recorder = store.Recorder(self.folder, self.project, self.max_size, self.meta, (self.project,))
        try:
            place = os.open(self.project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            clone = os.open(self.clone_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            _remove(self.clone_dir)
            return None
        try:
            compare(recorder, self.project, place, clone, 0)
            return recorder.finish(status)
        finally:
            os.close(place)
            os.close(clone)
            _remove(self.clone_dir)


def compare(recorder: store.Recorder, path: str, place: int, clone: int, depth: int) -> None:
    """Record each entry under `path` that differs between the place and its clone (open folders)."""
    now = _listing(place)
    before = _listing(clone)
    for name in sorted(set(now) | set(before)):
        inner = f"{path.rstrip('/')}/{name}"
        was, is_ = before.get(name), now.get(name)
        if was is None:
            recorder.was(inner, None, name)  # made by the run: undo removes it
            continue
        if is_ is None or stat.S_IFMT(was.st_mode) != stat.S_IFMT(is_.st_mode):
            recorder.was(inner, clone, name)
            continue
        if stat.S_ISDIR(was.st_mode):
            if _meta(was) != _meta(is_):
                recorder.was_folder(inner, was)
            if depth >= store.MAX_DEPTH:
                recorder.lose(inner, f"more than {store.MAX_DEPTH} folders down")
                continue
            try:
                inner_place = beneath.open_listing(name, place)
            except OSError:
                recorder.was(inner, clone, name)
                continue
            try:
                inner_clone = beneath.open_listing(name, clone)
            except OSError:
                os.close(inner_place)
                continue
            try:
                compare(recorder, inner, inner_place, inner_clone, depth + 1)
            finally:
                os.close(inner_place)
                os.close(inner_clone)
        elif stat.S_ISLNK(was.st_mode):
            if _readlink(name, clone) != _readlink(name, place) or _meta(was) != _meta(is_):
                recorder.was(inner, clone, name)
        elif (was.st_size, was.st_mtime_ns) != (is_.st_size, is_.st_mtime_ns) or _meta(was) != _meta(is_):
            recorder.was(inner, clone, name)


def _listing(folder: int) -> dict[str, os.stat_result]:
    found: dict[str, os.stat_result] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        try:
            found[entry.name] = entry.stat(follow_symlinks=False)
        except OSError:
            continue
    return found


def _meta(info: os.stat_result) -> tuple[int, int, int]:
    return (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)


def _readlink(name: str, folder: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError:
        return None


def _remove(folder: str) -> None:
    try:
        store.remove_any(folder)
    except OSError:
        pass  # gone already, or left for the next prune to find: never the run's failure
