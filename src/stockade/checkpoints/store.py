"""One run's checkpoint, recorded as the run goes.

Each path the run changes is recorded once, just before its first change, as
what it was then: absent, a file, a link, a folder, or a whole tree. A path
under one that was absent or recorded whole needs nothing more: undo puts that
one back whole. The content is kept as cheaply as the change allows:
- a file about to be removed, renamed or replaced keeps its inode, by a hard
  link into the data folder (no copy);
- a file about to be written in place, or truncated, is copied into the run's
  one pack file (a reflink where the filesystem has them; the kernel copies,
  without reading it here): a new inode for each copy costs more than the copy;
- the data folder on another filesystem than the file: a copy.
An inode kept by a link and then written in place (through another name, or
after a rename) is first copied, so what the checkpoint holds never changes.

Nothing here ever changes a file of the run's places: it links, copies and
reads, each through the folder opened beneath its place without a link
(beneath.py), so a sandbox that swaps a folder for a link meanwhile makes it
read nothing else.

The records are appended to one file, each before its change goes on, so a
run killed halfway leaves a checkpoint that covers every change it made. A run
holds a lock on that file while it lives: undo and pruning leave it alone.
"""

from __future__ import annotations

import _thread
import errno
import fcntl
import os
import stat
import time

from stockade.checkpoints import beneath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    Walked = tuple[str, os.stat_result, int, str]

FOLDER = "checkpoints"
RECORDS = "records"
AFTER = "after"
META = "run.json"
DATA = "data"
FICLONE = 0x40049409  # ioctl: share the source's extents (btrfs, xfs), where the filesystem can
PACK = "pack"
FLOOR_BEFORE = "floor-before"  # the run's: stamps of the files that run code later, as planning found them before it
KEPT_LINKS = "kept-links"  # in the project's folder: "dev inode data-path" of inodes a checkpoint shares with the project
LINK_ABOVE = 1 << 20  # a file renamed or chmodded this large is kept by a link, not a copy (its link count shows)
CLOCK_REALTIME_COARSE = 5  # Linux's clock id; the time module names no constant for it

# how a path is about to change (what the caller saw the run ask for)
WRITE = "write"  # opened for writing, not truncated
TRUNCATE_OPEN = "truncate-open"  # opened with O_TRUNC
TRUNCATE = "truncate"  # truncate(2) to some length
REMOVE = "remove"  # unlinked, or replaced by a rename onto it
MOVE = "move"  # renamed away
TREE_MOVE = "tree-move"  # in a folder renamed or removed whole: kept by a link, whatever its size
RMDIR = "rmdir"
META_CHANGE = "meta"  # chmod, chown
CREATE = "create"  # mkdir, link, symlink, mknod: the name must be new

WRITES = frozenset({WRITE, TRUNCATE_OPEN, TRUNCATE})
COVERING = frozenset({"absent", "tree", "moved"})  # undo puts back what is under one of these whole


