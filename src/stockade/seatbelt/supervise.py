"""Run one command as a supervised process group: exit codes, signals, wall time.

POSIX only, no Seatbelt in here, so it is tested on any Unix. The command
gets its own process group so a time limit or a leftover background job can
be killed as a whole; when stockade owns the terminal, that group is made
the terminal's foreground group so the command reads the keyboard and gets
Ctrl-C itself, and stockade follows Ctrl-Z like a shell does.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SIGNAL_BASE = 128


@dataclass(frozen=True)
class Outcome:
    """How the command ended: `exit_code` is what stockade leaves with."""

    exit_code: int
    signal: int | None = None  # the signal that killed it, if any
    timed_out: bool = False


def exit_code_of(status: int) -> tuple[int, int | None]:
    """(exit code, killing signal) from a wait status: signal N gives 128+N."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return SIGNAL_BASE + number, number
    return os.WEXITSTATUS(status), None


def supervise(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    wall_time: float | None = None,
    file_size: int | None = None,
) -> Outcome:
    """Start `argv` in a new process group, wait for it, leave nothing behind."""
    terminal = _foreground_terminal()
    target = _Target()
    with _forwarding(target):
        with _file_size_limit(file_size):
            proc = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, process_group=0, close_fds=True)
        group = target.started(proc.pid)
        if terminal is not None:
            _give_terminal(terminal, group)
        try:
            status, timed_out = _wait(proc.pid, group, terminal, wall_time)
        finally:
            if terminal is not None:
                _take_terminal(terminal)
            _kill_group(group, signal.SIGKILL)  # background leftovers die with the command
    code, number = exit_code_of(status)
    proc.returncode = code if number is None else -number
    return Outcome(exit_code=code, signal=number, timed_out=timed_out)


def _wait(pid: int, group: int, terminal: int | None, wall_time: float | None) -> tuple[int, bool]:
    """Wait status of `pid`; kills the group at the deadline; follows stops like a shell."""
    deadline = None if wall_time is None else time.monotonic() + wall_time
    delay = 0.001
    timed_out = False
    while True:
        if deadline is None:
            _, status = os.waitpid(pid, os.WUNTRACED)
        else:
            done, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if done == 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 and not timed_out:
                    timed_out = True
                    _kill_group(group, signal.SIGKILL)
                    deadline = None
                    continue
                time.sleep(max(0.0, min(delay, remaining)))
                delay = min(delay * 2, 0.05)
                continue
        if os.WIFSTOPPED(status):
            _suspend_with(group, terminal)
            continue
        return status, timed_out


def _suspend_with(group: int, terminal: int | None) -> None:
    """The command was stopped (Ctrl-Z): stop stockade too, resume both together."""
    if terminal is not None:
        _take_terminal(terminal)
    os.kill(os.getpid(), signal.SIGSTOP)
    if terminal is not None:
        _give_terminal(terminal, group)
    _kill_group(group, signal.SIGCONT)


def _kill_group(group: int, number: int) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):
        pass


def _foreground_terminal() -> int | None:
    """stdin's fd when it is a terminal whose foreground group is ours, else None."""
    try:
        if os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp():
            return 0
    except OSError:
        pass
    return None


def _give_terminal(fd: int, group: int) -> None:
    """Make the command's group the foreground one, then wake it if it stopped on tty input."""
    with _ignoring(signal.SIGTTOU):
        try:
            os.tcsetpgrp(fd, group)
        except OSError:
            return
    _kill_group(group, signal.SIGCONT)


def _take_terminal(fd: int) -> None:
    with _ignoring(signal.SIGTTOU):
        try:
            os.tcsetpgrp(fd, os.getpgrp())
        except OSError:
            pass


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def _ignoring(number: int) -> Iterator[None]:
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(number, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(number, previous)


class _Target:
    """Where forwarded signals go; one that arrives before the spawn is delivered right after it."""

    def __init__(self) -> None:
        self.group: int | None = None
        self.pending: list[int] = []

    def deliver(self, number: int) -> None:
        if self.group is None:
            self.pending.append(number)
        else:
            _kill_group(self.group, number)

    def started(self, group: int) -> int:
        self.group = group
        for number in self.pending:
            _kill_group(group, number)
        return group


@contextmanager
def _forwarding(target: _Target) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP sent to stockade go to the command's group instead."""
    if not _in_main_thread():
        yield
        return
    previous = {number: signal.signal(number, lambda n, _f: target.deliver(n)) for number in FORWARDED}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def _file_size_limit(limit: int | None) -> Iterator[None]:
    """RLIMIT_FSIZE for the child only: set around the spawn, which inherits it."""
    if limit is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    wanted = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
