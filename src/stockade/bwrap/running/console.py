"""The sandbox's own terminal: a pseudo-terminal between the user's terminal and the command.

At a terminal, the sandbox does not get the user's terminal: it gets a pty
of stockade's own as its controlling terminal, in place of each of stdin,
stdout and stderr that was the user's terminal, and stockade copies bytes
between the two (what sudo's `use_pty` does, for the same reasons). Sharing
the user's terminal would let any process of the sandbox make itself the
terminal's foreground group (TIOCSPGRP with SIGTTOU ignored) and read what
the user types to other programs, a password included, while the run is
stopped or after it; draw over a question stockade asks; or leave the
terminal in raw mode. With its own pty, the sandbox can only touch that pty;
the keys the user types reach it only while stockade's job is in the
foreground; its output waits while a question is open; and the user's
terminal modes are stockade's to set and put back.

The pty starts with the user's terminal's modes and size, so the command
sees the terminal it would have seen. The user's terminal is raw while the
command runs: Ctrl-C, Ctrl-\\ and Ctrl-Z are keys that the pty turns into
signals for the command's foreground group, as the user's terminal would
have. A Ctrl-C or Ctrl-\\ typed this way is also sent to the rest of
stockade's job, as the user's terminal would have sent it (a script that
runs stockade stops its loop), and Ctrl-Z stops bwrap with the command,
which is how stockade sees it and stops its own job (supervise.py).
"""

from __future__ import annotations

import _signal
import os
import select
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CHUNK = 65536


