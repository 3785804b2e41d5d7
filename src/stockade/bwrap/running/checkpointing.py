"""A run's checkpoint, taken as the sandbox goes: each change waits until its path is recorded.

The child loads the notifying filter (parts/write_notify.py) and hands its
listener over a socketpair; a thread here answers each notification:
1. it reads the call's path from the process's memory and resolves it in the
   sandbox's own view (from /proc/PID/root, links resolved as inside);
2. it maps the sandbox's path to the host's through the plan's writable binds,
   and checks that both name one file (same device and inode) on a writable
   mount: anything else (a private /tmp, a cache layer, a read-only bind, the
   stage of git's config) is not the user's and is left alone;
3. the checkpoint (checkpoints/store.py) records the path as it is;
4. the call goes on as the process made it.
A notification this thread cannot judge goes on unrecorded: a checkpoint is
for mistakes, and never stops a run. The command cannot reach the listener:
its fd is stockade's alone.
"""

from __future__ import annotations

import _socket
import _thread  # not `threading`, which costs 3 ms to import on every run
import errno
import fcntl
import os
import struct

from stockade.bwrap.parts import write_notify
from stockade.checkpoints import store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

NOTIF_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV: struct seccomp_notif, 80 bytes
NOTIF_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND: struct seccomp_notif_resp, 24 bytes
NOTIF_ID_VALID = 0x40082102
NOTIF_SET_FLAGS = 0x40082104
SYNC_WAKE_UP = 1  # Linux 6.6: the waiting caller and this thread hand the CPU to each other
FLAG_CONTINUE = 1
AT_FDCWD = -100
AT_REMOVEDIR = 0x200
AT_SYMLINK_NOFOLLOW = 0x100
AT_SYMLINK_FOLLOW = 0x400
AT_EMPTY_PATH = 0x1000
RENAME_EXCHANGE = 2
OPENAT2 = 437
RESOLVE_IN_ROOT = 0x10
O_PATH = 0o10000000

WRITERS = 4  # processes kept per changed path: the last, and those before it

WRITABLE_BINDS = frozenset({b"--bind", b"--bind-try", b"--dev-bind", b"--dev-bind-try"})
DEVICE_BINDS = frozenset({b"--dev-bind", b"--dev-bind-try"})
TWO_WORDS = frozenset({b"--ro-bind", b"--ro-bind-try", b"--bind-data", b"--ro-bind-data", b"--symlink", b"--setenv", b"--file", b"--chmod"})
ONE_WORD_MOUNTS = frozenset({b"--tmpfs", b"--dev", b"--proc", b"--mqueue", b"--remount-ro", b"--dir", b"--tmp-overlay", b"--ro-overlay"})
ONE_WORD = frozenset(
    {b"--perms", b"--size", b"--chdir", b"--unsetenv", b"--seccomp", b"--add-seccomp-fd", b"--json-status-fd", b"--info-fd",
     b"--block-fd", b"--userns-block-fd", b"--sync-fd", b"--lock-file", b"--uid", b"--gid", b"--hostname", b"--args",
     b"--userns", b"--userns2", b"--pidns", b"--argv0", b"--cap-add", b"--cap-drop", b"--exec-label", b"--file-label",
     b"--overlay-src"}
)  # fmt: skip


