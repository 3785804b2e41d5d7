"""Start bwrap, pass signals to the sandboxed tree, enforce wall time, report the exit.

bwrap's own pid 1 reaps inside the PID namespace; when the command exits, the
namespace ends and takes every process it started with it (ESCAPES 55).

This is on every run's path, so it imports only os, time and `_signal`
(the C core of `signal`, whose Python layer builds IntEnums at import), and
starts bwrap with posix_spawn, or fork and exec when the child must first
join a cgroup or a network namespace (the only time Python runs between fork and exec); subprocess would cost more to import
than the whole sandbox takes to start.
"""

from __future__ import annotations

import _signal
import os

from stockade.bwrap.netcount import attempts, open_counters
from stockade.core.errors import ExitCode, SandboxSetupError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from stockade.proxy.handover import Handover

FORWARDED = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1, _signal.SIGUSR2)
# Python ignores these at start-up; an ignored signal stays ignored across exec, so
# the child gets them back as they were (what subprocess's restore_signals does).
RESTORED = (_signal.SIGPIPE, _signal.SIGXFSZ)


class Outcome:
    __slots__ = ("exit_code", "timed_out", "no_route")

    def __init__(self, exit_code: int, timed_out: bool = False) -> None:
        self.exit_code = exit_code  # negative: killed by that signal
        self.timed_out = timed_out
        self.no_route = 0  # connections and packets the sandbox sent towards a network it lacks (netcount.py)


def _sandbox_members(init_pid: int) -> list[int]:
    try:
        with open(f"/proc/{init_pid}/task/{init_pid}/children", encoding="ascii") as handle:
            return [int(pid) for pid in handle.read().split()]
    except OSError:
        return []


def _read_info(fd: int) -> int | None:
    """bwrap's --json-status-fd starts with {"child-pid": N} once the sandbox exists; EOF
    first means it failed. Only that first line is read: the fd stays open for the end."""
    chunks = []
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
        if b"\n" in chunk:
            break
    text = b"".join(chunks).decode("ascii", "replace")
    key = text.find('"child-pid"')
    if key < 0:
        return None
    digits = text[text.find(":", key) + 1 :].lstrip(" \t\n").split(",")[0].split("\n")[0].split("}")[0].strip()
    return int(digits) if digits.isdigit() else None


def _command_ran(fd: int) -> bool:
    """After bwrap ended: whether it reported the command's exit ({"exit-code": N}). bwrap writes
    that only for a command it started; a mount or exec that failed during setup leaves none."""
    chunks = []
    os.set_blocking(fd, False)
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    except OSError:
        return True  # cannot tell: the status passes through, as before
    return b'"exit-code"' in b"".join(chunks)


