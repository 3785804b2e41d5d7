"""bwrap options as small typed pieces; `to_args()` yields the exact words.

The words travel NUL-separated through `--args FD`, so nothing a policy or
path contains can become an option, and `ps` shows none of it. Plain classes
with `__slots__` (as bubblejail does), not dataclasses: this module is on the
hot path of every run, and ten dataclasses cost ~5 ms to create at import.
"""

from __future__ import annotations

TYPE_CHECKING = False  # collections.abc would cost the hot path its import
if TYPE_CHECKING:
    from collections.abc import Iterator


class Piece:
    """One bwrap option; subclasses say which words it becomes."""

    __slots__ = ()

    def to_args(self) -> Iterator[str]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({' '.join(self.to_args())})"


class Flag(Piece):
    __slots__ = ("word",)

    def __init__(self, word: str) -> None:
        self.word = word  # e.g. "--unshare-all"

    def to_args(self) -> Iterator[str]:
        yield self.word


class Bind(Piece):
    """Writable bind of a host path onto the same path."""

    __slots__ = ("path",)
    word = "--bind"

    def __init__(self, path: str) -> None:
        self.path = path

    def to_args(self) -> Iterator[str]:
        yield from (self.word, self.path, self.path)


class ReadOnlyBind(Bind):
    __slots__ = ()
    word = "--ro-bind"


class ReadOnlyBindFrom(Piece):
    """Read-only bind of `source` onto `dest` (a mask file, for example)."""

    __slots__ = ("source", "dest")

    def __init__(self, source: str, dest: str) -> None:
        self.source = source
        self.dest = dest

    def to_args(self) -> Iterator[str]:
        yield from ("--ro-bind", self.source, self.dest)


class BindFrom(ReadOnlyBindFrom):
    """Writable bind of `source` onto `dest` (an agent session's own /tmp)."""

    __slots__ = ()

    def to_args(self) -> Iterator[str]:
        yield from ("--bind", self.source, self.dest)


class Tmpfs(Piece):
    """A fresh tmpfs; read-only and mode 0000 it is a mask."""

    __slots__ = ("path", "size", "read_only", "mode")

    def __init__(self, path: str, size: int | None = None, read_only: bool = False, mode: str | None = None) -> None:
        self.path = path
        self.size = size
        self.read_only = read_only
        self.mode = mode

    def to_args(self) -> Iterator[str]:
        if self.mode:
            yield from ("--perms", self.mode)
        if self.size:
            yield from ("--size", str(self.size))
        yield from ("--tmpfs", self.path)
        if self.read_only:
            yield from ("--remount-ro", self.path)


class RemountReadOnly(Piece):
    """The mount at `path` made read-only, after the mounts inside it were made (a hidden folder
    holding a writable one: bwrap makes its mount point in the tmpfs first, mounts.py)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def to_args(self) -> Iterator[str]:
        yield from ("--remount-ro", self.path)


class Dev(Piece):
    """bwrap's own /dev, read-only: --dev makes it a tmpfs that takes no size (half the machine's
    memory), so a writable one would be scratch space around tmp_size (ESCAPES 70). The devices
    are mounts of their own and stay usable; /dev/shm gets its sized tmpfs after this."""

    __slots__ = ("path", "devices")

    def __init__(self, path: str = "/dev", devices: tuple[str, ...] = ()) -> None:
        self.path = path
        self.devices = devices  # host device nodes bound in before it turns read-only (bwrap/parts/devices.py)

    def to_args(self) -> Iterator[str]:
        yield from ("--dev", self.path)
        for device in self.devices:
            yield from ("--dev-bind", device, device)
        yield from ("--remount-ro", self.path)


# What of /proc a process run as root could write to change the host, read-only inside (as runc and
# Docker keep them): the kernel's settings, sysrq, and the files of filesystems, devices and drivers
# (/proc/scsi/scsi detaches a disk, /proc/acpi/wakeup arms devices; neither checks a capability).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "fs", "acpi", "scsi", "driver", "asound", "bus", "irq")


class Proc(Piece):
    """bwrap's own /proc, with what could change the host read-only (ESCAPES 95).

    bwrap covers /proc/sys only when it could write that folder, and no one can (it is 0555): a
    sandbox run as root could set the host's sysctls (kernel.core_pattern runs a program as root
    at the next crash of anything) and its network namespace's. Each of PROC_READ_ONLY is bound
    read-only from the host's /proc (what /proc/sys shows depends on the reader's namespaces, not
    on the mount), where the kernel has it (`-try`: planning never reads /proc)."""

    __slots__ = ("path",)

    def __init__(self, path: str = "/proc") -> None:
        self.path = path

    def to_args(self) -> Iterator[str]:
        yield from ("--proc", self.path)
        for name in PROC_READ_ONLY:
            yield from ("--ro-bind-try", f"/proc/{name}", f"{self.path}/{name}")


class Chdir(Piece):
    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def to_args(self) -> Iterator[str]:
        yield from ("--chdir", self.path)


class Symlink(Piece):
    """A symlink bwrap makes inside the sandbox (on one of its own tmpfs mounts, never the host)."""

    __slots__ = ("target", "path")

    def __init__(self, target: str, path: str) -> None:
        self.target = target
        self.path = path

    def to_args(self) -> Iterator[str]:
        yield from ("--symlink", self.target, self.path)


class SetEnv(Piece):
    """One variable of the sandbox's environment; bwrap itself starts with none (see execute)."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value

    def to_args(self) -> Iterator[str]:
        yield from ("--setenv", self.name, self.value)


class FdOption(Piece):
    """An option that takes a file descriptor number (--seccomp, --info-fd)."""

    __slots__ = ("word", "fd")

    def __init__(self, word: str, fd: int) -> None:
        self.word = word
        self.fd = fd

    def to_args(self) -> Iterator[str]:
        yield from (self.word, str(self.fd))


class DataBind(Piece):
    """A private copy, at `dest`, of what file descriptor `fd` holds: writable (--bind-data, gone
    with the run) or read-only (--ro-bind-data)."""

    __slots__ = ("fd", "dest", "writable")

    def __init__(self, fd: int, dest: str, writable: bool = True) -> None:
        self.fd = fd
        self.dest = dest
        self.writable = writable

    def to_args(self) -> Iterator[str]:
        yield from ("--bind-data" if self.writable else "--ro-bind-data", str(self.fd), self.dest)


def words(pieces: list[Piece]) -> list[str]:
    return [word for piece in pieces for word in piece.to_args()]


def encode(pieces: list[Piece]) -> bytes:
    """NUL-separated, as `bwrap --args FD` reads them."""
    out = bytearray()
    for word in words(pieces):
        if "\0" in word:
            raise ValueError(f"bwrap argument contains a NUL byte: {word!r}")
        out += word.encode("utf-8", "surrogateescape") + b"\0"
    return bytes(out)