def project_folder(state_dir: str, project: str) -> str:
    """Where a project's checkpoints live: hidden inside every sandbox (the state folder is)."""
    try:  # CPython's own: hashlib would load OpenSSL first
        from _sha256 import sha256  # 3.11
    except ImportError:
        from hashlib import sha256
    digest = sha256(project.encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return os.path.join(state_dir, FOLDER, digest)


def within(path: str, place: str) -> bool:
    return path == place or path.startswith(place.rstrip("/") + "/")


class Cancelled(Exception):
    """The call a record was for will not happen (its process is gone)."""


class Recorder:
    """The checkpoint of one run (or of one undo): `changing` before each change."""

    def __init__(
        self,
        folder: str,
        project: str,
        max_size: int,
        meta: dict[str, object],
        roots: tuple[str, ...] = (),
        floor_before: dict[str, object] | None = None,
    ) -> None:
        self.folder = folder  # the project's checkpoints folder; the run's own is made at the first change
        self.project = project
        self.roots = roots or (project,)  # where the run writes: other names of a file written in place are there
        self.floor_before = floor_before or {}  # path: (inode, size, mtime, ctime) of each runs-later file before the run
        # the kernel's coarse clock, which stamps files: whatever the run makes or changes has a ctime after it
        self.began = time.clock_gettime_ns(CLOCK_REALTIME_COARSE) if hasattr(time, "clock_gettime_ns") else time.time_ns()
        self.max_size = max_size
        self.meta = meta
        self.run_dir = ""
        self.number = 0
        self.records_fd = -1
        self.kinds: dict[str, str] = {}  # path: kind recorded
        self.modes: dict[str, dict[str, object]] = {}  # path: the first record (for a folder recorded again whole)
        self.covering: set[str] = set()
        # (dev, inode) held by hard links: their data files, this run's and (from KEPT_LINKS) earlier runs'
        self.linked: dict[tuple[int, int], list[str]] = kept_link_files(folder)
        self._mine: set[str] = set()  # this run's own data files among them
        self.size = 0
        self.lost: list[str] = []
        self.failed = ""  # why nothing more could be recorded (the state folder unwritable), once
        self._data_dev = -1
        self._count = 0
        self._pack_fd = -1
        self._pack_end = 0
        self._held: list[dict[str, object]] | None = None
        self.lock = _thread.allocate_lock()  # the checkpoint's thread records while the run's end may come
        self.closed = False
        self.cancelled: Callable[[], bool] | None = None  # set around one call: whether its caller is gone
        self.by = ""  # who makes the records now made (changing's `by`)

    # -- the run's folder, made on the first change ------------------------------------------

    def _open(self) -> bool:
        if self.records_fd >= 0:
            return True
        if self.failed:
            return False
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            _write_once(os.path.join(self.folder, "project"), self.project)
            self.number, self.run_dir = new_run_dir(self.folder)
            os.mkdir(os.path.join(self.run_dir, DATA), 0o700)
            fd = os.open(os.path.join(self.run_dir, RECORDS), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.records_fd = fd
            self._data_dev = os.stat(os.path.join(self.run_dir, DATA)).st_dev
            meta = {**self.meta, "number": self.number, "started": time.time(), "pid": os.getpid(), "roots": list(self.roots)}
            meta["began"] = self.began
            write_meta(self.run_dir, meta)
            if self.floor_before:  # the planning walk's own: what undo may put back where the floor protects
                import json

                write_atomic(os.path.join(self.run_dir, FLOOR_BEFORE), json.dumps(self.floor_before).encode("utf-8", "surrogateescape"))
        except OSError as exc:
            self.failed = f"{self.folder}: {exc.strerror or exc}"
            return False
        return True

    @property
    def recorded(self) -> bool:
        return self.records_fd >= 0

    def _record(self, entry: dict[str, object]) -> None:
        import json

        if self.by:
            entry["by"] = self.by
        if self._held is not None:  # a folder's records, written once all of it is kept
            self._held.append(entry)
            return
        os.write(self.records_fd, (json.dumps(entry, ensure_ascii=True) + "\n").encode())
        path = str(entry["p"])
        self.kinds[path] = str(entry["k"])
        self.modes.setdefault(path, entry)
        if entry["k"] in COVERING:
            self.covering.add(path)

    def _data_name(self) -> str:
        self._count += 1
        return str(self._count)

    def _data(self, name: str) -> str:
        return os.path.join(self.run_dir, DATA, name)

    # -- what the callers say ----------------------------------------------------------------

    def covered(self, path: str) -> bool:
        """Undo puts `path` back already: it, or a folder above it, is recorded whole."""
        if path in self.covering:
            return True
        parent = path
        while True:
            parent = os.path.dirname(parent)
            if parent in self.covering:
                return True
            if parent in ("/", ""):
                return False

    def changing(self, path: str, how: str, by: str = "") -> None:
        """`path` (a host path, absolute and normalised, under one of `roots`) is about to change as
        `how` says; `by="stockade"` for stockade's own acts (git's files carried back), which undo
        may put back where the floor protects."""
        with self.lock:
            if self.closed:
                return
            self.by = by
            try:
                self._changing_path(path, how)
            except Cancelled:
                pass
            finally:
                self.by = ""

    def _changing_path(self, path: str, how: str) -> None:
        known = self.kinds.get(path)
        covered = known is not None or self.covered(path)
        if covered and how not in WRITES and not (known == "dir" and how in (MOVE, RMDIR, REMOVE)):
            return
        try:
            folder, name = beneath.open_parent(path, self.roots)
        except OSError as exc:
            if not covered and exc.errno != errno.ENOENT:
                self.lose(path, exc.strerror or str(exc))  # a link where a folder was: nothing is read through it
            elif not covered and how != CREATE:
                self.lose(path, "its folder is gone")
            elif not covered and self._open():
                self._record({"p": path, "k": "absent"})
            return
        try:
            self._changing(path, how, folder, name, known, covered)
        finally:
            os.close(folder)

    def _changing(self, path: str, how: str, folder: int, name: str, known: str | None, covered: bool) -> None:
        try:
            info: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            if not covered:
                self.lose(path, exc.strerror or str(exc))
            return
        if covered:
            if how in WRITES and info is not None:
                self._unshare(info)
            if known == "dir" and info is not None and stat.S_ISDIR(info.st_mode):
                self._record_tree(path, info, folder, name)
            return
        if info is not None and how == CREATE:
            return  # the name is taken: the call fails, or (O_CREAT) opens it as it stands
        if not self._open():
            return
        if info is None:
            self._record({"p": path, "k": "absent"})
        elif stat.S_ISDIR(info.st_mode):
            if how == META_CHANGE:
                self._record({"p": path, "k": "dir", **_meta(info)})
            elif how == RMDIR and _holds_entries(folder, name):
                return  # the call fails (ENOTEMPTY): nothing to keep
            elif how in (MOVE, RMDIR, REMOVE):
                self._record_tree(path, info, folder, name)
        else:
            links = info.st_nlink
            if how in WRITES and self._unshare(info):
                links = os.stat(name, dir_fd=folder, follow_symlinks=False).st_nlink  # without its links to checkpoints
            self._record_one(path, info, how, folder, name, links)

    def was(self, path: str, folder: int | None, name: str) -> None:
        """`path`'s state before the run as `name` in `folder` holds it (a clone taken before the run,
        clone.py): absent where `folder` is None or `name` is not there; a folder whole; a file kept
        by a link where it can (the clone is stockade's own)."""
        with self.lock:
            if self.closed or path in self.kinds or self.covered(path) or not self._open():
                return
            info: os.stat_result | None = None
            if folder is not None:
                try:
                    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    self._lose(path, exc.strerror or str(exc))
                    return
            if info is None:
                self._record({"p": path, "k": "absent"})
            elif stat.S_ISDIR(info.st_mode):
                assert folder is not None
                self._record_tree(path, info, folder, name)
            else:
                assert folder is not None
                self._record_one(path, info, REMOVE, folder, name)

    def was_folder(self, path: str, info: os.stat_result) -> None:
        """A folder whose mode or owner the run changed, as it was (`info`, the clone's)."""
        with self.lock:
            if not self.closed and path not in self.kinds and not self.covered(path) and self._open():
                self._record({"p": path, "k": "dir", **_meta(info)})

    def take_away(self, path: str) -> None:
        """Undo's own: move `path` (whatever it is, a tree whole) into the checkpoint, recorded as
        moved, unless it is covered already; nothing there is recorded as absent. The caller then
        puts something else there."""
        if self.covered(path):
            return
        if not self._open():
            raise OSError(errno.EIO, self.failed)
        self.by = "stockade"  # the host's state when undo ran: the floor swept the run's long before
        try:
            folder, name = beneath.open_parent(path, self.roots)
        except FileNotFoundError:
            if path not in self.kinds:
                self._record({"p": path, "k": "absent"})
            return
        try:
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                if path not in self.kinds:
                    self._record({"p": path, "k": "absent"})
                return
            data = self._data_name()
            data_folder = os.open(os.path.join(self.run_dir, DATA), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                try:
                    os.rename(name, data, src_dir_fd=folder, dst_dir_fd=data_folder)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    try:  # the checkpoints on another filesystem
                        copy_at(folder, name, data_folder, data)
                        remove_at(folder, name)
                    except RecursionError:
                        raise OSError(errno.ELOOP, "too many folders deep to copy") from None
            finally:
                os.close(data_folder)
            self.size += _size_of(self._data(data))
            self._record({"p": path, "k": "moved", "d": data, **_meta(info)})
        finally:
            os.close(folder)

    def lose(self, path: str, why: str) -> None:
        """Say that `path` changes and cannot be kept (the caller could not see it)."""
        if path in self.kinds or self.covered(path) or not self._open():
            return
        self._lose(path, why)

    # -- keeping ---------------------------------------------------------------------------

    def _lose(self, path: str, why: str) -> None:
        self.lost.append(path)
        self._record({"p": path, "k": "lost", "why": why})

    def _record_one(self, path: str, info: os.stat_result, how: str, folder: int, name: str, links: int = 0) -> None:
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(name, dir_fd=folder)
            except OSError as exc:
                self._lose(path, exc.strerror or str(exc))
                return
            self._record({"p": path, "k": "link", "l": target, **_meta(info)})
            return
        if stat.S_ISFIFO(info.st_mode):
            self._record({"p": path, "k": "fifo", **_meta(info)})
            return
        if not stat.S_ISREG(info.st_mode):
            self._lose(path, "not a file, folder or link")
            return
        if self.size + info.st_size > self.max_size:
            self._lose(path, f"over the checkpoint's size limit ({info.st_size} bytes)")
            return
        try:
            where = self._keep(info, how, folder, name)
        except OSError as exc:
            self._lose(path, exc.strerror or str(exc))
            return
        self._record({"p": path, "k": "file", **where, **_meta(info)})
        if how in WRITES and (links or info.st_nlink) > 1:  # the write changes the file under its other names too
            for other, other_info in self._other_names(path, info):
                if other not in self.kinds and not self.covered(other):
                    self._record({"p": other, "k": "file", **where, **_meta(other_info)})

    def _other_names(self, path: str, info: os.stat_result) -> list[tuple[str, os.stat_result]]:
        """The file's other names in the places the run writes (a walk: files with more names are few)."""
        found: list[tuple[str, os.stat_result]] = []
        for root in self.roots:
            try:
                top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                for inner, inner_info, _folder, _name in walk(top, root):
                    if inner_info.st_ino == info.st_ino and inner_info.st_dev == info.st_dev and inner != path:
                        found.append((inner, inner_info))
                        if len(found) >= info.st_nlink - 1:
                            return found
            finally:
                os.close(top)
        return found

    def _keep(self, info: os.stat_result, how: str, folder: int, name: str) -> dict[str, object]:
        """Keep the file's content: {"d": data name} (the inode itself, linked into the data folder)
        or {"o": offset, "n": length} (copied into the pack)."""
        # a link keeps the inode at no cost, but where the file stays in sight (renamed, its mode
        # changed, given a name more) the sandbox would see one link more: a small one is copied
        stays = how in (MOVE, META_CHANGE) and info.st_size <= LINK_ABOVE
        if info.st_dev == self._data_dev and how not in WRITES and not stays:
            data = self._data_name()
            try:
                os.link(name, self._data(data), src_dir_fd=folder, follow_symlinks=False)
            except OSError:
                pass
            else:
                if self._same(self._data(data), info):
                    self.linked.setdefault((info.st_dev, info.st_ino), []).append(self._data(data))
                    self._mine.add(self._data(data))
                    self.size += max(info.st_size, info.st_blocks * 512)  # a copy before a write in place costs the whole
                    return {"d": data}
                os.unlink(self._data(data))  # swapped meanwhile: not the file that was looked at
        offset, length = self._pack(info, folder, name)
        self.size += length
        return {"o": offset, "n": length}

    @staticmethod
    def _same(path: str, info: os.stat_result) -> bool:
        try:
            now = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)

    def _pack(self, info: os.stat_result, folder: int, name: str) -> tuple[int, int]:
        """Append the file's content to the pack, at a block boundary (a filesystem with reflinks
        then shares the extents); (offset, length)."""
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        try:
            opened = os.fstat(source)
            if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                raise OSError(errno.ESTALE, "it changed while it was kept")
            if self._pack_fd < 0:
                self._pack_fd = os.open(os.path.join(self.run_dir, PACK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            offset = self._pack_end
            length = _copy_range(source, self._pack_fd, offset)
        finally:
            os.close(source)
        self._pack_end = offset + (length + 4095) // 4096 * 4096
        return offset, length

    def _unshare(self, info: os.stat_result) -> bool:
        """Before a write in place: an inode the checkpoint holds by a link gets a copy of its own.
        True when there was one."""
        datas = self.linked.pop((info.st_dev, info.st_ino), ())
        for data in datas:
            self._unshare_data(data)
        return bool(datas)

    def _unshare_data(self, data: str) -> None:
        """A data file's link becomes a copy of its own (the inode is about to change); an earlier
        run's too, which still shared the inode with the project."""
        copy = data + ".copy"
        try:
            kept = os.stat(data, follow_symlinks=False)
            _copy_file(data, copy)
            os.utime(copy, ns=(kept.st_atime_ns, kept.st_mtime_ns))  # undo checks a kept file by its size and mtime
            os.rename(copy, data)
        except OSError:
            _unlink_quietly(copy)
            return
        self.size += _size_of(data)

    def _record_tree(self, path: str, info: os.stat_result, folder: int, name: str) -> None:
        """A folder about to be removed or renamed: it and everything in it not recorded yet, kept
        by links (files), and recorded whole."""
        first = self.modes.get(path)
        try:
            listing = beneath.open_listing(name, folder)
        except OSError:
            listing = -1
        if listing >= 0:
            cut: list[str] = []
            self._held = []
            try:
                for count, (inner, inner_info, inner_folder, inner_name) in enumerate(walk(listing, path, cut)):
                    if count % 512 == 511 and self.cancelled is not None and self.cancelled():
                        raise Cancelled  # the caller is gone: its call never happens
                    if inner in self.kinds or self.covered(inner):
                        continue
                    if stat.S_ISDIR(inner_info.st_mode):
                        self._record({"p": inner, "k": "dir", **_meta(inner_info)})
                    else:
                        self._record_one(inner, inner_info, TREE_MOVE, inner_folder, inner_name)
            except BaseException:
                self._drop_held()  # nothing of a folder whose call never happened
                raise
            finally:
                os.close(listing)
            held, self._held = self._held, None
            for entry in held:
                self._record(entry)
            for deep in cut:
                self._lose(deep, f"more than {MAX_DEPTH} folders down")
        meta = {key: value for key, value in (first or _meta(info)).items() if key in ("m", "u", "g", "t")}
        self._record({"p": path, "k": "tree", **meta})

    def _drop_held(self) -> None:
        held, self._held = self._held or [], None
        for entry in held:
            if "d" in entry:
                data = self._data(str(entry["d"]))
                _unlink_quietly(data)
                self._mine.discard(data)
                for datas in self.linked.values():
                    if data in datas:
                        datas.remove(data)
            self.lost = [path for path in self.lost if path != entry["p"]]

    # -- the end ---------------------------------------------------------------------------

    def finish(self, status: int | None, extra: dict[str, object] | None = None) -> dict[str, object] | None:
        """The run's end: each recorded path's state after it (for undo's conflict check), counts,
        the lock released. None when the run changed nothing (no folder was made). Waits for a
        record under way; nothing is recorded after."""
        with self.lock:
            self.closed = True
            return self._finish(status, extra)

    def _finish(self, status: int | None, extra: dict[str, object] | None) -> dict[str, object] | None:
        if self.records_fd < 0:
            return None
        after, counts = states_after(self.kinds.items())
        if not any(counts.values()):  # only files made and removed again (a compiler's temporaries)
            self._close()
            remove_any(self.run_dir)
            return None
        meta = read_meta(self.run_dir)
        self._note_kept_links()
        try:
            write_atomic(os.path.join(self.run_dir, AFTER), after)
            meta.update({"ended": time.time(), "status": status, "counts": counts, "size": self.size, **(extra or {})})
            write_meta(self.run_dir, meta)
        except OSError:
            pass
        self._close()
        return meta

    def _note_kept_links(self) -> None:
        """Files of the project that still share their inode with this checkpoint's data (a file
        renamed, or whose mode changed) are listed in the project's KEPT_LINKS, so that the next
        run does not take them for hard links into another place (bwrap/parts/hardlinks.py)."""
        lines = []
        for (dev, inode), datas in self.linked.items():
            for data in datas:
                if data not in self._mine:
                    continue  # an earlier run's line is there already
                try:
                    if os.stat(data, follow_symlinks=False).st_nlink > 1:
                        lines.append(f"{dev} {inode} {data}\n")
                except OSError:
                    continue
        if not lines:
            return
        try:
            fd = os.open(os.path.join(self.folder, KEPT_LINKS), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, "".join(lines).encode("utf-8", "surrogateescape"))
            finally:
                os.close(fd)
        except OSError:
            pass

    def _close(self) -> None:
        for fd in (self.records_fd, self._pack_fd):
            if fd >= 0:
                os.close(fd)
        self.records_fd = self._pack_fd = -1


# -- files -----------------------------------------------------------------------------------


def states_after(kinds: Iterable[tuple[str, str]]) -> tuple[bytes, dict[str, int]]:
    """(the AFTER file: each recorded path's state now, the counts `stockade runs` shows) from
    (path, kind recorded) pairs."""
    import json

    counts = {"new": 0, "changed": 0, "removed": 0, "lost": 0}
    lines = []
    for path, kind in kinds:
        stamp = path_stamp(path)
        lines.append(json.dumps({"p": path, "s": stamp}, ensure_ascii=True) + "\n")
        if kind == "lost":
            counts["lost"] += 1
        elif kind == "absent":
            counts["new"] += stamp is not None  # made and removed again: nothing to undo
        elif stamp is None:
            counts["removed"] += 1
        else:
            counts["changed"] += 1
    return "".join(lines).encode(), counts


def path_stamp(path: str) -> list[int] | None:
    """What a path is now, enough to tell whether anybody changed it since: None when absent."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [stat.S_IFMT(info.st_mode), info.st_ino, info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode)]


def _holds_entries(folder: int, name: str) -> bool:
    try:
        listing = beneath.open_listing(name, folder)
    except OSError:
        return False
    try:
        with os.scandir(listing) as entries:
            return next(entries, None) is not None
    except OSError:
        return False
    finally:
        os.close(listing)


def kept_links(folder: str) -> dict[tuple[int, int], int]:
    """The project's inodes that checkpoints hold links to, each counted once per data file that
    still is that inode (a pruned or undone checkpoint's lines no longer count)."""
    return {key: len(files) for key, files in kept_link_files(folder).items()}


def kept_link_files(folder: str) -> dict[tuple[int, int], list[str]]:
    """The data files of `kept_links`, by inode."""
    try:
        with open(os.path.join(folder, KEPT_LINKS), "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
    except OSError:
        return {}
    files: dict[tuple[int, int], list[str]] = {}
    for line in text.splitlines():
        dev, _, rest = line.partition(" ")
        inode, _, data = rest.partition(" ")
        if not (dev.isdigit() and inode.isdigit() and data.startswith(folder + "/")):
            continue
        key = (int(dev), int(inode))
        try:
            info = os.stat(data, follow_symlinks=False)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == key and data not in files.get(key, ()):
            files.setdefault(key, []).append(data)
    return files


def same_state(before: list[int] | None, now: list[int] | None) -> bool:
    """Two stamps of one path name the same state: kind and mode, and a file's size and mtime. A
    file put back by undo is a new inode of the same state; a folder's mtime moves with any entry
    made or removed in it (what is recorded under it is compared on its own)."""
    if before is None or now is None:
        return before is now
    if before[0] != now[0] or before[4] != now[4]:
        return False
    return before[0] == stat.S_IFDIR or before[2:4] == now[2:4]


def _meta(info: os.stat_result) -> dict[str, object]:
    """A path's mode, owner and mtime; for a file with more names, its inode (undo links them again)."""
    meta: dict[str, object] = {"m": stat.S_IMODE(info.st_mode), "u": info.st_uid, "g": info.st_gid, "t": info.st_mtime_ns, "c": info.st_ctime_ns}
    meta["s"] = [info.st_ino, info.st_size]
    if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
        meta["i"] = [info.st_dev, info.st_ino]
    return meta


MAX_DEPTH = 256  # folders below this many levels are not walked (each level holds an fd open)


def walk(listing: int, path: str, cut: list[str] | None = None, descend: Callable[[str], bool] | None = None) -> Iterator[Walked]:
    """(path, its lstat, the fd of its folder, its name) of everything under the folder open at
    `listing` (named `path`), folders before what they hold; links never followed, each folder
    opened from the one above it, without recursion. A folder MAX_DEPTH levels down is listed but
    not walked: it goes into `cut`. `descend(path)` False: a folder listed, not walked."""
    stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = []
    try:
        stack.append((listing, path, iter(list(os.scandir(listing)))))
    except OSError:
        return
    try:
        while stack:
            folder, folder_path, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                if folder != listing:
                    os.close(folder)
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            inner = folder_path.rstrip("/") + "/" + entry.name
            yield inner, info, folder, entry.name
            if not stat.S_ISDIR(info.st_mode) or (descend is not None and not descend(inner)):
                continue
            if len(stack) >= MAX_DEPTH:
                if cut is not None:
                    cut.append(inner)
                continue
            try:
                child = beneath.open_listing(entry.name, folder)
            except OSError:
                continue
            try:
                listed = list(os.scandir(child))
            except OSError:
                os.close(child)
                continue
            stack.append((child, inner, iter(listed)))
    finally:
        for folder, _path, _entries in stack:
            if folder != listing:
                os.close(folder)


def copy_at(folder: int, name: str, target_folder: int, target: str) -> None:
    """Copy `name` in `folder` (a file, link or whole tree; modes and times kept) to `target` in
    `target_folder`, never through a link."""
    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=folder), target, dir_fd=target_folder)
        return
    if stat.S_ISDIR(info.st_mode):
        os.mkdir(target, 0o700, dir_fd=target_folder)
        source = beneath.open_listing(name, folder)
        inner = os.open(target, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=target_folder)
        try:
            for entry in list(os.scandir(source)):
                copy_at(source, entry.name, inner, entry.name)
        finally:
            os.close(source)
            os.close(inner)
    elif stat.S_ISREG(info.st_mode):
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        try:
            dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=target_folder)
            try:
                _copy_range(src, dst, 0)
            finally:
                os.close(dst)
        finally:
            os.close(src)
    elif stat.S_ISFIFO(info.st_mode):
        os.mkfifo(target, 0o600, dir_fd=target_folder)
    else:
        return  # a socket or device: nothing to keep of it
    os.chmod(target, stat.S_IMODE(info.st_mode), dir_fd=target_folder)  # stockade's own new entry: no link
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=target_folder, follow_symlinks=False)


def remove_at(folder: int, name: str) -> None:
    """Remove `name` in `folder`, a whole tree without following a link."""
    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        listing = beneath.open_listing(name, folder)
        try:
            for entry in list(os.scandir(listing)):
                remove_at(listing, entry.name)
        finally:
            os.close(listing)
        os.rmdir(name, dir_fd=folder)
    else:
        os.unlink(name, dir_fd=folder)


def _copy_file(source: str, target: str) -> None:
    """A copy of a regular file (a reflink where the filesystem shares extents), never following a link."""
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.ioctl(dst, FICLONE, src)
            except OSError:
                _copy_range(src, dst, 0)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_range(source: int, target: int, offset: int) -> int:
    """Copy all of `source` into `target` at `offset`, in the kernel where it can; bytes copied."""
    done = 0
    while True:
        try:
            count = os.copy_file_range(source, target, 1 << 30, None, offset + done)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            while True:
                chunk = os.read(source, 1 << 20)
                if not chunk:
                    return done
                os.pwrite(target, chunk, offset + done)
                done += len(chunk)
        if count == 0:
            return done
        done += count


def unpack(pack: str, offset: int, length: int, folder: int, name: str) -> None:
    """A new file `name` in `folder` (it must not exist) holding the pack's bytes at offset."""
    source = os.open(pack, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
        try:
            done = 0
            while done < length:
                try:
                    count = os.copy_file_range(source, fd, length - done, offset + done, done)
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                        raise
                    chunk = os.pread(source, min(1 << 20, length - done), offset + done)
                    count = os.pwrite(fd, chunk, done) if chunk else 0
                if count == 0:
                    raise OSError(errno.EIO, f"the checkpoint's pack ends before {offset + length}")
                done += count
        finally:
            os.close(fd)
    finally:
        os.close(source)


def remove_any(path: str) -> None:
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _size_of(path: str) -> int:
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        return info.st_blocks * 512
    total = 0
    for folder, _names, files in os.walk(path):  # the checkpoint's own folder: nobody else writes it
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def new_run_dir(folder: str) -> tuple[int, str]:
    """The next run number in the project's folder, taken by mkdir (two runs at once get two)."""
    highest = max((int(name) for name in os.listdir(folder) if name.isdigit()), default=0)
    for number in range(highest + 1, highest + 1000):
        path = os.path.join(folder, str(number))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return number, path
    raise OSError(errno.EEXIST, "no free run number")


def _write_once(path: str, text: str) -> None:
    if not os.path.exists(path):
        write_atomic(path, text.encode("utf-8", "surrogateescape"))


def write_atomic(path: str, data: bytes) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(temporary, path)


def held(path: str) -> bool:
    """Whether a live stockade holds the lock on `path` (a run's records, a stage's lock file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)
    return False


def read_meta(run_dir: str, name: str = META) -> dict[str, object]:
    """A run's meta (or a stage's manifest, `name`); {} where it is missing or not a JSON object."""
    import json

    try:
        with open(os.path.join(run_dir, name), "rb") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_meta(run_dir: str, meta: dict[str, object], name: str = META) -> None:
    import json

    write_atomic(os.path.join(run_dir, name), json.dumps(meta, ensure_ascii=True).encode("utf-8", "surrogateescape"))
