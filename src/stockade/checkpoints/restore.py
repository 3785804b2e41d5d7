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

import os
import stat

from stockade.checkpoints import store

TYPE_CHECKING = False
if TYPE_CHECKING:
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


def undo(run: Run, recorder: store.Recorder) -> Outcome:
    """Put `run`'s checkpoint back; what stands in the way goes into `recorder` (the undo's own)."""
    outcome = Outcome()
    records = run.records()
    wanted = _wanted(records)
    # first everything in the way goes, deepest first, before anything is put back: a file put back
    # may be an inode that also stands elsewhere now (renamed there), whose mode it gets back
    for path, entry in sorted(records.items(), key=lambda item: -_depth(item[0])):
        kind = entry.get("k")
        if kind == "absent" and os.path.lexists(path):
            recorder.take_away(path)
            outcome.removed += 1
        elif kind in ("tree", "moved"):
            _clear_tree(path, wanted, recorder, outcome, whole=kind == "moved")
        elif kind in ("file", "link", "fifo") and os.path.lexists(path):
            recorder.take_away(path)
        elif kind == "dir" and os.path.lexists(path) and (os.path.islink(path) or not os.path.isdir(path)):
            recorder.take_away(path)
    placed: dict[tuple[int, int] | None, str] = {}  # a file's inode before the run: where it was put back
    for path, entry in sorted(records.items(), key=lambda item: _depth(item[0])):  # put back, parents first
        kind = entry.get("k")
        if kind == "lost":
            outcome.lost.append(path)
        elif kind in ("dir", "tree"):
            _put_folder(path, entry, recorder)
            outcome.restored += kind == "tree"
        elif kind == "file" and _same_inode(entry) is not None and _same_inode(entry) in placed:  # another name of a file put back already
            _clear(path, recorder, keep_folder=False)
            os.link(placed[_same_inode(entry)], path)
            outcome.restored += 1
        elif kind in ("file", "moved") and "o" in entry:  # copied into the run's pack
            _clear(path, recorder, keep_folder=False)
            temporary = f"{path}.stockade-undo"
            store.unpack(run.pack, int(entry["o"]), int(entry.get("n", 0)), temporary)  # type: ignore[call-overload]
            os.rename(temporary, path)
            _set_meta(path, entry)
            placed.setdefault(_same_inode(entry), path)
            outcome.restored += 1
        elif kind in ("file", "moved"):
            data = run.data(str(entry.get("d")))
            if not os.path.lexists(data):
                outcome.lost.append(path)
                continue
            _clear(path, recorder, keep_folder=False)
            _move(data, path)
            _set_meta(path, entry)
            placed.setdefault(_same_inode(entry), path)
            outcome.restored += 1
        elif kind == "link":
            _clear(path, recorder, keep_folder=False)
            os.symlink(str(entry.get("l")), path)
            _set_owner(path, entry)
            outcome.restored += 1
        elif kind == "fifo":
            _clear(path, recorder, keep_folder=False)
            os.mkfifo(path, int(entry.get("m", 0o644)))  # type: ignore[call-overload]
            _set_meta(path, entry)
            outcome.restored += 1
    return outcome


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
    if not os.path.lexists(path):
        return
    if whole or not os.path.isdir(path) or os.path.islink(path):
        recorder.take_away(path)
        outcome.removed += 1
        return
    todo = [path]
    while todo:
        folder = todo.pop()
        for entry in list(os.scandir(folder)):
            if entry.path not in wanted:
                recorder.take_away(entry.path)
                outcome.removed += 1
            elif entry.is_dir(follow_symlinks=False):
                todo.append(entry.path)


def _clear(path: str, recorder: store.Recorder, *, keep_folder: bool) -> None:
    """Whatever stands at `path` moves into the undo's checkpoint (nothing there is recorded as
    such, for a redo to remove what undo puts); the folder above is made if gone."""
    if not (keep_folder and os.path.isdir(path) and not os.path.islink(path)):
        recorder.take_away(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)


def _put_folder(path: str, entry: dict[str, object], recorder: store.Recorder) -> None:
    _clear(path, recorder, keep_folder=True)
    if not os.path.isdir(path):
        os.mkdir(path, 0o700)
    _set_meta(path, entry)


def _move(data: str, path: str) -> None:
    try:
        os.rename(data, path)
    except OSError as exc:
        import errno

        if exc.errno != errno.EXDEV:
            raise
        store.copy_any(data, path)
        store.remove_any(data)


def _set_meta(path: str, entry: dict[str, object]) -> None:
    _set_owner(path, entry)
    mode = entry.get("m")
    if isinstance(mode, int) and not os.path.islink(path):
        os.chmod(path, stat.S_IMODE(mode))
    mtime = entry.get("t")
    if isinstance(mtime, int) and not os.path.islink(path):
        try:
            os.utime(path, ns=(mtime, mtime))
        except OSError:
            pass


def _set_owner(path: str, entry: dict[str, object]) -> None:
    uid, gid = entry.get("u"), entry.get("g")
    if os.geteuid() != 0 or not isinstance(uid, int) or not isinstance(gid, int):
        return
    try:
        os.lchown(path, uid, gid)
    except OSError:
        pass


def _same_inode(entry: dict[str, object]) -> tuple[int, int] | None:
    """The inode a file with more names had before the run (None for one with one name)."""
    inode = entry.get("i")
    if isinstance(inode, list) and len(inode) == 2 and all(isinstance(part, int) for part in inode):
        return (inode[0], inode[1])
    return None


def _depth(path: str) -> int:
    return path.count("/")