class Places:
    """Where the sandbox's writes land on the host: each sandbox path's mount, from bwrap's words
    (the deepest destination above it wins, the later of two at one place)."""

    def __init__(self, words: list[bytes], own: tuple[str, ...]) -> None:
        mounts: list[tuple[str, str | None]] = []
        index = 0
        while index < len(words):
            word = words[index]
            if word in WRITABLE_BINDS and index + 2 < len(words):
                source, dest = os.fsdecode(words[index + 1]), os.fsdecode(words[index + 2])
                # stockade's own folders, and device nodes (a GPU's, opened for writing by every CUDA process)
                mine = word in DEVICE_BINDS or any(store.within(source, folder) for folder in own)
                mounts.append((dest.rstrip("/") or "/", None if mine else source.rstrip("/") or "/"))
                index += 3
            elif word in TWO_WORDS or word == b"--overlay":
                if word in (b"--ro-bind", b"--ro-bind-try", b"--bind-data", b"--ro-bind-data"):
                    mounts.append((os.fsdecode(words[index + 2]).rstrip("/") or "/", None))
                index += 4 if word == b"--overlay" else 3
            elif word in ONE_WORD_MOUNTS:
                mounts.append((os.fsdecode(words[index + 1]).rstrip("/") or "/", None))
                index += 2
            elif word in ONE_WORD:
                index += 2
            elif word == b"--":
                break
            else:
                index += 1  # a flag
        # the deepest first; at one depth the later (reversed before a stable sort)
        self.mounts = sorted(reversed(mounts), key=lambda mount: -len(mount[0]))

    def host_path(self, inside: str) -> str | None:
        for dest, source in self.mounts:
            if inside == dest or inside.startswith(dest + "/") or dest == "/":
                if source is None:
                    return None
                rest = inside[len(dest) :] if dest != "/" else inside
                return source + rest if source != "/" else (rest or "/")
        return None

    def mount_point(self, inside: str) -> bool:
        """Something is mounted right at `inside` (the project, a staged .git, a file bound alone)."""
        return any(dest == inside for dest, _source in self.mounts)

    @property
    def sources(self) -> tuple[str, ...]:
        """The host folders and files the sandbox writes through its binds."""
        return tuple(dict.fromkeys(source for _dest, source in self.mounts if source is not None))


