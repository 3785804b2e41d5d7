"""Undo: put back what a checkpoint recorded, exactly, keeping what it replaces.

Undo is itself recorded, as a checkpoint of kind "undo": whatever stands where
something is put back (the run's work, or a file the user changed since) is
moved into it first. Nothing is lost, and undoing the undo redoes the run.

Before anything moves, undo looks for conflicts: a path the run changed that a
later run (not undone) changed again, or one changed on the host since the run
ended (its state differs from the one recorded then). With conflicts undo
stops and names them, unless forced.
"""

from __future__ import annotations

import errno
import os
import stat

from stockade.checkpoints import beneath, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from stockade.checkpoints.history import Run

UNLIMITED = 1 << 62  # an undo keeps everything it replaces


class Outcome:
    """What an undo did: its own checkpoint's number (0 when nothing moved), counts, and the paths
    it could not put back (not kept at the run: too large, unreadable)."""

    def __init__(self) -> None:
        self.number = 0
        self.restored = 0
        self.removed = 0
        self.lost: list[str] = []
        self.failed: dict[str, str] = {}  # path: why it could not be moved aside or put back
        self.refused: list[tuple[str, str]] = []  # (path, why) of records undo must not put back


def conflicts(run: Run, history: list[Run]) -> list[tuple[str, str]]:
    """(path, why) for each path undo would put back over a change it did not record."""
    mine = run.records()
    covering = {path for path, entry in mine.items() if entry.get("k") in store.COVERING}
    found: dict[str, str] = {}
    for later in history:
        if later.number <= run.number or later.kind != "run" or later.undone_by is not None:
            continue
        for path, entry in later.records().items():
            if path in found:
                continue
            if _overlaps(path, entry.get("k") in store.COVERING, mine, covering):
                found[path] = f"changed again by run {later.number}"
    for path, stamp in run.after().items():
        if path not in found and path in mine and not store.same_state(stamp, store.path_stamp(path)):
            found[path] = "changed since the run"
    for path, entry in mine.items():
        if entry.get("k") in ("file", "moved") and not _held(run, entry):
            found[path] = "its checkpoint no longer holds it"
    return sorted(found.items())


def _held(run: Run, entry: dict[str, object]) -> bool:
    if "o" in entry:
        end = int(entry["o"]) + int(entry.get("n", 0))  # type: ignore[call-overload]
        try:
            return os.path.getsize(run.pack) >= end
        except OSError:
            return False
    return os.path.lexists(run.data(str(entry.get("d"))))


def _overlaps(path: str, covers: bool, mine: dict[str, dict[str, object]], covering: set[str]) -> bool:
    if path in mine:
        return True
    parent = path
    while parent not in ("/", ""):
        parent = os.path.dirname(parent)
        if parent in covering:
            return True
    return covers and any(store.within(other, path) for other in mine)


def plan(run: Run) -> list[tuple[str, str]]:
    """(path, what undo does there), for --dry-run and the summary."""
    words = {"absent": "remove", "lost": "cannot restore (not kept)"}
    return [(path, words.get(str(entry.get("k")), "put back")) for path, entry in run.records().items()]


def undo(run: Run, recorder: store.Recorder, refuse: Callable[[str, dict[str, object]], str | None] | None = None) -> Outcome:
    """Put `run`'s checkpoint back; what stands in the way goes into `recorder` (the undo's own).
    Every path is reached beneath its place without following a link (beneath.py): another run
    going on meanwhile cannot turn undo's moves toward anything else. `refuse(path, record)` names
    why a record must not be put back (a file the floor protects that the sandbox recorded)."""
    outcome = Outcome()
    records = {path: entry for path, entry in run.records().items() if beneath.root_of(path, recorder.roots) is not None}
    wanted = _wanted(records)
    # first everything in the way goes, deepest first, before anything is put back: a file put back
    # may be an inode that also stands elsewhere now (renamed there), whose mode it gets back
    for path, entry in sorted(records.items(), key=lambda item: -_depth(item[0])):
        kind = entry.get("k")
        there = _kind_at(path, recorder.roots)
        try:
            if kind == "moved":
                if there is not None:
                    recorder.take_away(path)  # replaced by what the checkpoint holds: not counted as removed
            elif kind == "tree":
                _clear_tree(path, wanted, recorder, outcome, whole=there not in (None, "dir"))
            elif there is None or (kind == "dir" and there == "dir"):
                continue
            else:
                recorder.take_away(path)
                outcome.removed += kind == "absent"
        except OSError as exc:  # left as it is, named; what was moved before is in the undo's checkpoint
            outcome.failed[path] = str(exc.strerror or exc)
    placed: dict[tuple[int, int], str] = {}  # a file's inode before the run: where it was put back
    for path, entry in sorted(records.items(), key=lambda item: _depth(item[0])):  # put back, parents first
        kind = entry.get("k")
        if kind == "lost":
            outcome.lost.append(path)
            continue
        if kind not in ("dir", "tree", "file", "moved", "link", "fifo"):
            continue
        why = refuse(path, entry) if refuse is not None and kind not in ("dir", "tree") else None
        if why is not None:
            outcome.refused.append((path, why))
            continue
        try:
            _put_back(run, path, entry, recorder, placed)
        except OSError as exc:
            outcome.lost.append(path)
            outcome.failed[path] = str(exc.strerror or exc)
            continue
        outcome.restored += kind != "dir"
    return outcome


