"""The seccomp filter that tells stockade of each change the sandbox is about to make to a file.

A checkpoint must hold a file's content from before the run's first change to
it. So the child loads, before bwrap, a filter with a listener (seccomp user
notification): each call that may change a path (an open for writing or
truncating, unlink, rename, link, mkdir, chmod, ...) waits while stockade's
supervisor (bwrap/running/checkpointing.py) records the path, then goes on as
asked (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Opens for reading never wait: the
filter looks at their flags. Calls of another architecture pass: the floor's
filter refuses them.

The program is a few dozen instructions written here, not compiled by
libseccomp: this module is on every run's path, and loading it costs one
system call. The floor's own filter, loaded later by bwrap, still decides
what is allowed: a refusal there outranks a notification here.
"""

from __future__ import annotations

import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SECCOMP_NR = {"x86_64": 317, "aarch64": 277}
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
RET_ALLOW = 0x7FFF0000
RET_USER_NOTIF = 0x7FC00000
X32_BIT = 0x40000000
OPEN_WRITES = 0o1 | 0o2 | 0o100 | 0o1000  # O_WRONLY, O_RDWR, O_CREAT, O_TRUNC: the same on both
O_NOFOLLOW = {"x86_64": 0o400000, "aarch64": 0o100000}
O_TMPFILE_BIT = 0o20000000

# name: (number, the argument whose open flags decide, or None: always)
CALLS: dict[str, dict[str, tuple[int, int | None]]] = {
    "x86_64": {
        "open": (2, 1), "openat": (257, 2), "creat": (85, None), "openat2": (437, None), "truncate": (76, None),
        "unlink": (87, None), "unlinkat": (263, None), "rmdir": (84, None), "rename": (82, None), "renameat": (264, None),
        "renameat2": (316, None), "link": (86, None), "linkat": (265, None), "symlink": (88, None), "symlinkat": (266, None),
        "mkdir": (83, None), "mkdirat": (258, None), "mknod": (133, None), "mknodat": (259, None), "chmod": (90, None),
        "fchmod": (91, None), "fchmodat": (268, None), "fchmodat2": (452, None), "chown": (92, None), "fchown": (93, None),
        "lchown": (94, None), "fchownat": (260, None),
    },
    "aarch64": {
        "openat": (56, 2), "openat2": (437, None), "truncate": (45, None), "unlinkat": (35, None), "renameat": (38, None),
        "renameat2": (276, None), "linkat": (37, None), "symlinkat": (36, None), "mkdirat": (34, None), "mknodat": (33, None),
        "fchmod": (52, None), "fchmodat": (53, None), "fchmodat2": (452, None), "fchown": (55, None), "fchownat": (54, None),
    },
}  # fmt: skip

INSN = "=HBBI"
LD_W_ABS, ALU_AND_K, JEQ_K, JSET_K, RET_K = 0x20, 0x54, 0x15, 0x45, 0x06


def machine() -> str:
    return os.uname().machine


def program(arch: str) -> bytes:
    """The BPF program: notify on every call in CALLS, on an open only when its flags write.

    Layout: check the architecture, load the call's number (x32's bit cleared), one comparison
    per call, allow; then per open a flag test; notify last."""
    calls = CALLS[arch]
    always = [number for number, flags in calls.values() if flags is None]
    opens = [(number, flags) for number, flags in calls.values() if flags is not None]
    head = 4
    allow_at = head + len(always) + len(opens)
    notify_at = allow_at + 1 + 3 * len(opens)
    body: list[tuple[int, int, int, int]] = [
        (LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (JEQ_K, 0, allow_at - 2, AUDIT_ARCH[arch]),
        (LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (ALU_AND_K, 0, 0, ~X32_BIT & 0xFFFFFFFF),
    ]
    for number in always:
        body.append((JEQ_K, notify_at - len(body) - 1, 0, number))
    for index, (number, _argument) in enumerate(opens):
        body.append((JEQ_K, allow_at + 1 + 3 * index - len(body) - 1, 0, number))
    body.append((RET_K, 0, 0, RET_ALLOW))
    for _number, argument in opens:
        body.append((LD_W_ABS, 0, 0, 16 + 8 * argument))  # the low half of the flags argument
        body.append((JSET_K, notify_at - len(body) - 1, 0, OPEN_WRITES))
        body.append((RET_K, 0, 0, RET_ALLOW))
    body.append((RET_K, 0, 0, RET_USER_NOTIF))
    assert len(body) == notify_at + 1
    return b"".join(struct.pack(INSN, *instruction) for instruction in body)


def loader(arch: str) -> Callable[[], int]:
    """A function for the forked child that loads the program and returns the listener's fd.
    Everything it needs is made here, before the fork (the child allocates little and imports
    nothing); it raises OSError when the kernel refuses (a listener already above: a stockade
    run inside another one's sandbox, EBUSY)."""
    import _ctypes

    code = program(arch)
    char = type("c_char", (_ctypes._SimpleCData,), {"_type_": "c"})
    buffer_type = type("Program", (_ctypes.Array,), {"_type_": char, "_length_": len(code)})
    buffer = buffer_type.from_buffer_copy(code)  # type: ignore[attr-defined]
    fprog_type = type("FProg", (_ctypes.Array,), {"_type_": char, "_length_": 16})
    fprog = fprog_type.from_buffer_copy(struct.pack("=HxxxxxxQ", len(code) // 8, _ctypes.addressof(buffer)))  # type: ignore[attr-defined]
    from stockade.bwrap.parts.netns import library_function

    syscall = library_function(None, "syscall", "lllP", "l")
    number = SECCOMP_NR[arch]
    keep = (buffer, fprog)

    def load() -> int:
        import _ctypes as core

        fd = syscall(number, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, core.addressof(keep[1]))
        if fd < 0:
            err = core.get_errno()
            raise OSError(err, f"seccomp listener: {os.strerror(err)}")
        return int(fd)

    return load
