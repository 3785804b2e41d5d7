"""`stockade run --max-output BYTES`: forward the first BYTES of a command's output, then one line.

A coding agent buffers whatever a command prints; `yes | head -c 20G` would
fill its memory (ESCAPES 73). Here the sandbox's stdout and stderr become
pipes that a thread drains while the command runs: the first BYTES (both
streams together) go through unchanged, the rest is discarded as it arrives
(spliced to /dev/null where the kernel allows), so stockade's memory stays
flat and the command is never blocked or killed: its exit status is its own,
unlike `| head`. stockade's own end-of-run lines are held until the
command's output is drained and then printed whole, after the note.
"""

from __future__ import annotations

import io
import os
import select
import sys
import threading
from types import TracebackType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

CHUNK = 1 << 16
DRAIN_WAIT = 5.0  # seconds to wait for the last output after the sandbox is gone


class OutputLimit:
    """Context manager: while inside, fds 1 and 2 are pipes pumped to the real ones with a budget."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("the output limit cannot be negative")
        self.limit = limit
        self.forwarded = 0
        self.discarded = 0
        self._saved: tuple[int, int] = (-1, -1)
        self._readers: list[int] = []
        self._held = io.StringIO()
        self._stderr: TextIO = sys.stderr
        self._thread: threading.Thread | None = None
        self._null = -1

    def __enter__(self) -> OutputLimit:
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))  # not inheritable: only stockade writes to them
        for target in (1, 2):
            read_end, write_end = os.pipe()
            os.dup2(write_end, target)  # inheritable: bwrap and the sandbox write here
            os.close(write_end)
            self._readers.append(read_end)
        try:
            self._null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            self._null = -1
        self._stderr = sys.stderr
        sys.stderr = self._held  # stockade's own lines wait until the output is drained
        self._thread = threading.Thread(target=self._pump, name="stockade-output", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        out, err = self._saved
        os.dup2(out, 1)  # this process lets go of the pipes' write ends; the sandbox is gone
        os.dup2(err, 2)
        if self._thread is not None:
            self._thread.join(DRAIN_WAIT)
        sys.stderr = self._stderr
        if self.discarded:
            print(self.note(), file=sys.stderr)
        held = self._held.getvalue()
        if held:
            sys.stderr.write(held)
        sys.stderr.flush()
        for fd in (out, err, self._null):
            if fd >= 0:
                os.close(fd)
        if self._thread is None or not self._thread.is_alive():
            for fd in self._readers:
                os.close(fd)

    def note(self) -> str:
        return (
            f"stockade: output cut after {self.forwarded} bytes; {self.discarded} more bytes were discarded "
            f"(--max-output {self.limit}); the command ran to the end and its exit status is its own"
        )

    def _pump(self) -> None:
        targets = dict(zip(self._readers, self._saved, strict=True))
        while targets:
            try:
                ready, _, _ = select.select(list(targets), [], [])
            except InterruptedError:  # pragma: no cover - PEP 475 retries select itself
                continue
            for fd in ready:
                moved = self._forward(fd, targets[fd]) if self.forwarded < self.limit else self._discard(fd)
                if moved == 0:
                    del targets[fd]

    def _forward(self, fd: int, target: int) -> int:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return 0
        keep = chunk[: self.limit - self.forwarded]
        self.forwarded += len(keep)
        self.discarded += len(chunk) - len(keep)
        try:
            view = memoryview(keep)
            while view:
                view = view[os.write(target, view) :]
        except OSError:  # the reader went away: keep draining so the command is never blocked
            pass
        return len(chunk)

    def _discard(self, fd: int) -> int:
        """Throw away what is waiting, without copying it through Python when the kernel can."""
        if self._null >= 0 and hasattr(os, "splice"):
            try:
                moved = os.splice(fd, self._null, CHUNK * 16)
                self.discarded += moved
                return moved
            except OSError:
                self._null = -1  # no splice to /dev/null here: read instead
        chunk = os.read(fd, CHUNK)
        self.discarded += len(chunk)
        return len(chunk)