def _put_back(run: Run, path: str, entry: dict[str, object], recorder: store.Recorder, placed: dict[tuple[int, int], str]) -> None:
    kind = entry.get("k")
    if kind in ("dir", "tree") and _kind_at(path, recorder.roots) == "dir":
        folder, name = beneath.open_parent(path, recorder.roots)
    else:
        recorder.take_away(path)  # whatever came since phase one (nothing, as a rule)
        folder, name = beneath.open_parent(path, recorder.roots, make=True)
    try:
        inode = _same_inode(entry)
        if kind in ("dir", "tree"):
            try:
                os.mkdir(name, 0o700, dir_fd=folder)
            except FileExistsError:
                pass
        elif kind == "file" and inode is not None and inode in placed:  # another name of a file put back already
            source_folder, source_name = beneath.open_parent(placed[inode], recorder.roots)
            try:
                os.link(source_name, name, src_dir_fd=source_folder, dst_dir_fd=folder, follow_symlinks=False)
            finally:
                os.close(source_folder)
            return
        elif kind in ("file", "moved") and "o" in entry:  # copied into the run's pack
            temporary = f".{name}.stockade-undo"
            store.unpack(run.pack, int(entry["o"]), int(entry.get("n", 0)), folder, temporary)  # type: ignore[call-overload]
            os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        elif kind in ("file", "moved"):
            data = run.data(str(entry.get("d")))
            if kind == "file":
                _check_kept(data, entry)
            try:
                os.rename(data, name, dst_dir_fd=folder)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                data_folder = os.open(os.path.dirname(data), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # the checkpoint's own
                try:  # the checkpoints on another filesystem: a copy, the data kept until the checkpoint goes
                    store.copy_at(data_folder, os.path.basename(data), folder, name)
                except RecursionError:
                    raise OSError(errno.ELOOP, "too many folders deep to copy") from None
                finally:
                    os.close(data_folder)
        elif kind == "link":
            os.symlink(str(entry.get("l")), name, dir_fd=folder)
        elif kind == "fifo":
            os.mkfifo(name, _mode(entry), dir_fd=folder)
        _set_meta(folder, name, entry)
        if kind == "file" and inode is not None:
            placed.setdefault(inode, path)
    finally:
        os.close(folder)


def _check_kept(data: str, entry: dict[str, object]) -> None:
    """A file kept by a link is as it was when kept (its size and mtime): a write the checkpoint
    could not follow would have changed it, and undo must not hand that back as the user's."""
    recorded = entry.get("s")
    info = os.stat(data, follow_symlinks=False)
    if isinstance(recorded, list) and len(recorded) == 2 and [info.st_size, info.st_mtime_ns] != [recorded[1], entry.get("t")]:
        raise OSError(errno.ESTALE, "its kept copy was changed after it was kept, by a write its checkpoint could not follow")


def _kind_at(path: str, roots: tuple[str, ...]) -> str | None:
    """What stands at `path` now ("dir", "other"), reached beneath its place; None when nothing
    does, or a link stands in a folder's place on the way (then nothing beneath it is touched)."""
    try:
        folder, name = beneath.open_parent(path, roots)
    except OSError:
        return None
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(folder)
    return "dir" if stat.S_ISDIR(info.st_mode) else "other"


def _wanted(records: dict[str, dict[str, object]]) -> set[str]:
    """Paths that exist again after undo, with every folder above them."""
    wanted: set[str] = set()
    for path, entry in records.items():
        if entry.get("k") in ("absent", "lost"):
            continue
        while path not in wanted and path not in ("/", ""):
            wanted.add(path)
            path = os.path.dirname(path)
    return wanted


def _clear_tree(path: str, wanted: set[str], recorder: store.Recorder, outcome: Outcome, *, whole: bool) -> None:
    """A folder recorded whole holds exactly what was recorded under it: the rest goes."""
    there = _kind_at(path, recorder.roots)
    if there is None:
        return
    if whole or there != "dir":
        recorder.take_away(path)
        outcome.removed += 1
        return
    folder, name = beneath.open_parent(path, recorder.roots)
    try:
        listing = beneath.open_listing(name, folder)
    finally:
        os.close(folder)
    try:
        unwanted = [inner for inner, info, _folder, _name in store.walk(listing, path) if inner not in wanted]
    finally:
        os.close(listing)
    for inner in unwanted:  # a folder before what it holds: taking it away takes them too
        if not recorder.covered(inner):
            recorder.take_away(inner)
            outcome.removed += 1


def _mode(entry: dict[str, object]) -> int:
    mode = entry.get("m")
    return stat.S_IMODE(mode) if isinstance(mode, int) else 0o644


def _set_meta(folder: int, name: str, entry: dict[str, object]) -> None:
    """Owner (as root), mode and mtime, on the entry itself: through an O_PATH fd, never a link's target."""
    uid, gid = entry.get("u"), entry.get("g")
    if os.geteuid() == 0 and isinstance(uid, int) and isinstance(gid, int):
        try:
            os.chown(name, uid, gid, dir_fd=folder, follow_symlinks=False)
        except OSError:
            pass
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            return
        magic = f"/proc/self/fd/{fd}"
        if isinstance(entry.get("m"), int):
            os.chmod(magic, _mode(entry))
        mtime = entry.get("t")
        if isinstance(mtime, int):
            try:
                os.utime(magic, ns=(mtime, mtime))
            except OSError:
                pass
    finally:
        os.close(fd)


def _same_inode(entry: dict[str, object]) -> tuple[int, int] | None:
    """The inode a file with more names had before the run (None for one with one name)."""
    inode = entry.get("i")
    if isinstance(inode, list) and len(inode) == 2 and all(isinstance(part, int) for part in inode):
        return (inode[0], inode[1])
    return None


def _depth(path: str) -> int:
    return path.count("/")