class Checkpointing:
    """One run's watch: made before the fork, `child` in the forked child, `attach` once bwrap runs,
    `stop` when it has ended."""

    def __init__(self, recorder: store.Recorder, places: Places, bwrap: str, traced: bool = False) -> None:
        self.recorder = recorder
        self.bwrap = bwrap  # its own calls, setting the sandbox up, are never the user's changes
        # how far below the spawned process the sandbox's own bwrap processes are: bwrap and its
        # child that becomes the sandbox's pid 1; one more under --trace (strace above them)
        self.setup_depth = 2 if traced else 1
        self.spawned = -1
        self.places = places
        self.arch = write_notify.machine()
        self.load = write_notify.loader(self.arch)
        parent, child = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.channel = parent
        self.child_channel_fd = child.detach()
        self.listener = -1
        self.done = _thread.allocate_lock()  # held while the thread serves
        self.serving = False
        self.unseen = 0  # calls that may have changed a path this thread could not follow (runs, undo say so)
        self.unloaded = ""  # why the filter could not be loaded: the run goes on without a checkpoint
        self._numbers = {number: name for name, (number, _flags) in write_notify.CALLS[self.arch].items()}
        self._nofollow = write_notify.O_NOFOLLOW[self.arch]
        self._openat2: Callable[..., int] | None = None
        self._sandboxed: set[int] = set()
        # the first process to change each path, described while its call waited: a file moved aside
        # after the run names it in its audit record (bwrap/after/findings_log.py)
        self.writers: dict[str, list[tuple[int, tuple[int, int]]]] = {}  # host path -> [(order, (pid, start time))]
        self.processes: dict[tuple[int, int], dict[str, Any]] = {}
        self._parents: dict[tuple[int, int], dict[str, Any]] = {}
        self._sequence = 0

    # -- in the child, before exec ---------------------------------------------------------

    def child(self) -> None:
        """Load the filter and hand its listener to stockade; a refusal is handed on as a word."""
        channel = _socket.socket(fileno=self.child_channel_fd)
        try:
            fd = self.load()
        except OSError as exc:
            channel.sendall(f"E{exc.errno}".encode())
        else:  # with this process's pid: bwrap, or (under --trace) strace, is this process
            channel.sendmsg([b"L%d" % os.getpid()], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("i", fd))])
            os.close(fd)
        channel.detach()
        os.close(self.child_channel_fd)

    # -- in stockade -----------------------------------------------------------------------

    def attach(self) -> None:
        """After the fork: take the listener and start answering."""
        os.close(self.child_channel_fd)
        self.channel.settimeout(10)
        try:
            message, ancillary, _flags, _address = self.channel.recvmsg(16, _socket.CMSG_SPACE(4))
        except OSError as exc:
            self.unloaded = f"no listener came ({exc})"
            return
        finally:
            self.channel.close()
        for level, kind, data in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS and len(data) >= 4:
                self.listener = struct.unpack("i", data[:4])[0]
        if self.listener < 0:
            code = message[1:].decode(errors="replace")
            self.unloaded = os.strerror(int(code)) if code.isdigit() else "no listener came"
            return
        word = message[1:].decode(errors="replace")
        self.spawned = int(word) if word.isdigit() else -1
        try:
            fcntl.ioctl(self.listener, NOTIF_SET_FLAGS, SYNC_WAKE_UP)
        except OSError:
            pass  # an older kernel: each answer takes a wakeup more
        self.done.acquire()
        self.serving = True
        _thread.start_new_thread(self._serve_then_release, ())

    def stop(self) -> None:
        """After bwrap ended: the thread has ended or soon does (every caller of the filter is
        gone, which wakes it); one still held by a straggler is left to end with stockade."""
        if self.serving:
            if not self.done.acquire(timeout=5):
                return
            self.done.release()
        if self.listener >= 0:
            os.close(self.listener)
            self.listener = -1

    def _serve_then_release(self) -> None:
        try:
            self._serve()
        finally:
            self.done.release()

    def _serve(self) -> None:
        """Answer until nobody is left under the filter: the kernel then wakes the waiting receive
        with ENOENT and marks the listener hung up."""
        buffer = bytearray(80)
        empty = bytes(80)
        while True:
            buffer[:] = empty
            try:
                fcntl.ioctl(self.listener, NOTIF_RECV, buffer, True)
            except OSError as exc:
                if exc.errno == errno.ENOENT and not self._orphaned():
                    continue  # the caller died while it waited
                if exc.errno == errno.EINTR:
                    continue
                return
            ident, pid = struct.unpack_from("=QI", buffer)
            number = struct.unpack_from("=i", buffer, 16)[0] & ~write_notify.X32_BIT
            arguments = struct.unpack_from("=6Q", buffer, 32)
            try:
                self._judge(ident, pid, number, arguments)
            except Exception:  # noqa: BLE001 - a checkpoint never stops the run
                self.unseen += 1
            try:
                fcntl.ioctl(self.listener, NOTIF_SEND, struct.pack("=QqiI", ident, 0, 0, FLAG_CONTINUE))
            except OSError:
                pass

    def _orphaned(self) -> bool:
        import select

        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        events = dict(poller.poll(0)).get(self.listener, 0)
        return bool(events & select.POLLHUP) and not events & select.POLLIN

    # -- one call ----------------------------------------------------------------------------

    def _judge(self, ident: int, pid: int, number: int, a: tuple[int, ...]) -> None:
        name = self._numbers.get(number)
        if name is None:
            return
        if pid not in self._sandboxed:
            try:
                if os.readlink(f"/proc/{pid}/exe") == self.bwrap and self._setting_up(pid):
                    return  # the sandbox's own bwrap making its mount points, writing its maps
            except OSError:
                return
            self._sandboxed.add(pid)  # a process of the sandbox: any bwrap it runs is judged as any program
        for target in self._targets(name, a, pid):
            dirfd, pointer, how, follow = target
            if how == "fd":
                path = self._fd_path(pid, dirfd)
                if path is not None:
                    self._record_inside(ident, pid, path, store.META_CHANGE, follow=False)
                continue
            raw = self._read_path(pid, pointer)
            if raw is None:
                continue
            if not raw:
                if how == store.META_CHANGE and dirfd != AT_FDCWD:  # AT_EMPTY_PATH: the fd itself
                    path = self._fd_path(pid, dirfd)
                    if path is not None:
                        self._record_inside(ident, pid, path, how, follow=False)
                continue
            self._record_inside(ident, pid, self._absolute(pid, dirfd, os.fsdecode(raw)), how, follow=follow)

    def _setting_up(self, pid: int) -> bool:
        """`pid` is the bwrap stockade started, or its child that becomes the sandbox's pid 1 (not a
        bwrap the command runs, which an LD_PRELOAD could make write anything)."""
        for _level in range(self.setup_depth + 1):
            if pid == self.spawned:
                return True
            pid = _parent(pid)
            if pid <= 0:
                return False
        return False

    def _targets(self, name: str, a: tuple[int, ...], pid: int) -> list[tuple[int, int, str, bool]]:
        """(dirfd, path pointer, how, follow the last link) of each path the call changes."""
        if name in OPENS:
            if name == "open":
                dirfd, pointer, flags = AT_FDCWD, a[0], a[1]
            elif name == "creat":
                dirfd, pointer, flags = AT_FDCWD, a[0], 0o1 | 0o100 | 0o1000
            else:
                dirfd, pointer = _fd(a[0]), a[1]
                flags = a[2] if name == "openat" else self._read_u64(pid, a[2])
            how = _open_how(flags)
            return [] if how is None else [(dirfd, pointer, how, not flags & self._nofollow)]
        decode = DECODERS.get(name)
        return decode(a) if decode is not None else []

    def _read_path(self, pid: int, pointer: int) -> bytes | None:
        """The NUL-terminated string at `pointer` in the process. Its memory is opened for each call:
        one kept open could be the memory a vfork child shared before its exec."""
        if pointer == 0:
            return None
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        data = b""
        try:
            while len(data) < 4096:
                at = pointer + len(data)
                try:  # up to the page's end: the next page may not be mapped
                    chunk = os.pread(fd, min(4096 - len(data), 4096 - at % 4096), at)
                except OSError:
                    return None
                if not chunk:
                    return None
                end = chunk.find(b"\0")
                if end >= 0:
                    return data + chunk[:end]
                data += chunk
            return None
        finally:
            os.close(fd)

    def _read_u64(self, pid: int, pointer: int) -> int:
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return 0o3  # unknown flags: treated as an open for writing
        try:
            data = os.pread(fd, 8, pointer)
        except OSError:
            data = b""
        finally:
            os.close(fd)
        return struct.unpack("=Q", data)[0] if len(data) == 8 else 0o3

    def _fd_path(self, pid: int, number: int) -> str | None:
        try:
            text = os.readlink(f"/proc/{pid}/fd/{number}")
        except OSError:
            return None
        return text if text.startswith("/") and not text.endswith(" (deleted)") else None

    def _absolute(self, pid: int, dirfd: int, path: str) -> str:
        """The path as the sandbox names it from its root (magic /proc paths kept as they are)."""
        if path.startswith("/"):
            return path
        base = os.readlink(f"/proc/{pid}/cwd") if dirfd == AT_FDCWD else os.readlink(f"/proc/{pid}/fd/{dirfd}")
        if not base.startswith("/") or base.endswith(" (deleted)"):
            raise OSError(errno.ENOENT, "no folder to resolve in")
        return base.rstrip("/") + "/" + path

    def _record_inside(self, ident: int, pid: int, inside: str, how: str, *, follow: bool) -> None:
        """Record the host's file that the sandbox's `inside` names, if it is the user's and writable."""
        inside = self._unmagic(pid, inside)
        root = os.open(f"/proc/{pid}/root", O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            found = self._host_of(root, inside, follow)
            if found is None:  # a link into /proc on the way, which RESOLVE_IN_ROOT refuses: one name at a time
                canonical = self._canonical(pid, root, inside, follow)
                if canonical is not None and canonical != inside:
                    found = self._host_of(root, canonical, False)
        finally:
            os.close(root)
        if found is None or not self._still_waiting(ident):
            return
        host, seen = found
        if how in (store.MOVE, store.RMDIR, store.REMOVE) and self.places.mount_point(seen):
            return  # the call fails (EBUSY): a mount point (the project itself, a staged .git) stays
        self.recorder.cancelled = lambda: not self._still_waiting(ident)
        try:
            self.recorder.changing(host, how)
        finally:
            self.recorder.cancelled = None
        known = self.writers.get(host)
        if known is None or known[-1][1][0] != pid:
            self._note_writer(host, pid)

    def _note_writer(self, host: str, pid: int) -> None:
        """One more process that changed `host`: it and its parents up to the command, read once per
        process (a pid and its start time: a pid used again is another process). The last WRITERS
        kept, in the order they came."""
        key = (pid, _started(pid))
        entries = self.writers.setdefault(host, [])
        if entries and entries[-1][1] == key:
            return
        self._sequence += 1
        entries.append((self._sequence, key))
        del entries[:-WRITERS]
        if key in self.processes:
            return
        from stockade.proxy import processes  # the first change of a run: not on the path of one that changes nothing

        parents: list[dict[str, Any]] = []
        parent = processes.status(pid)[1]
        while parent > 0 and len(parents) < processes.PARENTS:
            known = (parent, _started(parent))
            entry = self._parents.get(known)
            if entry is None:
                entry = self._parents[known] = processes.parent_entry(parent)
            if entry["pid"] <= 1:
                break  # gone, or the sandbox's first process, bwrap's: the command is its child
            parents.append(entry)
            parent = processes.status(parent)[1]  # read each time: a parent that exited has left its children to another
        self.processes[key] = processes.describe(pid, parents)

    def writer(self, path: str) -> dict[str, Any] | None:
        """The process that last changed `path` (or a path below it: a folder moved aside whole), with
        the others that changed it before (`earlier`, oldest first)."""
        entries = self.writers.get(path)
        if entries is None:
            below = path.rstrip("/") + "/"
            entries = sorted(entry for changed, found in self.writers.items() if changed.startswith(below) for entry in found)
        keys = list(dict.fromkeys(key for _sequence, key in entries))
        if not keys or keys[-1] not in self.processes:
            return None
        last = dict(self.processes[keys[-1]])
        earlier = [self.processes[key] for key in keys[:-1][-(WRITERS - 1) :] if key in self.processes]
        if earlier:
            last["earlier"] = [{"pid": other["pid"], "exe": other["exe"]} for other in earlier]
        return last

    def _unmagic(self, pid: int, inside: str) -> str:
        """_through_magic until no link into /proc is left at the front (/proc/self/root/proc/self/cwd)."""
        for _hop in range(8):
            if not inside.startswith(("/proc/", "/dev/")):
                break
            through = self._through_magic(pid, os.path.normpath(inside))
            if through == os.path.normpath(inside):
                break
            inside = through
        return inside

    def _through_magic(self, pid: int, inside: str) -> str:
        """A path through /proc's links (/proc/self/cwd/x, /proc/N/root/x, /dev/fd/3/x) as the
        sandbox names what they lead to; other paths as they are."""
        parts = inside.split("/")  # "", "proc", who, ...
        if inside.startswith("/dev/fd/"):
            parts = ["", "proc", "self", "fd", *parts[3:]]
        elif parts[:3] in (["", "dev", "stdin"], ["", "dev", "stdout"], ["", "dev", "stderr"]):
            parts = ["", "proc", "self", "fd", str(("stdin", "stdout", "stderr").index(parts[2])), *parts[3:]]
        if len(parts) < 4 or parts[1] != "proc":
            return inside
        who, rest = parts[2], parts[3:]
        if rest[:1] == ["task"] and len(rest) >= 3:
            rest = rest[2:]  # /proc/PID/task/TID/cwd: a thread's own, the same links
        if rest[:1] in (["cwd"], ["root"]):
            link, tail = rest[0], rest[1:]
        elif rest[:1] == ["fd"] and len(rest) >= 2 and rest[1].isdigit():
            link, tail = f"fd/{rest[1]}", rest[2:]
        else:
            return inside
        if who in ("self", "thread-self"):
            where = f"/proc/{pid}/{link}"  # the caller's own, through the host's /proc
        elif who.isdigit():
            where = f"/proc/{pid}/root/proc/{who}/{link}"  # another process, by its pid inside
        else:
            return inside
        try:
            fd = os.open(where, O_PATH | os.O_CLOEXEC)
        except OSError:
            return inside
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        if not target.startswith("/") or target.endswith(" (deleted)"):
            return inside
        return "/".join([target.rstrip("/"), *tail]) if tail else target

    def _host_of(self, root: int, inside: str, follow: bool) -> tuple[str, str] | None:
        """(the host's path, the sandbox's) of what `inside` names, or None when it is not the user's."""
        parts = inside.rstrip("/")
        if not parts:
            return None
        parent, _, name = parts.rpartition("/")
        if name in (".", ".."):
            parent, name, follow = parts, "", True
        if follow or not name:
            found = self._resolve(root, parts)
            if found is not None:
                return self._checked(found, "")
            dangling = self._dangling(root, parts) if name else None
            if dangling is not None:  # an open through a link to nothing makes what it names
                return self._host_of(root, dangling, False)
        found = self._resolve(root, parent or "/", directory=True)
        if found is None:
            return None
        return self._checked(found, name)

    def _canonical(self, pid: int, root: int, inside: str, follow: bool, hops: int = 0) -> str | None:
        """The path the kernel would reach from `inside`, resolved here one name at a time: a link
        whose target is in /proc (/tmp/l -> /proc/self/cwd) goes through _through_magic. None when
        a folder on the way is missing (the call fails too)."""
        parts = [part for part in inside.split("/") if part not in ("", ".")]
        done = "/"
        for index, name in enumerate(parts):
            if name == "..":
                done = os.path.dirname(done.rstrip("/")) or "/"
                continue
            last = index == len(parts) - 1
            folder = self._resolve(root, done, directory=True)
            if folder is None:
                return None
            try:
                try:
                    target = os.readlink(name, dir_fd=folder)
                except OSError as exc:
                    if exc.errno == errno.ENOENT and not last:
                        return None
                    target = None  # no link (or a name still to be made)
            finally:
                os.close(folder)
            if target is None or (last and not follow):
                done = done.rstrip("/") + "/" + name
                continue
            hops += 1
            if hops > 40:
                return None
            target = self._unmagic(pid, target)
            rest = "/".join(parts[index + 1 :])
            joined = target if target.startswith("/") else done.rstrip("/") + "/" + target
            return self._canonical(pid, root, joined + ("/" + rest if rest else ""), follow, hops)
        return done

    def _dangling(self, root: int, inside: str) -> str | None:
        """Where a chain of links from `inside` ends, as the sandbox names it, when that is absent."""
        for _hop in range(40):  # the kernel's own limit
            parent, _, name = inside.rpartition("/")
            folder = self._resolve(root, parent or "/", directory=True)
            if folder is None:
                return None
            try:
                target = os.readlink(name, dir_fd=folder)
                where = os.readlink(f"/proc/self/fd/{folder}")
            except OSError:
                return inside if inside != parent else None  # no link (more): the name to be made
            finally:
                os.close(folder)
            inside = target if target.startswith("/") else where.rstrip("/") + "/" + target
            inside = os.path.normpath(inside)
        return None

    def _resolve(self, root: int, inside: str, *, directory: bool = False) -> int | None:
        """An O_PATH fd on what `inside` names in the sandbox, links resolved as there; None if absent."""
        if self._openat2 is None:
            from stockade.bwrap.parts.netns import library_function

            self._openat2 = library_function(None, "syscall", "lizzL", "l")
        flags = O_PATH | os.O_CLOEXEC | (os.O_DIRECTORY if directory else 0)
        how = struct.pack("=QQQ", flags, 0, RESOLVE_IN_ROOT)
        relative = inside.lstrip("/") or "."
        fd = self._openat2(OPENAT2, root, os.fsencode(relative), how, len(how))
        if fd < 0:
            import _ctypes

            if _ctypes.get_errno() in (errno.EXDEV, errno.ELOOP, errno.ENAMETOOLONG):
                self.unseen += 1  # a link into /proc on the way (RESOLVE_IN_ROOT refuses those), or too long
            return None
        return int(fd)

    def _checked(self, fd: int, name: str) -> tuple[str, str] | None:
        """The host's and the sandbox's path of `fd` (then `name` in it), if it is on a writable
        mount, mapped to the host by a writable bind of the user's, and the same file there."""
        try:  # a read-only mount's bind has no host path in `places`
            folder = os.readlink(f"/proc/self/fd/{fd}")
            inside = folder.rstrip("/") + "/" + name if name else folder
            host = self.places.host_path(inside)  # `name` may be a mount of its own (a staged .git)
            if host is None:
                return None
            seen = os.fstat(fd)
            try:
                there = os.lstat(os.path.dirname(host) if name else host)
            except OSError:
                return None
            if (seen.st_dev, seen.st_ino) != (there.st_dev, there.st_ino):
                return None  # not the folder, or file, the sandbox sees there
            return host, inside
        finally:
            os.close(fd)

    def _still_waiting(self, ident: int) -> bool:
        """The call is still waiting (its process not gone, its pid not someone else's since)."""
        try:
            fcntl.ioctl(self.listener, NOTIF_ID_VALID, struct.pack("=Q", ident))
        except OSError:
            return False
        return True


def _started(pid: int) -> int:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat); -1 if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[1])
    except (OSError, IndexError, ValueError):
        return -1


