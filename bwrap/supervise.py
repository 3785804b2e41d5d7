"""Start bwrap, pass signals to the sandboxed tree, enforce wall time, report the exit.

bwrap's own pid 1 reaps inside the PID namespace; when the command exits, the
namespace ends and takes every process it started with it (ESCAPES 55).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stockade.profiles.errors import ExitCode, SandboxSetupError

FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


@dataclass
class Outcome:
    exit_code: int
    timed_out: bool = False


def _sandbox_members(init_pid: int) -> list[int]:
    try:
        with open(f"/proc/{init_pid}/task/{init_pid}/children", encoding="ascii") as handle:
            return [int(pid) for pid in handle.read().split()]
    except OSError:
        return []


def _read_info(fd: int) -> int | None:
    """bwrap writes {"child-pid": N} once the sandbox is set up; EOF first means it failed."""
    data = b""
    with os.fdopen(fd, "rb", closefd=True) as handle:
        data = handle.read()
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def supervise(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    pass_fds: Sequence[int],
    info_read_fd: int,
    close_after_spawn: Sequence[int],
    wall_time: float | None,
    interactive: bool,
    preexec: Callable[[], None] | None,
    after_spawn: Callable[[], None] | None = None,
) -> Outcome:
    try:
        process = subprocess.Popen(list(argv), env=env, pass_fds=tuple(pass_fds), preexec_fn=preexec, close_fds=True)
    except OSError as exc:
        raise SandboxSetupError(f"cannot start bwrap: {exc}") from None
    finally:
        for fd in close_after_spawn:
            os.close(fd)
    if after_spawn is not None:
        try:
            after_spawn()
        except OSError as exc:
            process.kill()
            process.wait()
            raise SandboxSetupError(f"cannot connect the sandbox to the network proxy: {exc}") from None
    init_pid = _read_info(info_read_fd)
    if init_pid is None:
        code = process.wait()
        raise SandboxSetupError(
            f"bwrap could not set up the sandbox (exit {code}, its message is above); run `stockade doctor`"
        )

    def forward(signum: int, _frame: object) -> None:
        if interactive:
            for pid in _sandbox_members(init_pid):
                _kill(pid, signum)
        else:
            _kill(-init_pid, signum)  # bwrap --new-session made init the group leader

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    # On a terminal, Ctrl-C reaches the sandbox directly; stockade just waits for it.
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN if interactive else forward)
    try:
        return _wait(process, wall_time)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait(process: subprocess.Popen[bytes], wall_time: float | None) -> Outcome:
    deadline = None if wall_time is None else time.monotonic() + wall_time
    while True:
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
        try:
            return Outcome(process.wait(timeout=remaining))
        except subprocess.TimeoutExpired:
            process.kill()  # bwrap dies; --die-with-parent takes pid 1 and so the namespace with it
            process.wait()
            return Outcome(ExitCode.SIGNAL_BASE + signal.SIGKILL, timed_out=True)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
