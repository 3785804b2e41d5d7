"""Stop a sandbox that writes to the user's terminal directly while a question is asked there.

A run at a terminal has a pty of its own (console.py), and a question just
stops copying its output. A run whose stdin is not a terminal, but whose
output is (`--approve` with a redirected stdin), writes to the user's
terminal itself; while a question is open, every process of its sandbox is
stopped instead, so nothing it writes draws over the question.

A process of the sandbox can continue another (SIGCONT), so one pass is not
enough: passes go on until every process is stopped at once (a stopped
process cannot continue anyone), for at most a second. Only the processes
this stopped are continued after (one that was stopped before stays
stopped), each through a pidfd, so a pid reused since is never signalled.
"""

from __future__ import annotations

import _signal
import os
import time

from stockade.bwrap.parts.procfs import children
from stockade.bwrap.parts.procfs import state as _state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

SETTLE = 1.0  # seconds the passes may take


class Freeze:
    """While a question is open: every descendant of the sandbox's pid 1 stopped."""

    def __init__(self) -> None:
        self.root: int | None = None
        self.stopped: dict[int, int] = {}  # pid: pidfd of each process this stopped

    def attach(self, root: int) -> None:
        self.root = root

    def hold(self, tty_fd: int) -> bool:
        """Stop the sandbox; True when stockade's group is the terminal's foreground (it can read
        the answer), False when the run is in the background."""
        if self.root is not None:
            self.stopped = stop_tree(self.root)
        try:
            return os.tcgetpgrp(tty_fd) == os.getpgrp()
        except OSError:
            return False

    def release(self, tty_fd: int, interrupt: bool = False) -> None:
        """Continue what this stopped (children first); `interrupt` then sends SIGINT to stockade's
        own job, where the terminal would have sent a Ctrl-C."""
        for pidfd in reversed(list(self.stopped.values())):
            _send(pidfd, _signal.SIGCONT)
            os.close(pidfd)
        self.stopped = {}
        if interrupt:
            try:
                os.kill(0, _signal.SIGINT)
            except OSError:
                pass


def stop_tree(root: int) -> dict[int, int]:
    """SIGSTOP every descendant of `root` (the sandbox's pid 1, left running to reap), parents
    before children, again and again until one look finds them all stopped and none new; returns
    the pidfds of those this stopped."""
    stopped: dict[int, int] = {}
    before: set[int] | None = None  # stopped when the question came: left so, while they stay so
    deadline = time.monotonic() + SETTLE
    while True:
        running = 0
        first_look = before is None
        before = before or set()
        for pid in descendants(root):
            state = _state(pid)
            if state in (None, "Z", "X"):
                continue
            held = state in ("T", "t")
            if pid not in stopped:
                if held and (first_look or pid in before):
                    before.add(pid)
                    continue
                before.discard(pid)  # continued since by another process of the sandbox: ours to stop now
                try:
                    stopped[pid] = os.pidfd_open(pid)
                except OSError:
                    continue
            if not held:
                _send(stopped[pid], _signal.SIGSTOP)
                running += 1
        if not running or time.monotonic() > deadline:
            return stopped
        time.sleep(0.001)


def descendants(root: int) -> Iterator[int]:
    """Every process below `root`, parents first (each thread's children: a thread may fork)."""
    queue = [root]
    while queue:
        pid = queue.pop(0)
        for child in children(pid) or []:
            yield child
            queue.append(child)


def _send(pidfd: int, number: int) -> None:
    try:
        _signal.pidfd_send_signal(pidfd, number)
    except OSError:
        pass
