"""The supervisor's pure helpers: bwrap's json status, whether the command ran, fds sealed before spawn."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stockade.bwrap.running import supervise


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        try:
            os.close(fd)
        except OSError:
            pass


def feed(pipe: tuple[int, int], data: bytes, close: bool = True) -> int:
    read, write = pipe
    os.write(write, data)
    if close:
        os.close(write)
    return read


@pytest.mark.parametrize(
    ("status", "pid"),
    [
        (b'{ "child-pid": 1234 }\n', 1234),
        (b'{"child-pid":7}\n', 7),
        (b'{\n  "child-pid": 42,\n  "cgroup-namespace": 1\n}\n', 42),
        (b'{ "child-pid": 99, "net-namespace": 4026531840 }', 99),
        (b"", None),
        (b'{ "other": 5 }\n', None),
        (b'{ "child-pid": "x" }\n', None),
        (b'{ "child-pid": -3 }\n', None),
    ],
)
def test_read_info_finds_the_child_pid(pipe: tuple[int, int], status: bytes, pid: int | None) -> None:
    assert supervise._read_info(feed(pipe, status)) == pid


def test_read_info_stops_at_the_first_line_and_leaves_the_rest(pipe: tuple[int, int]) -> None:
    read = feed(pipe, b'{ "child-pid": 5 }\n', close=False)
    assert supervise._read_info(read) == 5
    os.write(pipe[1], b'{ "exit-code": 0 }\n')
    os.close(pipe[1])
    assert supervise._command_ran(read) is True


@pytest.mark.parametrize(
    ("rest", "ran"),
    [(b'{ "exit-code": 3 }\n', True), (b"", False), (b'{ "child-pid": 5 }\n', False)],
)
def test_command_ran_only_with_an_exit_code(pipe: tuple[int, int], rest: bytes, ran: bool) -> None:
    assert supervise._command_ran(feed(pipe, rest)) is ran


def test_command_ran_does_not_block_on_an_open_empty_pipe(pipe: tuple[int, int]) -> None:
    assert supervise._command_ran(pipe[0]) is False


def test_command_ran_passes_the_status_through_when_it_cannot_read(tmp_path: Path) -> None:
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # read() fails with EISDIR
    try:
        assert supervise._command_ran(folder) is True
    finally:
        os.close(folder)


def test_seal_inherited_fds_keeps_only_stdio_and_the_kept(pipe: tuple[int, int]) -> None:
    read, write = pipe
    os.set_inheritable(read, True)
    os.set_inheritable(write, True)
    supervise._seal_inherited_fds([write])
    assert os.get_inheritable(read) is False
    assert os.get_inheritable(write) is True


def test_seal_inherited_fds_without_proc_does_nothing(pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    os.set_inheritable(pipe[0], True)

    def no_proc(path: str) -> list[str]:
        raise OSError("no /proc")

    monkeypatch.setattr(supervise.os, "listdir", no_proc)
    supervise._seal_inherited_fds([])
    assert os.get_inheritable(pipe[0]) is True


def test_exit_code_is_the_status_or_minus_the_signal() -> None:
    assert supervise._exit_code(3 << 8) == 3
    assert supervise._exit_code(9) == -9


def test_kill_of_a_missing_process_is_quiet() -> None:
    supervise._kill(2**22 + 12345, 0)


def test_spawn_and_wait_report_the_exit() -> None:
    pid = supervise._spawn(["/bin/sh", "-c", "exit 4"], {}, [], None)
    assert supervise._wait(pid, None).exit_code == 4


def test_wait_kills_at_the_wall_time() -> None:
    pid = supervise._spawn(["/bin/sleep", "5"], {}, [], None)
    outcome = supervise._wait(pid, 0.05)
    assert outcome.timed_out is True
    assert outcome.exit_code == supervise.ExitCode.SIGNAL_BASE + 9


def test_a_failing_preexec_is_an_oserror_with_its_message() -> None:
    def refuse() -> None:
        raise RuntimeError("no namespace for you")

    with pytest.raises(OSError, match="RuntimeError: no namespace for you"):
        supervise._spawn(["/bin/true"], {}, [], refuse)


def test_spawn_makes_bwrap_the_leader_of_a_new_process_group() -> None:
    """Its own group: a signal to stockade's group does not reach it, and the terminal can be handed to it."""
    pid = supervise._spawn(["/bin/sleep", "5"], {}, [], None)
    try:
        assert os.getpgid(pid) == pid != os.getpgrp()
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def test_spawn_with_a_preexec_also_makes_a_new_group() -> None:
    pid = supervise._spawn(["/bin/sleep", "5"], {}, [], lambda: None)
    try:
        assert os.getpgid(pid) == pid
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(supervise, "_kill", lambda pid, number: calls.append((pid, number)))
    return calls


