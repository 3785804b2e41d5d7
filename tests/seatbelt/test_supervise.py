"""The supervised process group, on any Unix: status and signals pass through, wall time, no leftovers."""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from pathlib import Path

import pytest

from stockade.seatbelt import supervise as sv
from stockade.seatbelt.supervise import Outcome, exit_code_of, supervise

ENV = {"PATH": "/usr/bin:/bin"}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a killed leftover may linger as a zombie (reparented, not yet reaped): that counts as gone
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except OSError:
        return True


@pytest.mark.parametrize("status", [0, 1, 2, 3, 125, 126, 127, 255])
def test_the_commands_exit_status_passes_through(tmp_path: Path, status: int) -> None:
    assert supervise(["sh", "-c", f"exit {status}"], env=ENV, cwd=tmp_path) == Outcome(exit_code=status)


@pytest.mark.parametrize("number", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_a_killing_signal_is_128_plus_n(tmp_path: Path, number: int) -> None:
    outcome = supervise(["sh", "-c", f"kill -{int(number)} $$"], env=ENV, cwd=tmp_path)
    assert outcome == Outcome(exit_code=128 + number, signal=number, timed_out=False)


def test_env_and_cwd_are_the_commands(tmp_path: Path) -> None:
    supervise(["sh", "-c", 'printf "%s %s" "$STOCKADE_T" "$(pwd)" > out'], env={**ENV, "STOCKADE_T": "yes"}, cwd=tmp_path)
    assert (tmp_path / "out").read_text() == f"yes {os.path.realpath(tmp_path)}"


def test_the_command_gets_its_own_process_group(tmp_path: Path) -> None:
    supervise(["sh", "-c", "ps -o pgid= -p $$ > group; echo $$ > pid"], env=ENV, cwd=tmp_path)
    assert int((tmp_path / "group").read_text()) == int((tmp_path / "pid").read_text()) != os.getpgrp()


def test_wall_time_kills_the_group_and_says_so(tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = supervise(["sh", "-c", "sleep 30"], env=ENV, cwd=tmp_path, wall_time=0.2)
    assert time.monotonic() - started < 5
    assert outcome == Outcome(exit_code=128 + signal.SIGKILL, signal=signal.SIGKILL, timed_out=True)


def test_a_command_within_its_wall_time_is_not_timed_out(tmp_path: Path) -> None:
    assert supervise(["sh", "-c", "exit 4"], env=ENV, cwd=tmp_path, wall_time=30) == Outcome(exit_code=4)


def test_background_leftovers_die_with_the_command(tmp_path: Path) -> None:
    outcome = supervise(["sh", "-c", "sleep 30 & echo $! > bg; exit 0"], env=ENV, cwd=tmp_path)
    assert outcome.exit_code == 0
    leftover = int((tmp_path / "bg").read_text())
    deadline = time.monotonic() + 5
    while alive(leftover) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive(leftover)


def test_exit_code_of_wait_statuses() -> None:
    assert exit_code_of(0) == (0, None)
    assert exit_code_of(7 << 8) == (7, None)
    assert exit_code_of(signal.SIGTERM) == (128 + signal.SIGTERM, signal.SIGTERM)


def test_a_signal_before_the_spawn_is_delivered_right_after(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(sv, "_kill_group", lambda group, number: sent.append((group, number)))
    target = sv._Target()
    target.deliver(signal.SIGINT)
    target.deliver(signal.SIGTERM)
    assert sent == []
    assert target.started(4242) == 4242
    assert sent == [(4242, signal.SIGINT), (4242, signal.SIGTERM)]
    target.deliver(signal.SIGHUP)
    assert sent[-1] == (4242, signal.SIGHUP)


def test_forwarding_installs_and_restores_the_handlers() -> None:
    before = {number: signal.getsignal(number) for number in sv.FORWARDED}
    target = sv._Target()
    with sv._forwarding(target):
        for number in sv.FORWARDED:
            assert signal.getsignal(number) is not before[number]
        os.kill(os.getpid(), signal.SIGHUP)  # to stockade: kept for the command, not fatal here
    assert target.pending == [signal.SIGHUP]
    assert {number: signal.getsignal(number) for number in sv.FORWARDED} == before


def test_off_the_main_thread_no_handlers_are_touched() -> None:
    before = {number: signal.getsignal(number) for number in sv.FORWARDED}
    seen: list[object] = []

    def body() -> None:
        with sv._forwarding(sv._Target()), sv._ignoring(signal.SIGTTOU):
            seen.append({number: signal.getsignal(number) for number in sv.FORWARDED})

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before]


def test_the_file_size_limit_is_set_around_the_spawn_only() -> None:
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    with sv._file_size_limit(4096):
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        assert soft == (4096 if hard == resource.RLIM_INFINITY else min(4096, hard)) and hard == before[1]
    assert resource.getrlimit(resource.RLIMIT_FSIZE) == before
    with sv._file_size_limit(None):
        assert resource.getrlimit(resource.RLIMIT_FSIZE) == before


def test_killing_a_gone_group_is_quiet(tmp_path: Path) -> None:
    outcome = supervise(["true"], env=ENV, cwd=tmp_path)
    sv._kill_group(2**22 + 12345, signal.SIGKILL)  # no such group: no error
    assert outcome.exit_code == 0


def test_no_terminal_without_a_tty_on_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "isatty", lambda fd: False)
    assert sv._foreground_terminal() is None
