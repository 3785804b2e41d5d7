"""The compiled seccomp filter, cached on disk: the hot path never imports pyseccomp.

`stockade run` calls `open_filter` and hands the fd to `bwrap --seccomp`.
A warm call costs a few stat/open/read calls. Only a miss imports
`stockade.bwrap.parts.seccomp` (and with it pyseccomp, about 40 ms) to compile.

The file name is a digest of everything the BPF depends on: the rules
(RULES_VERSION), allow_unix, the machine architecture and the libseccomp
version. A file that is short, malformed, not ours, or writable by anybody
else is never loaded: the filter is compiled again and the file replaced.
"""

from __future__ import annotations

import os
import stat
import struct

from stockade.bwrap.parts.folders import sha256  # CPython's own: hashlib would load OpenSSL first
from stockade.core.errors import SandboxSetupError

# Bump whenever seccomp.py changes what the filter does: cached BPF from an
# older rule set must never be loaded. tests/bwrap/parts/test_seccomp.py records
# the rule fingerprint of each version and fails when they drift apart.
RULES_VERSION = 6

SOCK_FILTER = "=HBBI"  # struct sock_filter: code, jt, jf, k in native byte order
INSN_SIZE = struct.calcsize(SOCK_FILTER)
MAX_INSNS = 4096  # BPF_MAXINSNS: the kernel refuses longer programs
BPF_JMP = 0x05  # instruction classes and the one unconditional jump
BPF_RET = 0x06
BPF_JA = 0x00


def libseccomp_version() -> str:
    """The runtime libseccomp's version, through dlopen (well under 1 ms, but ctypes costs
    a few to import: the plan cache keeps this call off a cached run)."""
    import ctypes

    class _Version(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]

    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError as exc:
        raise SandboxSetupError("libseccomp.so.2 not found: install it (sudo apt-get install libseccomp2)") from exc
    lib.seccomp_version.restype = ctypes.POINTER(_Version)
    version = lib.seccomp_version().contents
    return f"{version.major}.{version.minor}.{version.micro}"


def cache_key(allow_unix: bool) -> str:
    """sha256 over everything the compiled program depends on."""
    material = "\0".join(
        (
            "stockade-seccomp",
            str(RULES_VERSION),
            "allow_unix" if allow_unix else "no_unix",
            os.uname().machine,
            libseccomp_version(),
        )
    )
    return sha256(material.encode()).hexdigest()


def cache_path(cache_dir: str | os.PathLike[str], allow_unix: bool) -> str:
    return os.path.join(cache_dir, f"seccomp-{cache_key(allow_unix)}.bpf")


def open_known(path: str) -> int | None:
    """A cached filter whose file name the plan cache already knows; None sends the caller to open_filter."""
    if not _is_private_dir(os.path.dirname(path)):
        return None
    return _open_cached(path)


def open_filter(cache_dir: str | os.PathLike[str], allow_unix: bool) -> int:
    """A read-only fd at offset 0 on the BPF program, compiled only on a miss.

    The fd is not inheritable (it must not leak into the sandbox, V2): pass
    it on with `pass_fds` or `os.set_inheritable`. A cache that cannot be
    written only costs a compile next time; a filter that cannot be
    compiled raises SandboxSetupError.
    """
    path = cache_path(cache_dir, allow_unix)
    if _is_private_dir(cache_dir):
        fd = _open_cached(path)
        if fd is not None:
            return fd
    program = _compile(allow_unix)
    _store(cache_dir, path, program)
    return _anonymous_fd(program)


def _compile(allow_unix: bool) -> bytes:
    """The cache miss: the only place that imports the compiler and pyseccomp."""
    try:
        from stockade.bwrap.parts.seccomp import build_bpf

        program = build_bpf(allow_unix)
    except ImportError as exc:
        raise SandboxSetupError(f"cannot compile the seccomp filter: {exc}; install pyseccomp") from exc
    except (OSError, RuntimeError) as exc:
        raise SandboxSetupError(f"libseccomp could not compile the seccomp filter: {exc}") from exc
    if not looks_like_filter(program):
        raise SandboxSetupError(f"libseccomp produced an unusable seccomp filter ({len(program)} bytes)")
    return program


def looks_like_filter(program: bytes) -> bool:
    """Whole instructions within the kernel's limit, every jump landing inside, a ret last.

    Catches empty, short and truncated files, which would otherwise make
    every run fail (the kernel refuses them) until somebody deleted the file.
    """
    count, rest = divmod(len(program), INSN_SIZE)
    if rest or not 0 < count <= MAX_INSNS:
        return False
    instructions = list(struct.iter_unpack(SOCK_FILTER, program))
    for pc, (code, jump_true, jump_false, k) in enumerate(instructions):
        if code & 0x07 == BPF_JMP:
            farthest = k if code & 0xF0 == BPF_JA else max(jump_true, jump_false)
            if pc + 1 + farthest >= count:
                return False
    return instructions[-1][0] & 0x07 == BPF_RET


def _is_private_dir(cache_dir: str | os.PathLike[str]) -> bool:
    """Only a directory of ours that nobody else can write may hold trusted files."""
    try:
        info = os.stat(cache_dir)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _open_cached(path: str) -> int | None:
    """The cached program as a read-only fd, or None if missing or not trustworthy."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _trusted_file(fd):
            os.set_blocking(fd, True)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _trusted_file(fd: int) -> bool:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return False
    if info.st_size > MAX_INSNS * INSN_SIZE:
        return False
    return looks_like_filter(os.pread(fd, info.st_size, 0))


def _store(cache_dir: str | os.PathLike[str], path: str, program: bytes) -> None:
    """Write atomically (temp file, fsync, rename), mode 0400; best effort."""
    import tempfile

    try:
        _make_private_dir(cache_dir)
        fd, temp = tempfile.mkstemp(prefix=".seccomp-", suffix=".tmp", dir=cache_dir)
    except OSError:
        return  # no cache this time; the next run compiles again
    try:
        with open(fd, "wb") as out:
            out.write(program)
            out.flush()
            os.fchmod(out.fileno(), 0o400)
            os.fsync(out.fileno())
        os.replace(temp, path)
    except OSError:
        _unlink_quietly(temp)


def _make_private_dir(cache_dir: str | os.PathLike[str]) -> None:
    """Create it 0700, or tighten ours; refuse one that is not ours."""
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    info = os.stat(cache_dir)
    if info.st_uid != os.geteuid():
        raise PermissionError(f"{cache_dir} belongs to uid {info.st_uid}")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(cache_dir, 0o700)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _anonymous_fd(program: bytes) -> int:
    """A sealed memory file holding `program`, reopened read-only."""
    import fcntl

    fd = os.memfd_create("stockade-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with open(fd, "wb", closefd=False) as out:
            out.write(program)
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
