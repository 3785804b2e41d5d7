"""The sandbox's seccomp filter: which syscalls it refuses, and the BPF bwrap loads.

Default allow, refuse a short list: the kernel interfaces that reach past the
namespaces bwrap builds (vsock sockets, AF_UNIX sockets other than stream ones
unless the policy allows datagrams (host stream sockets are masked instead), io_uring, ptrace, keyrings,
mounts, new namespaces, terminal injection, module and kexec loading).
Syscalls from a non-native ABI (x32 or i386 on x86_64, arm on aarch64) kill
the process: the filter only matches native numbers, so anything else would
walk past every rule.

The rules are plain data, so `describe_rules` (explain, dry-run) needs no
libseccomp; pyseccomp (about 40 ms to import) is imported only to compile,
which `seccomp_cache` does on a cache miss.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyseccomp

LOW32 = 0xFFFF_FFFF  # int arguments: the kernel ignores the high half (ESCAPES V5)
SOCK_TYPE_MASK = 0xF  # socket type bits; SOCK_CLOEXEC and SOCK_NONBLOCK sit above

AF_UNIX = 1
AF_VSOCK = 40
SOCK_STREAM = 1
SOCK_SEQPACKET = 5
TIOCSTI = 0x5412
TIOCLINUX = 0x541C

CLONE_NEW_FLAGS = {
    "CLONE_NEWNS": 0x0002_0000,
    "CLONE_NEWCGROUP": 0x0200_0000,
    "CLONE_NEWUTS": 0x0400_0000,
    "CLONE_NEWIPC": 0x0800_0000,
    "CLONE_NEWUSER": 0x1000_0000,
    "CLONE_NEWPID": 0x2000_0000,
    "CLONE_NEWNET": 0x4000_0000,
}

# Syscalls newer than some libseccomp releases know by name. From 424 on,
# every architecture stockade supports uses one shared number.
UNIFIED_NUMBERS = {"fchmodat2": 452, "open_tree_attr": 467}
S_ISUID = 0o4000
O_CREAT = 0o100  # the same on x86_64 and aarch64 (asm-generic)
O_TMPFILE_BIT = 0o20000000  # __O_TMPFILE, without the O_DIRECTORY that O_TMPFILE adds
S_ISGID = 0o2000
UNIFIED_NUMBER_MACHINES = frozenset({"x86_64", "aarch64"})

ABI_LINE = (
    "syscalls from a non-native ABI (x32 and i386 on x86_64, 32-bit arm on aarch64): "
    "process killed with SIGSYS (the rules only match native syscall numbers)"
)


@dataclass(frozen=True)
class ArgMatch:
    """Argument `index` matches when (arg & mask) == value."""

    index: int
    value: int
    mask: int = LOW32


@dataclass(frozen=True)
class Rule:
    """Refuse `syscall` with `errno` when every match holds (always, with none)."""

    syscall: str
    matches: tuple[ArgMatch, ...] = ()
    errno: int = errno.EPERM


@dataclass(frozen=True)
class Block:
    """One thing the filter refuses: a human line and the rules that do it."""

    what: str
    why: str
    rules: tuple[Rule, ...]

    def line(self) -> str:
        names = sorted({errno.errorcode[rule.errno] for rule in self.rules})
        return f"{self.what}: {'/'.join(names)} ({self.why})"


def _always(*syscalls: str, err: int = errno.EPERM) -> tuple[Rule, ...]:
    return tuple(Rule(name, (), err) for name in syscalls)


def _socket_blocks(allow_unix: bool) -> list[Block]:
    """AF_UNIX reaches host daemons through any visible socket path (V1, V7): planning hides every
    host socket the sandbox could see (host_sockets.py), so stream sockets of the sandbox's own
    work; a datagram socket could still sendto() a host socket made after planning, by path."""
    not_stream = tuple(kind for kind in range(SOCK_TYPE_MASK + 1) if kind != SOCK_STREAM)
    blocks = []
    if not allow_unix:
        blocks.append(
            Block(
                "socket(AF_UNIX) of any type but SOCK_STREAM",
                "a datagram socket can sendto() any host socket by path, one made after planning included",
                tuple(Rule("socket", (ArgMatch(0, AF_UNIX), ArgMatch(1, kind, SOCK_TYPE_MASK))) for kind in not_stream),
            )
        )
    # A pair is connected from birth: a stream or seqpacket one can neither connect() again nor
    # sendto() another address (the kernel ignores a seqpacket's), so it reaches only its twin.
    # Rust's process spawning passes each child's pidfd over a seqpacket pair (cargo, uv).
    pair_kinds = tuple(kind for kind in not_stream if kind != SOCK_SEQPACKET)
    blocks.append(
        Block(
            "socketpair(AF_UNIX) of any type but SOCK_STREAM and SOCK_SEQPACKET",
            "a datagram pair can sendto() a host socket by path; SOCK_RAW becomes datagram too",
            tuple(Rule("socketpair", (ArgMatch(0, AF_UNIX), ArgMatch(1, kind, SOCK_TYPE_MASK))) for kind in pair_kinds),
        )
    )
    blocks.append(
        Block(
            "socket(AF_VSOCK)",
            "vsock talks to the VM host and ignores network namespaces",
            (Rule("socket", (ArgMatch(0, AF_VSOCK),)),),
        )
    )
    return blocks


def _process_blocks() -> list[Block]:
    return [
        Block(
            "io_uring_setup, io_uring_enter, io_uring_register",
            "io_uring performs socket and file operations that seccomp never sees",
            _always("io_uring_setup", "io_uring_enter", "io_uring_register"),
        ),
        Block(
            "ptrace, process_vm_readv, process_vm_writev, pidfd_getfd",
            "they read or steer another process of the sandbox, including bwrap's pid 1",
            _always("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"),
        ),
        Block("unshare, setns", "no new or foreign namespaces inside the sandbox", _always("unshare", "setns")),
        Block(
            f"clone with {', '.join(CLONE_NEW_FLAGS)}",
            "no new namespaces inside the sandbox",
            tuple(Rule("clone", (ArgMatch(0, flag, flag),)) for flag in CLONE_NEW_FLAGS.values()),
        ),
        Block(
            "clone3", "its flags sit behind a pointer seccomp cannot read; ENOSYS makes libc fall back to clone", _always("clone3", err=errno.ENOSYS)
        ),
        Block(
            "ioctl TIOCSTI, TIOCLINUX",
            "they push keystrokes into the terminal; matched on the low 32 bits, as the kernel reads them",
            (Rule("ioctl", (ArgMatch(1, TIOCSTI),)), Rule("ioctl", (ArgMatch(1, TIOCLINUX),))),
        ),
    ]


def _kernel_blocks() -> list[Block]:
    return [
        Block("bpf", "eBPF is kernel attack surface", _always("bpf")),
        Block("perf_event_open", "kernel attack surface and a side channel", _always("perf_event_open")),
        Block("userfaultfd", "a classic tool for winning kernel races", _always("userfaultfd")),
        Block("keyctl, add_key, request_key", "kernel keyrings are not namespaced", _always("keyctl", "add_key", "request_key")),
        Block(
            "kexec_load, kexec_file_load, init_module, finit_module, delete_module",
            "no new kernel code",
            _always("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"),
        ),
        Block(
            "mount, umount2, pivot_root, chroot, swapon, swapoff",
            "the filesystem view is fixed when the sandbox starts",
            _always("mount", "umount2", "pivot_root", "chroot", "swapon", "swapoff"),
        ),
        Block(
            "open_tree, open_tree_attr, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr",
            "the new mount API changes the filesystem view too",
            _always("open_tree", "open_tree_attr", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"),
        ),
        Block("open_by_handle_at", "it opens files by handle, around the mount view", _always("open_by_handle_at")),
        Block("acct", "process accounting writes to a file outside the sandbox's control", _always("acct")),
        Block(
            "chmod, fchmod, fchmodat, fchmodat2 setting setuid or setgid",
            "run as root, a setuid file made in a writable place would be a setuid-root file on the host",
            _setid_rules(),
        ),
        Block(
            "open, openat, creat, mknod, mknodat creating a file with setuid or setgid",
            "the mode a new file is created with sets the same bits, which the umask leaves",
            _setid_creation_rules(),
        ),
        Block(
            "openat2",
            "its mode sits behind a pointer seccomp cannot read; ENOSYS makes callers fall back to openat",
            _always("openat2", err=errno.ENOSYS),
        ),
    ]


def _setid_rules() -> tuple[Rule, ...]:
    mode_arg = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2}
    return tuple(Rule(name, (ArgMatch(index, bit, bit),)) for name, index in mode_arg.items() for bit in (S_ISUID, S_ISGID))


def _setid_creation_rules() -> tuple[Rule, ...]:
    """A creating open (O_CREAT, or O_TMPFILE then linked) or a mknod whose mode has either bit."""
    rules: list[Rule] = []
    for bit in (S_ISUID, S_ISGID):
        for creating in (O_CREAT, O_TMPFILE_BIT):
            rules.append(Rule("open", (ArgMatch(1, creating, creating), ArgMatch(2, bit, bit))))
            rules.append(Rule("openat", (ArgMatch(2, creating, creating), ArgMatch(3, bit, bit))))
        rules += [Rule("creat", (ArgMatch(1, bit, bit),)), Rule("mknod", (ArgMatch(1, bit, bit),)), Rule("mknodat", (ArgMatch(2, bit, bit),))]
    return tuple(rules)


def rule_blocks(allow_unix: bool) -> tuple[Block, ...]:
    """Everything the filter refuses, in the order `describe_rules` shows it."""
    return (*_socket_blocks(allow_unix), *_process_blocks(), *_kernel_blocks())


def describe_rules(allow_unix: bool) -> list[str]:
    """One line per refused thing, for explain and dry-run; needs no libseccomp."""
    return [block.line() for block in rule_blocks(allow_unix)] + [ABI_LINE]


def build_bpf(allow_unix: bool, *, deny_errno: int = errno.EPERM) -> bytes:
    """Compile the filter to the BPF program that `bwrap --seccomp FD` reads.

    `deny_errno` replaces EPERM in every rule; tests use an errno no kernel
    path returns to tell the filter's answer from the kernel's own.
    """
    program = _export(_compile(rule_blocks(allow_unix), deny_errno))
    if not program or len(program) % 8:
        raise RuntimeError(f"libseccomp exported a malformed filter ({len(program)} bytes)")
    return program


def _compile(blocks: tuple[Block, ...], deny_errno: int) -> pyseccomp.SyscallFilter:
    import pyseccomp

    flt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)  # holds the native architecture only
    flt.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    for block in blocks:
        for rule in block.rules:
            number = _syscall_number(rule.syscall)
            if number is None:
                continue  # this libseccomp and this architecture do not know it
            err = deny_errno if rule.errno == errno.EPERM else rule.errno
            args = [pyseccomp.Arg(m.index, pyseccomp.MASKED_EQ, m.mask, m.value) for m in rule.matches]
            flt.add_rule(pyseccomp.ERRNO(err), number, *args)
    return flt


def _syscall_number(name: str) -> int | None:
    """The native number, or None: unknown names are skipped, never fatal."""
    import pyseccomp

    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    if number >= 0:
        return number
    if os.uname().machine in UNIFIED_NUMBER_MACHINES:
        return UNIFIED_NUMBERS.get(name)
    return None


def _export(flt: pyseccomp.SyscallFilter) -> bytes:
    """export_bpf writes to a file descriptor: use an anonymous memory file."""
    with open(os.memfd_create("stockade-seccomp", os.MFD_CLOEXEC), "w+b", buffering=0) as out:
        flt.export_bpf(out)
        out.seek(0)
        return out.read()
