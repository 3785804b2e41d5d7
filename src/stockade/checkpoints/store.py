"""One run's checkpoint, recorded as the run goes.

Each path the run changes is recorded once, just before its first change, as
what it was then: absent, a file (its content kept in the checkpoint's data
folder), a link, a folder, or a whole tree moved away. A path under one that
was absent or recorded whole needs nothing more: undo puts that one back
whole. The content is kept as cheaply as the change allows:
- a file about to be removed, renamed or replaced keeps its inode, by a hard
  link into the data folder (no copy);
- a file about to be written in place, or truncated, is copied (a reflink
  where the filesystem has them; the kernel copies, without reading it here);
- a large file about to be truncated keeps its inode instead: it is linked
  into the data folder and an empty file of the same mode takes its name, which
  the run then opens (truncating an empty file is what the run asked for);
  below COPY_BELOW a copy costs less than making a new inode;
- the data folder on another filesystem than the file: a copy.
An inode kept by a link and then written in place (through another name, or
after a rename) is first copied, so what the checkpoint holds never changes.

The records are appended to one file, each before its change goes on, so a
run killed halfway leaves a checkpoint that covers every change it made. A run
holds a lock on that file while it lives: undo and pruning leave it alone.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

FOLDER = "checkpoints"
RECORDS = "records"
AFTER = "after"
META = "run.json"
DATA = "data"
FICLONE = 0x40049409  # ioctl: share the source's extents (btrfs, xfs), where the filesystem can
PACK = "pack"
COPY_BELOW = 4 * 1024 * 1024  # a truncated file this small is copied (bench/RESULTS.md, checkpoints)

# how a path is about to change (what the caller saw the run ask for)
WRITE = "write"  # opened for writing, not truncated
TRUNCATE_OPEN = "truncate-open"  # opened with O_TRUNC
TRUNCATE = "truncate"  # truncate(2) to some length
REMOVE = "remove"  # unlinked, or replaced by a rename onto it
MOVE = "move"  # renamed away
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


class Recorder:
    """The checkpoint of one run (or of one undo): `changing` before each change."""

    def __init__(self, folder: str, project: str, max_size: int, meta: dict[str, object], roots: tuple[str, ...] = ()) -> None:
        self.folder = folder  # the project's checkpoints folder; the run's own is made at the first change
        self.project = project
        self.roots = roots or (project,)  # where the run writes: other names of a file written in place are there
        self.max_size = max_size
        self.meta = meta
        self.run_dir = ""
        self.number = 0
        self.records_fd = -1
        self.kinds: dict[str, str] = {}  # path: kind recorded
        self.modes: dict[str, dict[str, object]] = {}  # path: the first record (for a folder recorded again whole)
        self.covering: set[str] = set()
        self.linked: dict[tuple[int, int], list[str]] = {}  # (dev, inode) held by hard links: their data names
        self.size = 0
        self.lost: list[str] = []
        self.failed = ""  # why nothing more could be recorded (the state folder unwritable), once
        self._data_dev = -1
        self._count = 0
        self._pack_fd = -1
        self._pack_end = 0

    # -- the run's folder, made on the first change ------------------------------------------

    def _open(self) -> bool:
        if self.records_fd >= 0:
            return True
        if self.failed:
            return False
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            _write_once(os.path.join(self.folder, "project"), self.project)
            self.number, self.run_dir = _new_run_dir(self.folder)
            os.mkdir(os.path.join(self.run_dir, DATA), 0o700)
            fd = os.open(os.path.join(self.run_dir, RECORDS), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.records_fd = fd
            self._data_dev = os.stat(os.path.join(self.run_dir, DATA)).st_dev
            write_meta(self.run_dir, {**self.meta, "number": self.number, "started": time.time(), "pid": os.getpid()})
        except OSError as exc:
            self.failed = f"{self.folder}: {exc.strerror or exc}"
            return False
        return True

    @property
    def recorded(self) -> bool:
        return self.records_fd >= 0

    def _record(self, entry: dict[str, object]) -> None:
        import json

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

    def changing(self, path: str, how: str) -> None:
        """`path` (a host path, absolute and normalised) is about to change as `how` says."""
        if how == CREATE and self.kinds.get(path) is None and not self.covered(path) and os.path.lexists(path):
            return  # before the run's folder is made: most creating opens find their file there
        known = self.kinds.get(path)
        if known is not None or self.covered(path):
            if how in WRITES:
                self._unshare(path)
            if known == "dir" and how in (MOVE, RMDIR, REMOVE):
                self._record_tree(path, os.lstat(path) if os.path.lexists(path) else None)
            return
        if not self._open():
            return
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            self._record({"p": path, "k": "absent"})
            return
        except OSError as exc:
            self._lose(path, exc.strerror or str(exc))
            return
        if how == CREATE:
            return  # the name is taken: the call fails, or (O_CREAT) opens it as it stands
        if stat.S_ISDIR(info.st_mode):
            if how == META_CHANGE:
                self._record({"p": path, "k": "dir", **_meta(info)})
            elif how in (MOVE, RMDIR, REMOVE):
                self._record_tree(path, info)
            return
        if how in WRITES:
            self._unshare(path)
        self._record_one(path, info, how)

    def take_away(self, path: str) -> None:
        """Undo's own: move `path` (whatever it is, a tree whole) into the checkpoint, recorded as
        moved, unless it is covered already; the caller then puts something else there."""
        if self.covered(path) or not os.path.lexists(path):
            if not self.covered(path) and path not in self.kinds and self._open():
                self._record({"p": path, "k": "absent"})
            return
        if not self._open():
            raise OSError(errno.EIO, self.failed)
        info = os.lstat(path)
        name = self._data_name()
        try:
            os.rename(path, self._data(name))
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            copy_any(path, self._data(name))
            remove_any(path)
        self.size += _size_of(self._data(name))
        self._record({"p": path, "k": "moved", "d": name, **_meta(info)})

    def lose(self, path: str, why: str) -> None:
        """Say that `path` changes and cannot be kept (the caller could not see it)."""
        if path in self.kinds or self.covered(path) or not self._open():
            return
        self._lose(path, why)

    # -- keeping ---------------------------------------------------------------------------

    def _lose(self, path: str, why: str) -> None:
        self.lost.append(path)
        self._record({"p": path, "k": "lost", "why": why})

    def _record_one(self, path: str, info: os.stat_result, how: str) -> None:
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(path)
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
            where = self._keep(path, info, how)
        except OSError as exc:
            self._lose(path, exc.strerror or str(exc))
            return
        self._record({"p": path, "k": "file", **where, **_meta(info)})
        if how == TRUNCATE_OPEN and "d" in where:
            self._replace_with_empty(path, info, str(where["d"]))
        if how in WRITES and info.st_nlink > 1:  # the write changes the file under its other names too
            for other, other_info in self._other_names(path, info):
                if other not in self.kinds and not self.covered(other):
                    self._record({"p": other, "k": "file", **where, **_meta(other_info)})

    def _other_names(self, path: str, info: os.stat_result) -> list[tuple[str, os.stat_result]]:
        """The file's other names in the places the run writes (a walk: files with more names are few)."""
        found: list[tuple[str, os.stat_result]] = []
        for root in self.roots:
            for inner, inner_info in _walk(root):
                if inner_info.st_ino == info.st_ino and inner_info.st_dev == info.st_dev and inner != path:
                    found.append((inner, inner_info))
                    if len(found) >= info.st_nlink - 1:
                        return found
        return found

    def _keep(self, path: str, info: os.stat_result, how: str) -> dict[str, object]:
        """Keep `path`'s content: {"d": name} (the inode itself, linked into the data folder) or
        {"o": offset, "n": length} (copied into the pack, one file for all the run's copies: a new
        inode for each would cost more than the copy)."""
        replace = how == TRUNCATE_OPEN and info.st_size >= COPY_BELOW and info.st_nlink == 1 and _writable_inside(info) and not _has_xattrs(path)
        if info.st_dev == self._data_dev and (how not in WRITES or replace):
            name = self._data_name()
            try:
                os.link(path, self._data(name), follow_symlinks=False)
            except OSError:
                pass
            else:
                if how != TRUNCATE_OPEN:
                    self.linked.setdefault((info.st_dev, info.st_ino), []).append(name)
                self.size += info.st_blocks * 512
                return {"d": name}
        offset, length = self._pack(path)
        self.size += length
        return {"o": offset, "n": length}

    def _pack(self, path: str) -> tuple[int, int]:
        """Append the file's content to the pack, at a block boundary (a filesystem with reflinks
        then shares the extents); (offset, length)."""
        if self._pack_fd < 0:
            self._pack_fd = os.open(os.path.join(self.run_dir, PACK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        offset = self._pack_end
        source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            length = _copy_range(source, self._pack_fd, offset)
        finally:
            os.close(source)
        self._pack_end = offset + (length + 4095) // 4096 * 4096
        return offset, length

    def _replace_with_empty(self, path: str, info: os.stat_result, name: str) -> None:
        """The truncating open's cheap path: an empty file of the same mode and owner takes the name
        (the data folder keeps the inode). Where that cannot be made, the inode is copied instead."""
        folder = os.path.dirname(path)
        temporary = os.path.join(folder, f".stockade-new-{os.getpid()}-{name}")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (0, 0):
                    os.fchown(fd, info.st_uid, info.st_gid)
                os.fchmod(fd, stat.S_IMODE(info.st_mode))
            finally:
                os.close(fd)
            os.rename(temporary, path)
        except OSError:
            _unlink_quietly(temporary)
            self._unshare_data(name)  # the run truncates the inode itself: the checkpoint keeps a copy

    def _unshare(self, path: str) -> None:
        """Before a write in place: an inode the checkpoint holds by a link gets a copy of its own."""
        if not self.linked:
            return
        try:
            info = os.stat(path)
        except OSError:
            return
        for name in self.linked.pop((info.st_dev, info.st_ino), ()):
            self._unshare_data(name)

    def _unshare_data(self, name: str) -> None:
        """The data folder's link becomes a copy of its own (the inode is about to change)."""
        data = self._data(name)
        copy = data + ".copy"
        try:
            _copy_file(data, copy)
            os.rename(copy, data)
        except OSError:
            _unlink_quietly(copy)

    def _record_tree(self, path: str, info: os.stat_result | None) -> None:
        """A folder about to be removed or renamed: it and everything in it not recorded yet, kept
        by links (files), and recorded whole."""
        first = self.modes.get(path)
        if info is None:
            return
        for inner, inner_info in _walk(path):
            if inner in self.kinds or self.covered(inner):
                continue
            if stat.S_ISDIR(inner_info.st_mode):
                self._record({"p": inner, "k": "dir", **_meta(inner_info)})
            else:
                self._record_one(inner, inner_info, MOVE)
        meta = {key: value for key, value in (first or _meta(info)).items() if key in ("m", "u", "g", "t")}
        self._record({"p": path, "k": "tree", **meta})

    # -- the end ---------------------------------------------------------------------------

    def finish(self, status: int | None, extra: dict[str, object] | None = None) -> dict[str, object] | None:
        """The run's end: each recorded path's state after it (for undo's conflict check), counts,
        the lock released. None when the run changed nothing (no folder was made)."""
        if self.records_fd < 0:
            return None
        import json

        counts = {"new": 0, "changed": 0, "removed": 0, "lost": len(self.lost)}
        lines = []
        for path, kind in self.kinds.items():
            stamp = path_stamp(path)
            lines.append(json.dumps({"p": path, "s": stamp}, ensure_ascii=True))
            if kind == "lost":
                continue
            if kind == "absent":
                counts["new"] += stamp is not None  # made and removed again: nothing to undo
            elif stamp is None:
                counts["removed"] += 1
            else:
                counts["changed"] += 1
        if not any(counts.values()):  # only files made and removed again (a compiler's temporaries)
            self._close()
            remove_any(self.run_dir)
            return None
        meta = read_meta(self.run_dir)
        try:
            write_atomic(os.path.join(self.run_dir, AFTER), ("\n".join(lines) + "\n").encode())
            meta.update({"ended": time.time(), "status": status, "counts": counts, "size": self.size, **(extra or {})})
            write_meta(self.run_dir, meta)
        except OSError:
            pass
        self._close()
        return meta

    def _close(self) -> None:
        for fd in (self.records_fd, self._pack_fd):
            if fd >= 0:
                os.close(fd)
        self.records_fd = self._pack_fd = -1


# -- files -----------------------------------------------------------------------------------


def path_stamp(path: str) -> list[int] | None:
    """What a path is now, enough to tell whether anybody changed it since: None when absent."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [stat.S_IFMT(info.st_mode), info.st_ino, info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode)]


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
    meta: dict[str, object] = {"m": stat.S_IMODE(info.st_mode), "u": info.st_uid, "g": info.st_gid, "t": info.st_mtime_ns}
    if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
        meta["i"] = [info.st_dev, info.st_ino]
    return meta


def _walk(root: str) -> Iterator[tuple[str, os.stat_result]]:
    """Everything under `root` (not root itself), folders before what they hold; links not followed."""
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, info
            if stat.S_ISDIR(info.st_mode):
                todo.append(entry.path)


def _writable_inside(info: os.stat_result) -> bool:
    """Whether the sandbox's process may open the file for writing: by its mode bits alone, for
    the sandbox holds no capability, root's neither (os.access would answer for root outside)."""
    if info.st_uid == os.geteuid():
        return bool(info.st_mode & stat.S_IWUSR)
    if info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        return bool(info.st_mode & stat.S_IWGRP)
    return bool(info.st_mode & stat.S_IWOTH)


def _has_xattrs(path: str) -> bool:
    try:
        return bool(os.listxattr(path, follow_symlinks=False))
    except OSError:
        return False


def _copy_file(source: str, target: str) -> None:
    """A copy of a regular file (a reflink where the filesystem shares extents), never following a link."""
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.ioctl(dst, FICLONE, src)
                return
            except OSError:
                pass
            while True:
                try:
                    done = os.copy_file_range(src, dst, 1 << 30)
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                        raise
                    _copy_by_reading(src, dst)
                    return
                if done == 0:
                    return
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


def unpack(pack: str, offset: int, length: int, target: str) -> None:
    """A new file at `target` (which must not exist) holding the pack's bytes at offset."""
    source = os.open(pack, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
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


def _copy_by_reading(src: str | int, dst: int) -> None:
    while True:
        chunk = os.read(src, 1 << 20)  # type: ignore[arg-type]
        if not chunk:
            return
        os.write(dst, chunk)


def copy_any(source: str, target: str) -> None:
    """A whole path (file, link, tree) copied to another filesystem, modes and times kept."""
    import shutil

    if os.path.isdir(source) and not os.path.islink(source):
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


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
    return sum(inner.st_blocks * 512 for _path, inner in _walk(path))


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _new_run_dir(folder: str) -> tuple[int, str]:
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


def read_meta(run_dir: str) -> dict[str, object]:
    import json

    try:
        with open(os.path.join(run_dir, META), "rb") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_meta(run_dir: str, meta: dict[str, object]) -> None:
    import json

    write_atomic(os.path.join(run_dir, META), json.dumps(meta, ensure_ascii=True).encode())