def test_relay_passes_a_signal_to_the_sandbox_group_once(sent: list[tuple[int, int]]) -> None:
    """timeout(1) signals stockade, then its whole group (stockade again): one event, one signal."""
    relay = supervise.Relay()
    relay.started(4242)
    relay._handle(15, None)
    relay._handle(15, None)
    relay._handle(1, None)
    assert sent == [(-4242, 15), (-4242, 1)]
    assert relay.sent == [15, 1]


def test_relay_passes_the_same_signal_again_after_a_while(sent: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([10.0, 10.0 + supervise.SAME_EVENT + 0.01])
    monkeypatch.setattr(supervise.time, "monotonic", lambda: next(clock))
    relay = supervise.Relay()
    relay.started(7)
    relay._handle(2, None)
    relay._handle(2, None)
    assert sent == [(-7, 2), (-7, 2)]


def test_relay_keeps_a_signal_until_the_sandbox_exists(sent: list[tuple[int, int]]) -> None:
    relay = supervise.Relay()
    relay._handle(15, None)
    assert sent == []
    relay.started(99)
    assert sent == [(-99, 15)]


def test_relay_keeps_a_signal_after_the_sandbox_ended_for_stockades_own_end(sent: list[tuple[int, int]]) -> None:
    relay = supervise.Relay()
    relay.started(5)
    relay.stopped()
    relay._handle(1, None)
    relay._handle(15, None)
    assert sent == []
    assert relay.late == 1


def test_relay_install_and_uninstall_put_the_handlers_back() -> None:
    import signal

    before = signal.getsignal(signal.SIGTERM)
    relay = supervise.Relay().install()
    assert signal.getsignal(signal.SIGTERM) == relay._handle
    relay.uninstall()
    assert signal.getsignal(signal.SIGTERM) == before


def _fake_bwrap(script: str, pipe: tuple[int, int]) -> supervise.Outcome:
    """supervise() over a shell that plays bwrap: it writes its status pipe as bwrap would."""
    read, write = pipe
    os.set_inheritable(write, True)
    return supervise.supervise(
        ["/bin/bash", "-c", script.replace("FD", str(write))], env={}, pass_fds=(write,), info_read_fd=read,
        close_after_spawn=(write,), wall_time=None, new_session=False, preexec=None,
    )  # fmt: skip


def test_a_command_killed_by_a_signal_is_its_128_plus_n(pipe: tuple[int, int]) -> None:
    outcome = _fake_bwrap('echo "{\\"child-pid\\": $$}" >&FD; sleep 0.1; echo "{\\"exit-code\\": 130}" >&FD; exit 130', pipe)
    assert outcome.exit_code == 130
    assert outcome.signal is None  # not a signal stockade passed on: an exit(130) stays one


def test_bwrap_killed_by_a_signal_is_128_plus_n_not_a_setup_failure(pipe: tuple[int, int]) -> None:
    """Told apart by the status pipe, never by the exit code's sign."""
    outcome = _fake_bwrap('echo "{\\"child-pid\\": $$}" >&FD; kill -KILL $$', pipe)
    assert outcome.exit_code == 137


def test_bwrap_that_exits_without_the_commands_status_is_a_setup_failure(pipe: tuple[int, int]) -> None:
    with pytest.raises(supervise.SandboxSetupError, match="could not finish setting up"):
        _fake_bwrap('echo "{\\"child-pid\\": $$}" >&FD; exit 1', pipe)