def _seal_inherited_fds(keep: Sequence[int]) -> None:
    """Make every fd we inherited close on exec, but stdio and `keep`: nothing the caller left
    open (a directory, a socket) may reach bwrap and through it the sandbox."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    for name in names:
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the fd listdir itself used, already closed


def _spawn(argv: Sequence[str], env: dict[str, str], pass_fds: Sequence[int], preexec: Callable[[], None] | None) -> int:
    """bwrap's pid; the fds in `pass_fds` must already be inheritable."""
    _seal_inherited_fds(pass_fds)
    if preexec is None:
        return os.posix_spawn(argv[0], list(argv), env, setsigdef=RESTORED)
    errors_read, errors_write = os.pipe()  # both close on exec: EOF means the exec worked
    pid = os.fork()
    if pid == 0:  # the child: nothing here may return
        try:
            os.close(errors_read)
            for signum in RESTORED:
                _signal.signal(signum, _signal.SIG_DFL)
            preexec()
            os.execve(argv[0], list(argv), env)
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent, then die
            try:
                os.write(errors_write, f"{type(exc).__name__}: {exc}".encode(errors="replace")[:4096])
            finally:
                os._exit(ExitCode.SETUP)
    os.close(errors_write)
    failure = os.read(errors_read, 4096)
    os.close(errors_read)
    if failure:
        os.waitpid(pid, 0)
        raise OSError(failure.decode(errors="replace"))
    return pid


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
    watch: Handover | None = None,
) -> Outcome:
    """Run bwrap to its end. `watch` is the run's network session while the daemon has not
    answered: its answer is read as it comes, and a refusal stops the sandbox (125)."""
    try:
        pid = _spawn(argv, env, pass_fds, preexec)
    except OSError as exc:
        raise SandboxSetupError(f"cannot start bwrap: {exc}") from None
    finally:
        for fd in close_after_spawn:
            os.close(fd)
    if after_spawn is not None:
        try:
            after_spawn()
        except OSError as exc:
            _kill(pid, _signal.SIGKILL)
            os.waitpid(pid, 0)
            raise SandboxSetupError(f"cannot connect the sandbox to the network proxy: {exc}") from None
    init_pid = _read_info(info_read_fd)
    counters = open_counters(init_pid) if init_pid is not None else []
    if init_pid is None:
        os.close(info_read_fd)
        code = _exit_code(os.waitpid(pid, 0)[1])
        raise SandboxSetupError(f"bwrap could not set up the sandbox (exit {code}, its message is above); run `stockade doctor`")

    def forward(signum: int, _frame: object) -> None:
        if interactive:
            for member in _sandbox_members(init_pid):
                _kill(member, signum)
        else:
            _kill(-init_pid, signum)  # bwrap --new-session made init the group leader

    previous = {sig: _signal.signal(sig, forward) for sig in FORWARDED}
    # On a terminal, Ctrl-C reaches the sandbox directly; stockade just waits for it.
    previous[_signal.SIGINT] = _signal.signal(_signal.SIGINT, _signal.SIG_IGN if interactive else forward)
    try:
        outcome = _wait(pid, wall_time, watch, info_read_fd)
        outcome.no_route = attempts(counters)
    finally:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)
    try:
        ran = outcome.timed_out or _command_ran(info_read_fd)
    finally:
        os.close(info_read_fd)
    if not ran and outcome.exit_code != 0:
        raise SandboxSetupError(
            f"bwrap could not finish setting up the sandbox or start the command (exit {outcome.exit_code}, its message "
            "is above); run `stockade doctor`"
        )
    return outcome


def _wait(pid: int, wall_time: float | None, watch: Handover | None = None, ended_fd: int = -1) -> Outcome:
    """bwrap's exit; at the deadline a timer kills bwrap and --die-with-parent takes the namespace."""
    if wall_time is None:
        _watch_network(pid, watch, ended_fd)
        return Outcome(_exit_code(os.waitpid(pid, 0)[1]))  # signals interrupt and resume it (PEP 475)
    expired = []

    def expire(_signum: int, _frame: object) -> None:
        expired.append(True)
        _kill(pid, _signal.SIGKILL)

    previous = _signal.signal(_signal.SIGALRM, expire)
    _signal.setitimer(_signal.ITIMER_REAL, max(wall_time, 0.001))
    try:
        _watch_network(pid, watch, ended_fd)
        code = _exit_code(os.waitpid(pid, 0)[1])
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        _signal.signal(_signal.SIGALRM, previous)
    if expired:
        return Outcome(ExitCode.SIGNAL_BASE + _signal.SIGKILL, timed_out=True)
    return Outcome(code)


def _watch_network(pid: int, watch: Handover | None, ended_fd: int) -> None:
    """Until the daemon answered the run's session (or bwrap ended first): read its answer as it
    comes. A refusal, or a daemon that cannot be had, stops the sandbox before anything was served."""
    if watch is None or watch.settled:
        return
    import select
    import time

    try:
        while not watch.settled:
            remaining = watch.deadline() - time.monotonic()
            ready = select.select([watch.fileno(), ended_fd], [], [], remaining)[0] if remaining > 0 else []
            if watch.fileno() in ready:
                watch.settle()
            elif ready:
                return  # bwrap ended (its status pipe): the session's end decides whether to wait
            else:
                watch.overdue()
    except OSError as exc:  # ProxyDaemonError included
        _kill(pid, _signal.SIGKILL)
        os.waitpid(pid, 0)
        raise SandboxSetupError(f"cannot connect the sandbox to the network proxy: {exc}; the sandbox was stopped") from None


def _exit_code(status: int) -> int:
    """Like Popen.returncode: the exit status, or minus the signal that killed it."""
    return os.waitstatus_to_exitcode(status)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