def _fd(value: int) -> int:
    """A file descriptor argument: the low 32 bits, signed (AT_FDCWD is -100)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


OPENS = frozenset({"open", "openat", "creat", "openat2"})
Target = tuple[int, int, str, bool]  # (dirfd, path pointer, how, follow the last link)
DECODERS: dict[str, Callable[[tuple[int, ...]], list[Target]]] = {
    "truncate": lambda a: [(AT_FDCWD, a[0], store.TRUNCATE, True)],
    "unlink": lambda a: [(AT_FDCWD, a[0], store.REMOVE, False)],
    "rmdir": lambda a: [(AT_FDCWD, a[0], store.RMDIR, False)],
    "unlinkat": lambda a: [(_fd(a[0]), a[1], store.RMDIR if a[2] & AT_REMOVEDIR else store.REMOVE, False)],
    "rename": lambda a: [(AT_FDCWD, a[0], store.MOVE, False), (AT_FDCWD, a[1], store.REMOVE, False)],
    "renameat": lambda a: [(_fd(a[0]), a[1], store.MOVE, False), (_fd(a[2]), a[3], store.REMOVE, False)],
    "renameat2": lambda a: [
        (_fd(a[0]), a[1], store.MOVE, False),
        (_fd(a[2]), a[3], store.MOVE if a[4] & RENAME_EXCHANGE else store.REMOVE, False),
    ],
    # link's source gets a name more: kept first, so that a write through either name keeps what it was
    "link": lambda a: [(AT_FDCWD, a[0], store.META_CHANGE, False), (AT_FDCWD, a[1], store.CREATE, False)],
    "linkat": lambda a: [(_fd(a[0]), a[1], store.META_CHANGE, bool(a[4] & AT_SYMLINK_FOLLOW)), (_fd(a[2]), a[3], store.CREATE, False)],
    "symlink": lambda a: [(AT_FDCWD, a[1], store.CREATE, False)],
    "symlinkat": lambda a: [(_fd(a[1]), a[2], store.CREATE, False)],
    "mkdir": lambda a: [(AT_FDCWD, a[0], store.CREATE, False)],
    "mkdirat": lambda a: [(_fd(a[0]), a[1], store.CREATE, False)],
    "mknod": lambda a: [(AT_FDCWD, a[0], store.CREATE, False)],
    "mknodat": lambda a: [(_fd(a[0]), a[1], store.CREATE, False)],
    "chmod": lambda a: [(AT_FDCWD, a[0], store.META_CHANGE, True)],
    "chown": lambda a: [(AT_FDCWD, a[0], store.META_CHANGE, True)],
    "lchown": lambda a: [(AT_FDCWD, a[0], store.META_CHANGE, False)],
    "fchmod": lambda a: [(_fd(a[0]), 0, "fd", False)],
    "fchown": lambda a: [(_fd(a[0]), 0, "fd", False)],
    "fchmodat": lambda a: [(_fd(a[0]), a[1], store.META_CHANGE, True)],
    "fchmodat2": lambda a: [(_fd(a[0]), a[1], store.META_CHANGE, not a[3] & AT_SYMLINK_NOFOLLOW)],
    "fchownat": lambda a: [(_fd(a[0]), a[1], store.META_CHANGE, not a[4] & AT_SYMLINK_NOFOLLOW)],
}


def _open_how(flags: int) -> str | None:
    if flags & write_notify.O_TMPFILE_BIT:
        return None  # a file without a name; a later linkat names it
    writes = flags & 0o3 in (1, 2)
    if flags & 0o1000:
        return store.TRUNCATE_OPEN
    if writes:
        return store.WRITE
    if flags & 0o100:
        return store.CREATE
    return None
