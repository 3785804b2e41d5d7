"""Start bwrap, pass signals to the sandboxed tree, enforce wall time, report the exit.

bwrap's own pid 1 reaps inside the PID namespace; when the command exits, the
namespace ends and takes every process it started with it (ESCAPES 55).

The signal contract (README, "Exit codes"): bwrap starts as the leader of a
process group of its own, with the terminal's signals ignored
(signal_reset.py); at a terminal, as the leader of a session whose
controlling terminal is a pty of stockade's (console.py). A signal sent to
stockade reaches the sandbox's group once (`Relay`); a key typed at the
terminal reaches the command through the pty; either way bwrap lives to
report the command's own status, and stockade ends by the signal that killed
the command (core/ending.py). Ctrl-Z stops bwrap with the command, and
stockade follows like a shell's job. A set-up failure is told apart from a
command killed by a signal by bwrap's status pipe, never by the exit code.

This is on every run's path, so it imports only os, time and `_signal`
(the C core of `signal`, whose Python layer builds IntEnums at import), and
starts bwrap with fork and exec: the child first joins a cgroup, makes the
network namespace and always a mount namespace whose mounts receive nothing
from the host's (ESCAPES 96), the only time Python runs between fork and
exec (posix_spawn stays for a caller with nothing to do there); subprocess
would cost more to import than the whole sandbox takes to start.
"""

from __future__ import annotations

import _signal
import os
import time

from stockade.bwrap.parts.procfs import children, state
from stockade.bwrap.running.netcount import open_counters, read_counts
from stockade.core.errors import ExitCode, SandboxSetupError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import NoReturn

    from stockade.bwrap.running.console import Console
    from stockade.bwrap.running.freeze import Freeze
    from stockade.proxy.client.handover import Handover

# What stockade passes on to the sandbox: every signal that would otherwise end stockade with the
# sandbox's terminal raw (signal_reset.SIGNALS, which bwrap ignores and the command gets back).
FORWARDED = (
    _signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1, _signal.SIGUSR2,
    _signal.SIGALRM, _signal.SIGVTALRM, _signal.SIGPROF, _signal.SIGXCPU, _signal.SIGPWR,
)  # fmt: skip
# Python ignores these at start-up; an ignored signal stays ignored across exec, so
# the child gets them back as they were (what subprocess's restore_signals does).
RESTORED = (_signal.SIGPIPE, _signal.SIGXFSZ)
SAME_EVENT = 0.25  # seconds: the same signal again this soon is one event (timeout(1) signals stockade, then its group)
STARTING = 10.0  # seconds a signal waits at most for the command to have its signals back (bwrap's set-up)


class Outcome:
    __slots__ = ("exit_code", "timed_out", "no_route", "refused_locally", "signal")

    def __init__(self, exit_code: int, timed_out: bool = False, signal: int | None = None) -> None:
        self.exit_code = exit_code  # the command's status, 128+N for a signal, as bwrap reports it
        self.timed_out = timed_out
        self.no_route = 0  # connections and packets the sandbox sent towards a network it lacks (netcount.py)
        self.refused_locally = 0  # TCP connections refused inside: a loopback port nothing listens on (netcount.py)
        self.signal = signal  # the signal that ended the command, when it came through stockade or its terminal


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


