"""`stockade run --trace`: strace, outside the sandbox, records the file syscalls that failed in it.

strace runs bwrap as its child, on the host, as the user: it follows every
process of the sandbox (`-f`), and stops them only at the file syscalls listed
in TRACED (`--seccomp-bpf`: a filter of strace's own sends just those to it),
and writes only the failed ones (`-Z`). Its output goes to a FIFO in a private
folder of the host, read by a thread into a bounded list while the run lasts,
so a command that fails millions of opens costs memory for MAX_LINES only.

Why this cannot weaken the sandbox: strace is outside every namespace bwrap
makes (the sandbox cannot see or signal it, and the seccomp filter refuses
ptrace inside); the FIFO's folder is on the host and closed to others; what
the sandbox can choose is only the text of its own syscalls, which
denials.py parses as untrusted. strace passes bwrap's exit status through
(and dies of the same signal), so exit codes are as without it. If strace
ends early, the syscalls its filter sent to it fail with ENOSYS: closed, not open.

The costs and what it misses are in docs/file-denials.md.
"""

from __future__ import annotations

import os

from stockade.core.errors import SandboxSetupError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# The syscalls that take a path and can be refused by a mount or a permission. Left out: the
# stat family (Python and libc stat an open fd through newfstatat, which would stop every open
# twice) and fd-only calls (a refusal happens when the path is opened, which is traced).
TRACED = (
    "open", "openat", "creat", "truncate", "mkdir", "mkdirat", "mknod", "mknodat", "unlink", "unlinkat", "rmdir",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmodat", "chown",
    "lchown", "fchownat", "utimes", "utimensat", "execve", "execveat", "access", "faccessat", "faccessat2",
    "setxattr", "lsetxattr", "removexattr", "lremovexattr",
)  # fmt: skip
SEARCH_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # where strace is looked for: the host's, not the caller's PATH
MAX_LINES = 20_000  # lines kept; past it only counted
MAX_LINE = 16_384  # a longer line is cut (-s 4096 keeps each path within PATH_MAX)
INSTALL_HINT = "--trace needs strace, which is not installed: apt-get install strace (or dnf/pacman install strace)"


def find_strace() -> str:
    for folder in SEARCH_PATH.split(":"):
        candidate = os.path.join(folder, "strace")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SandboxSetupError(INSTALL_HINT)


def strace_argv(strace: str, output: str, argv: Sequence[str]) -> list[str]:
    """strace in front of bwrap's argv, writing the failed traced syscalls of every process to `output`."""
    return [
        strace, "-f", "--seccomp-bpf", "-qq", "-Z", "-x", "-s", "4096", "-e", "signal=none",
        "-e", "trace=" + ",".join(TRACED), "-o", output, "--", *argv,
    ]  # fmt: skip


class Tracer:
    """The FIFO strace writes into and the thread that reads it; `lines` once `finish` returned."""

    def __init__(self) -> None:
        import tempfile
        import threading

        self.strace = find_strace()
        self.folder = tempfile.mkdtemp(prefix="stockade-trace-")  # 0700, on the host
        self.fifo = os.path.join(self.folder, "strace")
        os.mkfifo(self.fifo, 0o600)
        # Read and write: opening never blocks, and no EOF comes before `finish` says so.
        self._fd = os.open(self.fifo, os.O_RDWR | os.O_CLOEXEC)
        self.lines: list[str] = []
        self.dropped = 0
        self._thread = threading.Thread(target=self._read, name="stockade-trace", daemon=True)
        self._thread.start()

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return strace_argv(self.strace, self.fifo, argv)

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                return
            pending += chunk
            *whole, pending = pending.split(b"\n")
            for raw in whole:
                if raw == b"\0stockade-trace-end":
                    return
                self._keep(raw)
            if len(pending) > MAX_LINE:
                self._keep(pending[:MAX_LINE])
                pending = b""

    def _keep(self, raw: bytes) -> None:
        if len(self.lines) < MAX_LINES:
            self.lines.append(raw[:MAX_LINE].decode("utf-8", "replace"))
        else:
            self.dropped += 1

    def finish(self) -> list[str]:
        """After strace ended (everything it wrote is in the FIFO before this end mark)."""
        try:
            os.write(self._fd, b"\n\0stockade-trace-end\n")
            self._thread.join(timeout=30)
        finally:
            self.close()
        return self.lines

    def close(self) -> None:
        for action in (lambda: os.close(self._fd), lambda: os.unlink(self.fifo), lambda: os.rmdir(self.folder)):
            try:
                action()
            except OSError:
                pass
