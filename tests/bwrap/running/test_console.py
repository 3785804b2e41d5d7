"""The sandbox's own pty: its modes and size come from the user's terminal, its output is copied
out, a typed Ctrl-C is noticed, and a question holds the output back."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import termios
import time
from collections.abc import Iterator

import pytest

from stockade.bwrap.running import console as console_module
from stockade.bwrap.running.console import Console


@pytest.fixture
def user_terminal() -> Iterator[tuple[int, int]]:
    """A pty standing for the user's terminal: (the emulator's side, the shell's side)."""
    emulator, shell = os.openpty()
    fcntl.ioctl(shell, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    yield emulator, shell
    for fd in (emulator, shell):
        try:
            os.close(fd)
        except OSError:
            pass


def _read_all(fd: int, wait: float = 1.0) -> bytes:
    got = b""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                got += os.read(fd, 4096)
            except OSError:
                break
    return got


def test_no_console_when_stdin_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console_module, "_isatty", lambda fd: False)
    assert Console.for_this_run() is None


def test_the_pty_starts_with_the_user_terminals_modes_and_size(user_terminal: tuple[int, int]) -> None:
    _emulator, shell = user_terminal
    modes = termios.tcgetattr(shell)
    modes[3] &= ~termios.ECHOCTL
    termios.tcsetattr(shell, termios.TCSANOW, modes)
    made = Console(shell, shell, [0])
    try:
        sandbox_side = os.open(made.slave_path, os.O_RDWR | os.O_NOCTTY)
        assert termios.tcgetattr(sandbox_side)[3] & termios.ECHOCTL == 0
        assert struct.unpack("HHHH", fcntl.ioctl(sandbox_side, termios.TIOCGWINSZ, b"\0" * 8))[:2] == (33, 111)
        os.close(sandbox_side)
    finally:
        made.finish(timeout=0.5)


def test_what_the_sandbox_writes_reaches_the_user_and_a_hold_keeps_it_back(user_terminal: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    emulator, shell = user_terminal
    made = Console(shell, shell, [0])
    monkeypatch.setattr(made, "in_foreground", lambda: False)  # not this test's terminal to make raw
    sandbox_side = os.open(made.slave_path, os.O_RDWR | os.O_NOCTTY)
    made.start()
    try:
        os.write(sandbox_side, b"first\n")
        assert b"first" in _read_all(emulator)
        made.hold(shell)
        os.write(sandbox_side, b"second\n")
        assert b"second" not in _read_all(emulator, 0.5)  # held while the question is open
        made.release(shell)
        assert b"second" in _read_all(emulator)
    finally:
        os.close(sandbox_side)
        made.finish(timeout=2)


def test_a_typed_ctrl_c_is_noticed_only_where_the_pty_makes_it_a_signal(user_terminal: tuple[int, int]) -> None:
    _emulator, shell = user_terminal
    made = Console(shell, shell, [0])
    noticed: list[int] = []
    made.on_key_signal = noticed.append
    try:
        made._notice_signal_keys(b"abc\x03")
        assert noticed == [signal.SIGINT] and made.typed == [signal.SIGINT]
        sandbox_side = os.open(made.slave_path, os.O_RDWR | os.O_NOCTTY)
        raw = termios.tcgetattr(sandbox_side)
        raw[3] &= ~termios.ISIG  # a full-screen program: Ctrl-C is a key for it
        termios.tcsetattr(sandbox_side, termios.TCSANOW, raw)
        made._notice_signal_keys(b"\x03\x1c")
        assert noticed == [signal.SIGINT]
        os.close(sandbox_side)
    finally:
        made.finish(timeout=0.5)
