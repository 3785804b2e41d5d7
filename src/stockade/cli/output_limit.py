"""`stockade run --max-output BYTES`: forward at most BYTES of a command's output, its head and its tail.

A coding agent buffers whatever a command prints; `yes | head -c 20G` would
fill its memory (ESCAPES 73). Here the sandbox's stdout and stderr become
pipes that a thread drains while the command runs: the first half of BYTES
(both streams together) goes through as it comes; after that, only the last
half of BYTES is kept, in a ring, and the rest is dropped as it arrives, so
stockade's memory stays flat and the command is never blocked or killed: its
exit status is its own, unlike `| head`. When the command ends, one line
says how much was cut, then the kept tail follows (from its first whole
line): a test run's summary is at its end. stockade's own end-of-run lines
are held until the command's output is drained and then printed whole,
after the tail.
"""

from __future__ import annotations

import io
import os
import select
import sys
import threading
from collections import deque
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
        self.head = limit - limit // 2  # passed as it comes
        self.tail = limit // 2  # the last bytes, kept until the end
        self.forwarded = 0
        self.discarded = 0
        self._ring: deque[tuple[int, bytes]] = deque()  # (the real fd, bytes) after the head
        self._ring_size = 0
        self._saved: tuple[int, int] = (-1, -1)
        self._readers: list[int] = []
        self._held = io.StringIO()
        self._stderr: TextIO = sys.stderr
        self._thread: threading.Thread | None = None

    def __enter__(self) -> OutputLimit:
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))  # not inheritable: only stockade writes to them
        for target in (1, 2):
            read_end, write_end = os.pipe()
            os.dup2(write_end, target)  # inheritable: bwrap and the sandbox write here
            os.close(write_end)
            self._readers.append(read_end)
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
        self._write_tail()
        held = self._held.getvalue()
        if held:
            sys.stderr.write(held)
        sys.stderr.flush()
        for fd in (out, err):
            os.close(fd)
        if self._thread is None or not self._thread.is_alive():
            for fd in self._readers:
                os.close(fd)

    def note(self) -> str:
        return (
            f"stockade: output cut: {self.discarded} bytes dropped here (--max-output {self.limit} keeps the first "
            f"{self.head} and the last {self.tail} bytes); the command ran to the end and its exit status is its own"
        )

    def _pump(self) -> None:
        targets = dict(zip(self._readers, self._saved, strict=True))
        while targets:
            try:
                ready, _, _ = select.select(list(targets), [], [])
            except InterruptedError:  # pragma: no cover - PEP 475 retries select itself
                continue
            for fd in ready:
                if not self._move(fd, targets[fd]):
                    del targets[fd]

    def _move(self, fd: int, target: int) -> bool:
        """One chunk: the head's part forwarded, the rest into the ring; False at the stream's end."""
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return False
        keep = chunk[: max(self.head - self.forwarded, 0)]
        if keep:
            self.forwarded += len(keep)
            _write(target, keep)
        rest = chunk[len(keep) :]
        if rest:
            self._ring.append((target, rest))
            self._ring_size += len(rest)
            while self._ring and self._ring_size - len(self._ring[0][1]) >= self.tail:
                _target, dropped = self._ring.popleft()
                self._ring_size -= len(dropped)
                self.discarded += len(dropped)
        return True

    def _write_tail(self) -> None:
        """The kept tail: whole when nothing was dropped; else the note, then the tail from its
        first whole line (the bytes before it are counted as dropped)."""
        excess = self._ring_size - self.tail
        if excess > 0 or self.discarded:
            if excess > 0:
                target, first = self._ring.popleft()
                self._ring.appendleft((target, first[excess:]))
                self.discarded += excess
            self._from_a_whole_line()
            print(self.note(), file=sys.stderr)
            sys.stderr.flush()
        for target, data in self._ring:
            _write(target, data)
            self.forwarded += len(data)
        self._ring.clear()
        self._ring_size = 0

    def _from_a_whole_line(self) -> None:
        """Drop the tail's bytes up to its first newline, unless nothing would be left after it."""
        chunks = list(self._ring)
        for index, (_target, data) in enumerate(chunks):
            cut = data.find(b"\n")
            if cut < 0:
                continue
            rest = [(target, data) for target, data in chunks[index + 1 :] if data]
            if cut == len(data) - 1 and not rest:
                return  # the newline ends the tail: keep it all
            dropped = sum(len(data) for _target, data in chunks[:index]) + cut + 1
            self.discarded += dropped
            self._ring = deque([(chunks[index][0], data[cut + 1 :]), *rest])
            return


def _write(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # the reader went away: keep draining so the command is never blocked
        pass