def _spawn(
    argv: Sequence[str],
    env: dict[str, str],
    pass_fds: Sequence[int],
    preexec: Callable[[], None] | None,
    console: Console | None = None,
    own_stderr: tuple[int, int] | None = None,
) -> int:
    """The pid to wait for: bwrap, the leader of a new process group; with a console, the holder of
    bwrap's session (`_hold_session`). The fds in `pass_fds` must already be inheritable."""
    _seal_inherited_fds(pass_fds)
    swaps = [(os.POSIX_SPAWN_DUP2, 2, own_stderr[1]), (os.POSIX_SPAWN_DUP2, own_stderr[0], 2)] if own_stderr else []
    if preexec is None and console is None:
        return os.posix_spawn(argv[0], list(argv), env, setsigdef=RESTORED, setpgroup=0, file_actions=swaps)
    errors_read, errors_write = os.pipe()  # both close on exec: EOF means the exec worked
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: nothing here may return
        try:
            os.close(errors_read)
            if console is None:
                for _action, source, target in swaps:
                    os.dup2(source, target)
                _become_bwrap(argv, env, preexec, None)
            else:
                _hold_session(argv, env, preexec, console, errors_write, parent)
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent, then die
            try:
                os.write(errors_write, f"{type(exc).__name__}: {exc}".encode(errors="replace")[:4096])
            finally:
                os._exit(ExitCode.SETUP)
    os.close(errors_write)
    if console is None:
        try:
            os.setpgid(pid, pid)  # as a shell does: in the group before either side goes on
        except OSError:
            pass  # already exec'd (EACCES) with the child's own setpgid done
    failure = os.read(errors_read, 4096)
    os.close(errors_read)
    if failure:
        os.waitpid(pid, 0)
        raise OSError(failure.decode(errors="replace"))
    return pid


def _become_bwrap(argv: Sequence[str], env: dict[str, str], preexec: Callable[[], None] | None, terminal: int | None) -> NoReturn:
    """In a forked child: a process group of its own (the terminal's foreground one, given one),
    then bwrap. Never returns."""
    os.setpgid(0, 0)
    if terminal is not None:
        _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTTOU})  # a background group asks
        os.tcsetpgrp(terminal, os.getpid())
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGTTOU})
    for signum in RESTORED:
        _signal.signal(signum, _signal.SIG_DFL)
    if preexec is not None:
        preexec()
    os.execve(argv[0], list(argv), env)


def _hold_session(
    argv: Sequence[str], env: dict[str, str], preexec: Callable[[], None] | None, console: Console, errors: int, parent: int
) -> NoReturn:
    """The holder: the leader of a new session whose controlling terminal is the console's pty,
    and bwrap's parent, in a process group of its own.

    bwrap runs in a second group of that session, the pty's foreground one. Were
    bwrap itself the session's leader, its group would have no parent in its
    session, and the kernel drops Ctrl-Z for such an orphaned group. The holder
    mirrors bwrap to stockade: it stops when bwrap stops and continues bwrap when
    continued, and ends as bwrap ended. It dies with stockade (PR_SET_PDEATHSIG),
    and bwrap's --die-with-parent takes the sandbox with it. Never returns."""
    os.setsid()
    fd = os.open(console.slave_path, os.O_RDWR)  # the first terminal a session leader opens is its own
    for target in console.tty_fds:
        if target != fd:
            os.dup2(fd, target)
    terminal = console.tty_fds[0]
    if fd not in console.tty_fds:
        os.close(fd)
    child = os.fork()
    if child == 0:
        _become_bwrap(argv, env, preexec, terminal)
    _die_with(parent)  # while bwrap starts: ctypes takes a millisecond to import
    os.close(errors)
    for target in console.tty_fds:
        os.close(target)  # only bwrap's side holds the pty: its end is the sandbox's end
    try:
        os.setpgid(child, child)
    except OSError:
        pass
    while True:
        status = os.waitpid(child, os.WUNTRACED)[1]
        if os.WIFSTOPPED(status):
            os.kill(os.getpid(), _signal.SIGSTOP)  # stockade sees the stop (SIGSTOP: a Ctrl-Z would be dropped here)
            _kill(-child, _signal.SIGCONT)
            continue
        if os.WIFSIGNALED(status):
            _signal.signal(os.WTERMSIG(status), _signal.SIG_DFL)
            os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _die_with(parent: int) -> None:
    """SIGKILL when stockade (`parent`) dies; bwrap's --die-with-parent then takes the sandbox."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # stockade died before the line above (we belong to a reaper now)
        os.kill(os.getpid(), _signal.SIGKILL)


class Relay:
    """Signals sent to stockade while it runs a sandbox go to the sandbox's group, once each.

    Installed by bwrap/running/execute.py around the whole run: a signal that comes
    before the sandbox exists is passed on when it does; one that comes after
    it ended waits for the checks and the summary, then ends stockade
    (core/ending.py). bwrap's outer process ignores them (signal_reset.py), so
    the command alone decides what they do, and its status comes back."""

    def __init__(self) -> None:
        self.group: int | None = None
        self.pending: list[int] = []
        self.sent: list[int] = []  # in the order they were passed on
        self.late: int | None = None
        self.ended = False
        self._ready: Callable[[], bool] | None = None
        self._own: list[int] = []  # signals stockade sent its own job (a key typed at the console)
        self._busy = False
        self._queued: list[int] = []
        self._last = (0, -1.0)
        self._previous: dict[int, object] = {}

    def install(self) -> Relay:
        for number in FORWARDED:
            if _signal.getsignal(number) == _signal.SIG_IGN:
                continue  # ignored from the start (nohup): it stays ignored, for stockade and the command
            self._previous[number] = _signal.signal(number, self._handle)
        return self

    def uninstall(self) -> None:
        for number, handler in self._previous.items():
            _signal.signal(number, handler)
        self._previous = {}

    def started(self, group: int, command_ready: Callable[[], bool] | None = None) -> None:
        """The sandbox's group exists; `command_ready` says whether its command has its signals back
        yet (until then, bwrap's processes inside ignore them, and one sent would be lost)."""
        self.group = group
        self._ready = command_ready
        for number in self.pending:
            self._send(number)
        self.pending = []

    def stopped(self) -> None:
        """The sandbox ended: a signal from now on is stockade's own, after its checks."""
        self.ended = True
        self.group = None

    def hangup(self) -> None:
        """The user's terminal hung up (console.py): the command's terminal sends SIGHUP, once."""
        if self.group is not None and _signal.SIGHUP not in self.sent:
            self._send(_signal.SIGHUP)

    def to_own_job(self, number: int) -> None:
        """What the user's terminal would have done with a Ctrl-C typed for the command: send it to
        stockade's whole job too (a script running stockade stops its loop); stockade's own copy is
        not passed on, the command got it from its pty."""
        self._own.append(number)
        try:
            os.kill(0, number)
        except OSError:
            self._own.remove(number)

    def _handle(self, number: int, _frame: object) -> None:
        if self._busy:  # a flood of signals nests handlers (between any two bytecodes): one at a time
            if number not in self._queued:
                self._queued.append(number)
            return
        self._busy = True
        try:
            self._take(number)
            while self._queued:
                self._take(self._queued.pop(0))
        finally:
            self._busy = False

    def _take(self, number: int) -> None:
        if number in self._own:
            self._own.remove(number)
            return
        now = time.monotonic()
        if self._last[0] == number and now - self._last[1] < SAME_EVENT:
            return
        self._last = (number, now)
        if self.ended:
            if self.late is None:
                self.late = number
        elif self.group is None:
            self.pending.append(number)
        else:
            self._send(number)

    def _send(self, number: int) -> None:
        assert self.group is not None
        if self._ready is not None:  # the first signal of a run that may still be starting: wait until it can land
            deadline = time.monotonic() + STARTING
            while not self._ready() and time.monotonic() < deadline:
                time.sleep(0.002)
            self._ready = None
        if number not in self.sent:
            self.sent.append(number)
        _kill(-self.group, number)


def supervise(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    pass_fds: Sequence[int],
    info_read_fd: int,
    close_after_spawn: Sequence[int],
    wall_time: float | None,
    new_session: bool,
    preexec: Callable[[], None] | None,
    after_spawn: Callable[[int], None] | None = None,
    watch: Handover | None = None,
    relay: Relay | None = None,
    console: Console | None = None,
    freeze: Freeze | None = None,
    starting_marks: tuple[bytes, ...] = (),
    own_stderr: tuple[int, int] | None = None,
    sandboxed: Callable[[int], None] | None = None,
) -> Outcome:
    """Run bwrap to its end. `own_stderr` (no console): (a pipe's write end, a free fd number below
    10): bwrap's stderr becomes the pipe, and the real one waits at that number for the command
    to take it back (execute._setup_errors). `watch` is the run's network session while the daemon has not
    answered: its answer is read as it comes, and a refusal stops the sandbox (125).
    `console`: the sandbox's pty (console.py), copied to and from the user's terminal while it
    runs. `new_session`: bwrap --new-session made the sandbox's pid 1 the leader of the group its
    signals go to. `freeze`: told the sandbox's pid 1, to stop the sandbox for a question.
    `starting_marks`: how the command lines of the sandbox's processes begin until the command runs
    with its signals reset (signal_reset.py); a signal that comes before then waits for it.
    `sandboxed`: told the sandbox's pid 1 once it exists (the container gate joins its namespaces)."""
    try:
        pid = _spawn(argv, env, pass_fds, preexec, console, own_stderr)
    except OSError as exc:
        raise SandboxSetupError(f"cannot start bwrap: {exc}") from None
    finally:
        for fd in close_after_spawn:
            os.close(fd)
    if console is not None:
        console.start()
    try:
        return _supervised(pid, info_read_fd, wall_time, new_session, after_spawn, watch, relay, console, freeze, starting_marks, sandboxed)
    finally:
        if console is not None:
            console.finish()  # the rest of the output, then the user's terminal as it was


def _supervised(
    pid: int,
    info_read_fd: int,
    wall_time: float | None,
    new_session: bool,
    after_spawn: Callable[[int], None] | None,
    watch: Handover | None,
    relay: Relay | None,
    console: Console | None,
    freeze: Freeze | None,
    starting_marks: tuple[bytes, ...],
    sandboxed: Callable[[int], None] | None = None,
) -> Outcome:
    if after_spawn is not None:
        try:
            after_spawn(pid)  # bwrap's pid: the sandbox's first process
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
    group = init_pid if new_session else _group_of(init_pid, pid)
    if freeze is not None:
        freeze.attach(init_pid)
    if sandboxed is not None:
        sandboxed(init_pid)
    own_relay = relay is None
    relay = Relay().install() if relay is None else relay
    relay.started(group, _command_ready(init_pid, pid, starting_marks) if starting_marks else None)
    sandbox = _open_sandbox(init_pid)
    try:
        outcome = _wait(pid, wall_time, watch, info_read_fd, console)
        outcome.no_route, outcome.refused_locally = read_counts(counters)
    finally:
        _end_sandbox(sandbox)
        relay.stopped()
        if own_relay:
            relay.uninstall()
    try:
        ran = outcome.timed_out or _command_ran(info_read_fd)
    finally:
        os.close(info_read_fd)
    if outcome.exit_code < 0:  # bwrap itself was killed (signals it could not ignore): the sandbox died with it
        number = -outcome.exit_code
        outcome.exit_code = ExitCode.SIGNAL_BASE + number
        outcome.signal = number if number in relay.sent else None
        return outcome
    if not ran and outcome.exit_code != 0:
        raise SandboxSetupError(
            f"bwrap could not finish setting up the sandbox or start the command (exit {outcome.exit_code}, its message "
            "is above); run `stockade doctor`"
        )
    number = outcome.exit_code - ExitCode.SIGNAL_BASE
    typed = console.typed if console is not None else []
    if not outcome.timed_out and 0 < number < 65 and (number in relay.sent or number in typed):
        outcome.signal = number
    return outcome


GONE_WAIT = 5.0  # seconds stockade waits at most, once bwrap ended, for the sandbox's processes to be gone


def _open_sandbox(init_pid: int) -> int | None:
    """A pidfd of the sandbox's pid 1, or None (no pidfds before Linux 5.3; pid 1 already gone).

    Taken while bwrap runs; the process must then live in a pid namespace other than stockade's,
    so a pid 1 that ended and whose number went to a host process is never the one signalled."""
    try:
        fd = os.pidfd_open(init_pid)
    except (AttributeError, OSError):
        return None
    try:
        inside = os.readlink(f"/proc/{init_pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    except OSError:
        inside = False
    if not inside:
        os.close(fd)
        return None
    return fd


def _end_sandbox(fd: int | None) -> None:
    """bwrap ended: its pid 1 gets SIGKILL now (--die-with-parent sends it too, whenever the kernel
    gets to it), and stockade waits until pid 1 is gone, which the kernel allows only once every
    process of the namespace is: nothing of the sandbox still writes to the terminal, holds the
    cgroup or changes files while stockade reports and checks the run."""
    if fd is None:
        return
    import select

    try:
        _signal.pidfd_send_signal(fd, _signal.SIGKILL)
    except OSError:
        pass  # already gone
    try:
        select.select([fd], [], [], GONE_WAIT)
    except OSError:
        pass
    finally:
        os.close(fd)


def _group_of(init_pid: int, pid: int) -> int:
    """The sandbox's process group: its pid 1's (bwrap's, or the one the holder made bwrap's)."""
    try:
        return os.getpgid(init_pid)
    except OSError:
        return pid


def _command_ready(init_pid: int, bwrap_pid: int, marks: tuple[bytes, ...]) -> Callable[[], bool]:
    """Whether a child of the sandbox's pid 1 runs something that is neither bwrap nor the env that
    resets signals (`marks`), or the sandbox has ended: either way a signal sent now is not lost."""

    def ready() -> bool:
        if state(bwrap_pid) in (None, "Z"):
            return True
        found = children(init_pid)
        if found is None:
            return True  # pid 1 is gone: so is the sandbox
        for child in found:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    words = handle.read()
            except OSError:
                continue
            if words and not words.startswith(marks):  # empty: in the middle of an exec
                return True
        return False

    return ready


def _resume(pid: int, console: Console | None) -> None:
    """stockade was continued (fg or bg) after it followed a stop: the console copies again (raw
    once stockade's job has the terminal: console.py notices), and the sandbox goes on (the
    holder, with a console, continues bwrap's group in turn)."""
    if console is not None:
        console.resume()
    _kill(-pid, _signal.SIGCONT)


def _follow_stop(number: int, pid: int, console: Console | None) -> None:
    """bwrap's outer process stopped with the sandbox's group (Ctrl-Z, or a stop signal sent to the
    group): stop stockade's own job as the terminal would have, and resume the sandbox with it."""
    if console is not None:
        console.suspend()  # the user's terminal gets its modes back while the shell has it
        number = _signal.SIGTSTP  # the holder stops with SIGSTOP; the user pressed Ctrl-Z
    previous = _signal.signal(number, _signal.SIG_DFL) if number != _signal.SIGSTOP else None
    try:
        os.kill(0 if console is not None else os.getpid(), number)  # returns once continued, or at once when orphaned
    finally:
        if previous is not None:
            _signal.signal(number, previous)
    _resume(pid, console)


def _wait(pid: int, wall_time: float | None, watch: Handover | None = None, ended_fd: int = -1, console: Console | None = None) -> Outcome:
    """bwrap's exit; at the deadline a timer kills bwrap and --die-with-parent takes the namespace.
    A stop of bwrap (its group was stopped) stops stockade too, and both go on together."""
    expired: list[bool] = []
    previous = None
    if wall_time is not None:

        def expire(_signum: int, _frame: object) -> None:
            expired.append(True)
            _kill(pid, _signal.SIGKILL)

        previous = _signal.signal(_signal.SIGALRM, expire)
        _signal.setitimer(_signal.ITIMER_REAL, max(wall_time, 0.001))
    try:
        _watch_network(pid, watch, ended_fd)
        while True:
            status = os.waitpid(pid, os.WUNTRACED)[1]  # signals interrupt and resume it (PEP 475)
            if not os.WIFSTOPPED(status):
                break
            if not expired:
                _follow_stop(os.WSTOPSIG(status), pid, console)
    finally:
        if wall_time is not None:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            _signal.signal(_signal.SIGALRM, previous)
    if expired:
        return Outcome(ExitCode.SIGNAL_BASE + _signal.SIGKILL, timed_out=True)
    return Outcome(_exit_code(status))


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
