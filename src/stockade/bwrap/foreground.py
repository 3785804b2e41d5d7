"""The user's terminal while a sandbox runs: handed to the sandbox, taken back for Ctrl-Z and
for a question, and left with the modes it had.

At a terminal, stockade does for the sandbox what a job-control shell does
for a job. bwrap starts in a process group of its own (bwrap/supervise.py);
when stockade's group is the terminal's foreground group, the sandbox's group
becomes it, so the command reads the keyboard and gets Ctrl-C, Ctrl-\\,
Ctrl-Z and window-size changes from the terminal itself, while stockade,
outside that group, gets none of them and so never passes one on a second
time. Ctrl-Z stops the sandbox's group, bwrap's outer process included, which
is how stockade sees it and stops its own job in turn (supervise.py).

A question about a held request (proxy/asking.py) stops every process of the
sandbox (`Hold`) and takes the terminal for the answer, so the command can
neither draw over the question nor read the keys meant for it.

Sharing the user's session is safe because the seccomp filter refuses
TIOCSTI and TIOCLINUX whatever the kernel allows (docs/escapes.md, case 46).
"""

from __future__ import annotations

import _signal
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class Terminal:
    """stdin, when it is a terminal whose foreground group is stockade's: the terminal to hand over."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.own_group = os.getpgrp()
        self.modes = _modes(fd)  # put back when the command is killed with the terminal in raw mode
        self.given: int | None = None  # the group it was handed to

    @classmethod
    def of_this_job(cls, fd: int = 0) -> Terminal | None:
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return cls(fd)
        except OSError:
            pass
        return None

    def foreground(self) -> int | None:
        try:
            return os.tcgetpgrp(self.fd)
        except OSError:
            return None

    def give(self, group: int) -> bool:
        """Make `group` the terminal's foreground group; False when it cannot be."""
        if _set_foreground(self.fd, group):
            self.given = group
            return True
        return False

    def take(self) -> None:
        """Stockade's group in the foreground again (after the run, for Ctrl-Z, for a question)."""
        _set_foreground(self.fd, self.own_group)

    def ours(self) -> bool:
        """Whether stockade's group is in the foreground (after `fg`, not after `bg`)."""
        return self.foreground() == self.own_group

    def restore_modes(self) -> None:
        if self.modes is None:
            return
        import termios

        try:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.modes)
        except (termios.error, OSError):
            pass


def _modes(fd: int) -> list[Any] | None:
    import termios

    try:
        return termios.tcgetattr(fd)
    except (termios.error, OSError):
        return None


def _set_foreground(fd: int, group: int) -> bool:
    """tcsetpgrp with SIGTTOU blocked in this thread: from a background group it would stop us."""
    previous = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTTOU})
    try:
        os.tcsetpgrp(fd, group)
        return True
    except OSError:
        return False
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, previous)


class Hold:
    """While a question is open: every process of the sandbox stopped, and the terminal stockade's.

    `attach` gives it the sandbox once bwrap reported its pid 1; the asking
    thread calls `hold` and `release` around each question."""

    def __init__(self, terminal: Terminal | None) -> None:
        self.terminal = terminal
        self.root: int | None = None
        self.stopped: list[int] = []
        self.foreground: int | None = None  # the group that had the terminal before a question took it

    def attach(self, root: int) -> None:
        self.root = root

    def hold(self, tty_fd: int) -> bool:
        """Stop the sandbox and take the terminal; True when stockade can read the answer from
        `tty_fd` (its group is the foreground one), False when it runs in the background."""
        if self.root is not None:
            self.stopped = stop_tree(self.root)
        try:
            current = os.tcgetpgrp(tty_fd)
        except OSError:
            return False
        own = os.getpgrp()
        if current == own:
            return True
        if self.terminal is None or self.terminal.given is None or not _in_sandbox(current, self.terminal.given, self.stopped):
            return False  # not stockade's to take: a run in the background does not grab the terminal
        self.foreground = current
        return _set_foreground(tty_fd, own)

    def release(self, tty_fd: int, interrupt: bool = False) -> None:
        """Give the terminal back and continue the sandbox; `interrupt` (Ctrl-C at the question)
        then sends SIGINT where the terminal would have: the group that had the foreground."""
        group = self.foreground
        if group is not None:
            _set_foreground(tty_fd, group)
            self.foreground = None
        for pid in reversed(self.stopped):  # children first: a parent resumes to find them running
            _kill(pid, _signal.SIGCONT)
        self.stopped = []
        if interrupt:
            _kill(-group if group is not None else 0, _signal.SIGINT)  # 0: stockade's own job had it


def _in_sandbox(group: int, given: int, stopped: list[int]) -> bool:
    """The terminal's foreground group is the sandbox's own or one a shell inside made."""
    return group == given or group in stopped or any(_group_of(pid) == group for pid in stopped)


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def stop_tree(root: int) -> list[int]:
    """SIGSTOP every descendant of `root` (the sandbox's pid 1, left running to reap), parents
    before children, until a pass finds none new: a fork in flight shows up in the next pass."""
    stopped: list[int] = []
    seen: set[int] = set()
    for _pass in range(64):
        fresh = [pid for pid in descendants(root) if pid not in seen]
        if not fresh:
            break
        for pid in fresh:
            _kill(pid, _signal.SIGSTOP)
            seen.add(pid)
            stopped.append(pid)
        _until_stopped(fresh)
    return stopped


def descendants(root: int) -> Iterator[int]:
    """Every process below `root`, parents first (each thread's children: a thread may fork)."""
    queue = [root]
    while queue:
        pid = queue.pop(0)
        for child in _children(pid):
            yield child
            queue.append(child)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                found += [int(word) for word in handle.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _until_stopped(pids: list[int], limit: float = 0.2) -> None:
    """Wait (briefly) until each of `pids` has stopped or gone: SIGSTOP takes effect asynchronously."""
    deadline = time.monotonic() + limit
    waiting = list(pids)
    while waiting and time.monotonic() < deadline:
        waiting = [pid for pid in waiting if _state(pid) not in ("T", "t", "Z", "X", None)]
        if waiting:
            time.sleep(0.001)


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2 : text.rfind(")") + 3] or None


def _kill(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass
