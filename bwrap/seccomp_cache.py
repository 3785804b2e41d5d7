"""The compiled seccomp filter, cached on disk: the hot path never imports pyseccomp.

`stockade run` calls `open_filter` and hands the fd to `bwrap --seccomp`.
A warm call costs a few stat/open/read calls. Only a miss imports
`stockade.bwrap.seccomp` (and with it pyseccomp, about 40 ms) to compile.

The file name is a digest of everything the BPF depends on: the rules
(RULES_VERSION), allow_unix, the machine architecture and the libseccomp
version. A file that is short, malformed, not ours, or writable by anybody
else is never loaded: the filter is compiled again and the file replaced.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import stat
import sys
from pathlib import Path

# Bump whenever seccomp.py changes what the filter does: cached BPF from an
# older rule set must never be loaded. tests/bwrap/test_seccomp.py records
# the rule fingerprint of each version and fails when they drift apart.
RULES_VERSION = 1

INSN_SIZE = 8  # struct sock_filter
MAX_INSNS = 4096  # BPF_MAXINSNS: the kernel refuses longer programs
BPF_LD_W_ABS = 0x20
BPF_RET = 0x06
SECCOMP_DATA_ARCH = 4  # offsetof(struct seccomp_data, arch)


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]


def libseccomp_version() -> str:
    """The runtime libseccomp's version, through dlopen (well under 1 ms)."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError as exc:
        raise RuntimeError("libseccomp.so.2 not found: install libseccomp2") from exc
    lib.seccomp_version.restype = ctypes.POINTER(_Version)
    version = lib.seccomp_version().contents
    return f"{version.major}.{version.minor}.{version.micro}"


def cache_key(allow_unix: bool) -> str:
    """sha256 over everything the compiled program depends on."""
    material = "\0".join((
        "stockade-seccomp",
        str(RULES_VERSION),
        "allow_unix" if allow_unix else "no_unix",
        os.uname().machine,
        libseccomp_version(),
    ))
    return hashlib.sha256(material.encode()).hexdigest()


def cache_path(cache_dir: Path, allow_unix: bool) -> Path:
    return cache_dir / f"seccomp-{cache_key(allow_unix)}.bpf"


def open_filter(cache_dir: Path, allow_unix: bool) -> int:
    """A read-only fd at offset 0 on the BPF program, compiled only on a miss.

    The fd is not inheritable (it must not leak into the sandbox, V2): pass
    it on with `pass_fds` or `os.set_inheritable`. Errors from storing the
    cache are swallowed; a failure to compile raises RuntimeError or OSError.
    """
    path = cache_path(cache_dir, allow_unix)
    if _is_private_dir(cache_dir):
        fd = _open_cached(path)
        if fd is not None:
            return fd
    from stockade.bwrap.seccomp import build_bpf

    program = build_bpf(allow_unix)
    if not looks_like_filter(program):
        raise RuntimeError(f"libseccomp produced an unusable filter ({len(program)} bytes)")
    _store(cache_dir, path, program)
    return _anonymous_fd(program)


def looks_like_filter(program: bytes) -> bool:
    """Whole instructions, within the kernel's limit, loading the arch first and ending in ret.

    Catches empty, short and truncated files; a file that passes and is
    still wrong is refused by the kernel, so bwrap fails closed.
    """
    if not program or len(program) % INSN_SIZE or len(program) > MAX_INSNS * INSN_SIZE:
        return False
    first_code = int.from_bytes(program[0:2], sys.byteorder)
    first_k = int.from_bytes(program[4:8], sys.byteorder)
    last_code = int.from_bytes(program[-INSN_SIZE:-INSN_SIZE + 2], sys.byteorder)
    return first_code == BPF_LD_W_ABS and first_k == SECCOMP_DATA_ARCH and last_code & 0x07 == BPF_RET


def _is_private_dir(cache_dir: Path) -> bool:
    """Only a directory of ours that nobody else can write may hold trusted files."""
    try:
        info = os.stat(cache_dir)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _open_cached(path: Path) -> int | None:
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


def _store(cache_dir: Path, path: Path, program: bytes) -> None:
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


def _make_private_dir(cache_dir: Path) -> None:
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
        os.write(fd, program)
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
