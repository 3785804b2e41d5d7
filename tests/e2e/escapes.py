"""Helpers for the escape suite (ESCAPES.md): probes that run inside, canaries that live outside.

Probes run under Debian's /usr/bin/python3 inside the sandbox (the test
venv's interpreter may live where an unprivileged user cannot read) and print
one line `PROBE <json>`. Syscall probes follow bubblewrap's try-syscall idea:
arguments are deliberately bad, so a call that reaches the kernel fails
harmlessly with EFAULT, EBADF or EINVAL, while our seccomp filter answers
EPERM (ENOSYS for clone3) before the kernel looks at anything.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from tests.e2e.boxes import Box

IS_ROOT = os.geteuid() == 0
PY = "/usr/bin/python3"  # Debian's python, readable by every uid
MACHINE = platform.machine()
q = shlex.quote

# Native syscall numbers for the probes (x86_64 and aarch64 share every number from 424 on).
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "setns": 308,
        "unshare": 272,
        "clone": 56,
        "clone3": 435,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "pidfd_getfd": 438,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "acct": 163,
        "swapon": 167,
        "swapoff": 168,
        "open_by_handle_at": 304,
        "socket": 41,
        "socketpair": 53,
        "ioctl": 16,
        "getpid": 39,
        "statfs": 137,
        "fstatfs": 138,
        "dup3": 292,
    },
    "aarch64": {
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "setns": 268,
        "unshare": 97,
        "clone": 220,
        "clone3": 435,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "pidfd_getfd": 438,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "acct": 89,
        "swapon": 224,
        "swapoff": 225,
        "open_by_handle_at": 265,
        "socket": 198,
        "socketpair": 199,
        "ioctl": 29,
        "getpid": 172,
        "statfs": 43,
        "fstatfs": 44,
        "dup3": 24,
    },
}
NR = SYSCALLS.get(MACHINE, {})
BAD = 16  # a pointer into the never-mapped first page: EFAULT if the kernel dereferences it
FILTER_ERRNOS = frozenset({errno.EPERM, errno.ENOSYS})  # what our filter answers
KERNEL_ERRNOS = frozenset({errno.EFAULT, errno.EBADF, errno.EINVAL, errno.ESRCH, errno.EOPNOTSUPP, errno.ENOTTY})

_SYSCALL_PROBE = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, nr, args in CASES:
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a & (2**64 - 1)) for a in args])
    out[name] = ctypes.get_errno() if result < 0 else 0
print("PROBE " + json.dumps(out), flush=True)
"""


def syscall_probe_code(cases: Iterable[tuple[str, str, tuple[int, ...]]]) -> str:
    """Python source that tries each (case id, syscall name, args) and prints {id: errno}."""
    table = [(case_id, NR[name], list(args)) for case_id, name, args in cases]
    return f"CASES = {json.dumps(table)}\n{_SYSCALL_PROBE}"


def probe(box: Box, code: str, **kwargs: object) -> tuple[dict, subprocess.CompletedProcess[str]]:
    """Run python `code` inside the sandbox; return its `PROBE {...}` line as a dict."""
    result = box.run(argv=[PY, "-c", code], **kwargs)  # type: ignore[arg-type]
    return parse_probe(result), result


def parse_probe(result: subprocess.CompletedProcess[str]) -> dict:
    for line in result.stdout.splitlines():
        if line.startswith("PROBE "):
            return json.loads(line[len("PROBE ") :])
    raise AssertionError(f"no PROBE line (exit {result.returncode}): stdout={result.stdout!r} stderr={result.stderr!r}")


def errname(number: int) -> str:
    return "0" if number == 0 else errno.errorcode.get(number, str(number))


def named(results: dict[str, int]) -> dict[str, str]:
    return {key: errname(value) for key, value in results.items()}


def pids_with(token: str) -> list[int]:
    """Host processes whose command line contains `token` (this test process excluded)."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ")
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry))
    return found


def wait_gone(token: str, seconds: float) -> list[int]:
    """Poll until no process carries `token`; return what is left after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        left = pids_with(token)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def process_state(pid: int) -> str | None:
    """The one-letter state of a live process (R, S, T, Z...), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


class Listener:
    """A host-side canary server: records every connection and every byte it receives."""

    def __init__(self, family: int, address: object, greeting: bytes = b"HOSTHELLO") -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.address = self.sock.getsockname()
        self.greeting = greeting
        self.connections = 0
        self.received = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(1)
                try:
                    conn.sendall(self.greeting)
                    while chunk := conn.recv(4096):
                        self.received += chunk
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def unix_listener(path: Path) -> Listener:
    path.unlink(missing_ok=True)
    return Listener(socket.AF_UNIX, str(path))


def tcp_listener() -> Listener:
    return Listener(socket.AF_INET, ("127.0.0.1", 0))


def start_canary(token: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A host process of the test's own uid: `sh -c 'sleep 600; :' <token> ...` (argv stays visible)."""
    process = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 600; :", token, "--token", "CANARY6"],
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 5
    while process.pid not in pids_with(token) and time.monotonic() < deadline:  # wait for the exec
        time.sleep(0.01)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
        except ProcessLookupError:
            pass
    process.wait(timeout=5)


def tree(folder: Path) -> list[str]:
    """Every path below `folder`, relative, sorted: a snapshot to compare before and after."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def one_line(stderr: str) -> bool:
    return len([line for line in stderr.splitlines() if line.strip()]) == 1


def policy_text(
    *,
    allow_write: Iterable[str | Path] = (),
    deny_read: Iterable[str | Path] = (),
    deny_write: Iterable[str | Path] = (),
    extra: str = "",
) -> str:
    """A policy extending the default one; absolute paths only (a box's policy file is not in the project)."""

    def items(values: Iterable[str | Path]) -> str:
        return ", ".join(json.dumps(str(v)) for v in values)

    lines = ['extends = ["default"]', "[filesystem]"]
    for key, values in (("allow_write", allow_write), ("deny_read", deny_read), ("deny_write", deny_write)):
        values = list(values)
        if values:
            lines.append(f"{key} = [{items(values)}]")
    return "\n".join(lines) + "\n" + extra