class Console:
    """One run's pty and the thread that copies between it and the user's terminal."""

    def __init__(self, real_in: int, real_out: int, tty_fds: list[int]) -> None:
        import termios

        self.real_in = real_in
        self.real_out = real_out
        self.tty_fds = tty_fds  # the sandbox's fds that were the user's terminal: the pty's slave instead
        self.master, slave = os.openpty()
        self.slave_path = os.ttyname(slave)
        self.modes: list[Any] | None = None  # the user's terminal's modes, put back whenever stockade lets go of it
        try:
            self.modes = termios.tcgetattr(real_in)
            termios.tcsetattr(slave, termios.TCSANOW, self.modes)
        except (termios.error, OSError):
            pass
        os.close(slave)  # the child opens it by name, which makes it its controlling terminal
        self.resize()
        os.set_blocking(self.master, False)
        self.typed: list[int] = []  # SIGINT and SIGQUIT the user typed for the command
        self.on_key_signal: Callable[[int], None] | None = None
        self.on_hangup: Callable[[], None] | None = None  # the user's terminal hung up
        self._paused = True  # until start(), and while the command is stopped (Ctrl-Z)
        self._held = False  # a question has the terminal (proxy/client/asking.py)
        self._raw = False
        self._set_modes: list[Any] | None = None  # what stockade set: put back only what is still ours
        self._ended = False
        self._hung_up = False
        self._pending_in = b""
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._lock = threading.RLock()  # the user's terminal's modes
        self._parked = threading.Event()  # the copying thread waits, reading nothing
        self._thread = threading.Thread(target=self._copy, name="stockade-console", daemon=True)

    @classmethod
    def for_this_run(cls) -> Console | None:
        """A console when stdin is a terminal (the run is interactive); None otherwise."""
        if not _isatty(0):
            return None
        tty_fds = [fd for fd in (0, 1, 2) if _isatty(fd) and _same_device(0, fd)]
        shown = [fd for fd in (1, 2) if fd in tty_fds]
        real_out = shown[0] if shown else os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        return cls(0, real_out, tty_fds)

    # -- the spawn side (supervise.py) --------------------------------------------------------

    def start(self) -> None:
        """After bwrap started: copy in both directions (input only while stockade's job is in the foreground)."""
        self._thread.start()
        self.resume()

    def finish(self, timeout: float = 5.0) -> None:
        """After bwrap ended: the rest of its output, then the user's terminal as it was."""
        self._ended = True
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout)
        with self._lock:
            self._cooked()
        for fd in (self.master, self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass

    def suspend(self) -> None:
        """The command stopped (Ctrl-Z): stop copying (returns once the copying thread reads
        nothing more), and give the user's terminal its modes back for the shell."""
        self._paused = True
        self._park()

    def resume(self) -> None:
        """Copy again. Safe in a signal handler (SIGCONT): it only sets a flag and wakes the copying
        thread, which makes the user's terminal raw when stockade's job has it (not after `bg`;
        after a later `fg` too, which sends no signal to a running job)."""
        self._paused = False
        self._wake()

    def resize(self) -> None:
        """The user's terminal's size onto the pty (the kernel then sends SIGWINCH to the command)."""
        import fcntl
        import termios

        try:
            size = fcntl.ioctl(self.real_in, termios.TIOCGWINSZ, b"\0" * 8)
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, size)
        except OSError:
            pass

    def in_foreground(self) -> bool:
        try:
            return os.tcgetpgrp(self.real_in) == os.getpgrp()
        except OSError:
            return False

    # -- a question (proxy/client/asking.py's Holder) ------------------------------------------------

    def hold(self, tty_fd: int) -> bool:
        """Stop copying until `release` (the command's output waits in the pty; a SIGCONT meanwhile
        does not start it again), and give the user's terminal its modes back for the question;
        True when stockade's job can read the answer."""
        self._held = True
        self._park()
        return self.in_foreground()

    def release(self, tty_fd: int, interrupt: bool = False) -> None:
        """Copy again; `interrupt` (Ctrl-C at the question) types the pty's Ctrl-C for the command."""
        if interrupt:
            self._type(self._interrupt_key())
        self._held = False
        self._wake()

    # -- the copying thread ---------------------------------------------------------------------

    def _park(self) -> None:
        self._wake()
        if self._thread.is_alive():
            self._parked.wait(1.0)
        with self._lock:
            self._cooked()

    def _copy(self) -> None:
        _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTTIN, _signal.SIGTTOU})  # EIO, not a stop, if in the background
        try:
            self._loop()
        except OSError:
            pass  # the user's terminal went away: the run goes on without it

    def _loop(self) -> None:
        poller = select.poll()
        while True:
            if (self._paused or self._held) and not self._ended:
                self._parked.set()
                select.select([self._wake_read], [], [], None)
                self._parked.clear()
                self._drain_wake()
                continue
            with self._lock:
                if not (self._paused or self._held or self._raw or self._ended) and self.in_foreground():
                    self._make_raw()
                    self.resize()
            typing = not self._ended and not self._hung_up and self._raw and self.in_foreground()
            poller.register(self.master, select.POLLIN | (select.POLLOUT if self._pending_in else 0))  # again: updates it
            poller.register(self._wake_read, select.POLLIN)
            if not self._hung_up and not self._ended:
                poller.register(self.real_in, select.POLLIN if typing else 0)  # 0: a hangup is still reported
            else:
                try:
                    poller.unregister(self.real_in)
                except KeyError:
                    pass
            ready = dict(poller.poll(None if typing or self._ended else 250))
            if ready.get(self._wake_read):
                self._drain_wake()
            if ready.get(self.master, 0) & (select.POLLIN | select.POLLHUP | select.POLLERR) and not self._from_sandbox():
                return  # every end of the pty is closed: the sandbox ended
            if ready.get(self.master, 0) & select.POLLOUT:
                self._flush_in()
            events = ready.get(self.real_in, 0)
            if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL) and not events & select.POLLIN:
                self._hang_up()
            elif events & select.POLLIN:
                self._from_user()

    def _hang_up(self) -> None:
        """The user's terminal hung up: as the kernel would, the command's terminal signals it."""
        self._hung_up = True
        if self.on_hangup is not None and not self._ended:
            self.on_hangup()

    def _from_sandbox(self) -> bool:
        try:
            data = os.read(self.master, CHUNK)
        except BlockingIOError:
            return True
        except OSError:  # EIO: no process holds the slave any more
            return False
        if not data:
            return False
        _write_all(self.real_out, data)
        return True

    def _from_user(self) -> None:
        try:
            data = os.read(self.real_in, CHUNK)
        except OSError:  # EIO: in the background after all, or hung up
            return
        if not data:
            self._hang_up()
            return
        self._notice_signal_keys(data)
        self._pending_in += data
        self._flush_in()

    def _flush_in(self) -> None:
        try:
            written = os.write(self.master, self._pending_in)
        except BlockingIOError:
            return
        except OSError:
            self._pending_in = b""
            return
        self._pending_in = self._pending_in[written:]

    def _type(self, key: bytes) -> None:
        if key:
            self._notice_signal_keys(key)
            self._pending_in += key
            self._flush_in()

    def _notice_signal_keys(self, data: bytes) -> None:
        """A Ctrl-C or Ctrl-\\ the pty turns into a signal for the command: the user's terminal
        would also have sent it to the rest of stockade's job. The key must be the user's own
        terminal's key too: the sandbox sets its pty's keys, not which keys signal stockade's job."""
        import termios

        try:
            modes = termios.tcgetattr(self.master)
        except (termios.error, OSError):
            return
        if not modes[3] & termios.ISIG or self.modes is None:
            return
        for index, number in ((termios.VINTR, _signal.SIGINT), (termios.VQUIT, _signal.SIGQUIT)):
            key, own = _key(modes[6][index]), _key(self.modes[6][index])
            if key != b"\0" and key == own and key in data:
                if number not in self.typed:
                    self.typed.append(number)
                if self.on_key_signal is not None:
                    self.on_key_signal(number)

    def _interrupt_key(self) -> bytes:
        import termios

        try:
            return _key(termios.tcgetattr(self.master)[6][termios.VINTR])
        except (termios.error, OSError):
            return b"\x03"

    # -- the user's terminal's modes ------------------------------------------------------------

    def _make_raw(self) -> None:
        """Keys as they are typed, nothing echoed or turned into signals here (the pty does that);
        output processing stays as it was, for the other programs of a pipeline that write here."""
        if self.modes is None or self._raw:
            return
        import termios

        raw: list[Any] = [list(part) if isinstance(part, list) else part for part in self.modes]
        raw[0] &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP | termios.INLCR | termios.IGNCR | termios.ICRNL | termios.IXON)
        raw[2] = (raw[2] & ~(termios.CSIZE | termios.PARENB)) | termios.CS8
        raw[3] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
        raw[6][termios.VMIN] = 1
        raw[6][termios.VTIME] = 0
        try:
            termios.tcsetattr(self.real_in, termios.TCSANOW, raw)
            self._set_modes = termios.tcgetattr(self.real_in)
            self._raw = True
        except (termios.error, OSError):
            pass

    def _cooked(self) -> None:
        """The user's terminal's modes back, unless another program (a pager after a pipe) changed
        them since stockade set them: those are its to put back."""
        if self.modes is None or not self._raw:
            return
        import termios

        self._raw = False
        previous = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTTOU})
        try:
            if termios.tcgetattr(self.real_in) == self._set_modes:
                termios.tcsetattr(self.real_in, termios.TCSADRAIN, self.modes)
        except (termios.error, OSError):
            pass
        finally:
            _signal.pthread_sigmask(_signal.SIG_SETMASK, previous)

    def _wake(self) -> None:
        try:
            os.write(self._wake_write, b"x")
        except OSError:
            pass

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_read, 64):
                pass
        except OSError:
            pass


def _key(value: object) -> bytes:
    return value if isinstance(value, bytes) else bytes([int(str(value))])


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _same_device(first: int, second: int) -> bool:
    try:
        one, other = os.fstat(first), os.fstat(second)
    except OSError:
        return False
    return (one.st_rdev, one.st_dev) == (other.st_rdev, other.st_dev)
