"""A Linux run's session handed to the daemon at once: each answer, each daemon that fails, each way a run ends.

The daemon is played by the test on the other end of a socket pair (`reach` is
replaced), so every case is exact: what was sent, with which descriptor, and
what the run does with each answer. Real daemons: tests/e2e/test_network_start.py.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stockade.proxy import control
from stockade.proxy.client import handover, launch
from stockade.proxy.control import PROTOCOL, DaemonFiles

SPEC = {"session_id": "s1", "command": ["true"], "cwd": "/p", "allow": ["a.test"], "deny": [], "audit_path": "/a", "origin": "o", "mode": "allowlist"}


class Daemons:
    """The daemons `reach` hands out, in order: the test's end of each connection."""

    def __init__(self) -> None:
        self.ends: list[socket.socket] = []
        self.started: list[bool] = []
        self.replacing: list[tuple[int, int] | None] = []

    def reach(self, files: DaemonFiles, *, replacing: tuple[int, int] | None = None) -> tuple[socket.socket, bool]:
        ours, theirs = socket.socketpair()
        self.ends.append(theirs)
        self.replacing.append(replacing)
        started = self.started.pop(0) if self.started else False
        return ours, started  # type: ignore[return-value]

    def request(self, index: int = -1) -> tuple[dict[str, object], list[int]]:
        data, fds, _flags, _addr = socket.recv_fds(self.ends[index], 65536, 4)
        return json.loads(data), fds

    def answer(self, message: dict[str, object], index: int = -1) -> None:
        self.ends[index].sendall(json.dumps(message).encode() + b"\n")


@pytest.fixture
def daemons(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Daemons]:
    fake = Daemons()
    monkeypatch.setattr(handover, "reach", fake.reach)
    monkeypatch.setattr(handover, "socket_identity", lambda files: (1, 2))
    yield fake
    for end in fake.ends:
        end.close()


@pytest.fixture
def files(tmp_path: Path) -> DaemonFiles:
    return DaemonFiles(str(tmp_path / "run"), str(tmp_path / "state"))


def listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def opened(files: DaemonFiles, daemons: Daemons) -> tuple[handover.Handover, socket.socket]:
    session = handover.Handover(files, dict(SPEC))
    session.reach()
    door = listener()
    session.send([door])  # type: ignore[list-item]
    return session, door


def test_open_sends_the_spec_and_the_listener_in_one_request(files: DaemonFiles, daemons: Daemons) -> None:
    session, door = opened(files, daemons)
    message, fds = daemons.request()
    assert message == {"op": "open", "spec": SPEC}
    assert len(fds) == 1 and socket.socket(fileno=fds[0]).getsockname() == door.getsockname()
    assert not session.settled and session.listener is not None  # our copy is kept until the answer


def test_an_answer_settles_the_session_and_drops_our_copy_of_the_listener(files: DaemonFiles, daemons: Daemons) -> None:
    session, door = opened(files, daemons)
    daemons.answer({"ok": True, "protocol": PROTOCOL, "session_id": "s1"})
    session.settle()
    assert session.settled and session.listener is None and door.fileno() == -1


def test_a_refusal_is_a_setup_error_with_the_daemons_reason(files: DaemonFiles, daemons: Daemons) -> None:
    session, _door = opened(files, daemons)
    daemons.answer({"ok": False, "error": "audit log /a: permission denied"})
    with pytest.raises(launch.ProxyDaemonError, match="refused the session: audit log /a: permission denied") as caught:
        session.settle()
    assert caught.value.exit_code == 125
    assert not session.settled


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({"ok": False, "error": "the proxy daemon is exiting", "retry": True}, id="exiting"),
        pytest.param({"ok": False, "error": "unknown op 'open'"}, id="an older daemon"),
        pytest.param({"ok": True, "protocol": PROTOCOL - 1, "session_id": "s1"}, id="an older protocol"),
        pytest.param({"ok": False, "error": "open needs exactly one listening socket"}, id="a daemon before forwards"),
    ],
)
def test_an_exiting_or_older_daemon_is_replaced_and_asked_again(files: DaemonFiles, daemons: Daemons, answer: dict[str, object]) -> None:
    session, door = opened(files, daemons)
    daemons.request(0)
    daemons.answer(answer, 0)
    session.settle()
    assert not session.settled and len(daemons.ends) == 2
    assert daemons.replacing == [None, (1, 2)]  # the next daemon replaces the one that said no
    message, fds = daemons.request(1)
    assert message["op"] == "open" and len(fds) == 1
    assert socket.socket(fileno=fds[0]).getsockname() == door.getsockname()  # the same listener, sent again
    daemons.answer({"ok": True, "protocol": PROTOCOL}, 1)
    session.settle()
    assert session.settled


def test_a_hung_daemon_is_replaced_after_its_deadline(files: DaemonFiles, daemons: Daemons, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handover, "ping_or_hung", lambda files: (None, True))
    session, _door = opened(files, daemons)
    assert session.deadline() == pytest.approx(session.sent_at + launch.HUNG_AFTER)
    session.overdue()
    assert len(daemons.ends) == 2 and daemons.replacing[1] == (1, 2)


def test_a_slow_daemon_that_still_answers_a_ping_gets_longer(files: DaemonFiles, daemons: Daemons, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handover, "ping_or_hung", lambda files: ({"ok": True}, False))
    session, _door = opened(files, daemons)
    session.overdue()
    assert len(daemons.ends) == 1 and session.deadline() == pytest.approx(session.sent_at + launch.IO_TIMEOUT)
    monkeypatch.setattr(handover, "ping_or_hung", lambda files: ({"ok": True}, False))
    session.overdue()  # no answer in IO_TIMEOUT either: replaced, however it answers pings
    assert len(daemons.ends) == 2 and session.deadline() == pytest.approx(session.sent_at + launch.HUNG_AFTER)


def test_a_daemon_this_run_started_is_given_the_start_timeout_and_then_fails(files: DaemonFiles, daemons: Daemons) -> None:
    daemons.started = [True]
    session, _door = opened(files, daemons)
    assert session.deadline() == pytest.approx(session.sent_at + control.START_TIMEOUT)
    with pytest.raises(launch.ProxyDaemonError, match="did not start within"):
        session.overdue()


def test_a_daemon_that_died_while_starting_is_reported_with_its_logs_last_line(files: DaemonFiles, daemons: Daemons) -> None:
    os.makedirs(files.state)
    Path(files.log).write_text("starting\nImportError: no module named mitmproxy\n")
    daemons.started = [True]
    session, _door = opened(files, daemons)
    daemons.ends[0].close()
    with pytest.raises(launch.ProxyDaemonError, match="did not start: ImportError: no module named mitmproxy"):
        session.settle()


def test_a_running_daemon_that_closed_the_connection_is_replaced(files: DaemonFiles, daemons: Daemons) -> None:
    session, _door = opened(files, daemons)
    daemons.ends[0].close()
    session.settle()
    assert len(daemons.ends) == 2


def test_a_run_gives_up_after_so_many_daemons(files: DaemonFiles, daemons: Daemons, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handover, "ping_or_hung", lambda files: (None, False))
    session, _door = opened(files, daemons)
    for _ in range(handover.ATTEMPTS - 1):
        session.overdue()
    with pytest.raises(launch.ProxyDaemonError, match="no proxy daemon took the session"):
        session.overdue()


def test_end_asks_for_the_denials_on_the_same_connection(files: DaemonFiles, daemons: Daemons) -> None:
    session, _door = opened(files, daemons)
    daemons.request()
    daemons.answer({"ok": True, "protocol": PROTOCOL})
    session.settle()
    daemons.answer({"ok": True, "denials": [{"host": "x.test", "port": 443}], "audit_error": None, "refused": None})
    ended = session.end()
    assert daemons.request()[0] == {"op": "end", "session_id": "s1"}
    assert ended.denials == [{"host": "x.test", "port": 443}] and ended.trouble == ""
    assert session.conn is None


def test_an_unanswered_session_that_served_nothing_ends_without_waiting(files: DaemonFiles, daemons: Daemons) -> None:
    session, door = opened(files, daemons)
    ended = session.end()  # the daemon never answered: nothing could have been served
    assert (ended.denials, ended.trouble) == ([], "")
    assert session.conn is None and door.fileno() == -1
    message, fds = daemons.request()
    assert message["op"] == "open" and len(fds) == 1  # the daemon still gets the session...
    assert daemons.ends[0].recv(1) == b""  # ...and then the closed connection, which ends it


def test_an_unanswered_session_with_a_waiting_connection_waits_for_the_daemon(files: DaemonFiles, daemons: Daemons) -> None:
    session, door = opened(files, daemons)
    client = socket.create_connection(door.getsockname())  # queued: nobody accepted it yet
    assert not session.served_nothing()
    daemons.answer({"ok": True, "protocol": PROTOCOL})
    daemons.answer({"ok": True, "denials": [], "audit_error": None, "refused": None})
    ended = session.end()
    assert ended.trouble == "" and session.settled
    client.close()


def test_a_daemon_gone_at_the_end_is_the_runs_trouble_line(files: DaemonFiles, daemons: Daemons) -> None:
    session, _door = opened(files, daemons)
    daemons.answer({"ok": True, "protocol": PROTOCOL})
    session.settle()
    daemons.ends[0].close()
    ended = session.end()
    assert "daemon" in ended.trouble and ended.denials == []


def test_a_broken_audit_log_at_the_end_is_the_runs_trouble_line(files: DaemonFiles, daemons: Daemons) -> None:
    session, _door = opened(files, daemons)
    daemons.answer({"ok": True, "protocol": PROTOCOL})
    session.settle()
    daemons.answer({"ok": True, "denials": [], "audit_error": "disk full", "refused": {"count": 2, "why": "budget"}})
    ended = session.end()
    assert ended.audit_error == "disk full" and "disk full" in ended.trouble and ended.refused


# -- hostile review 8 ----------------------------------------------------------------


def test_a_refused_session_ends_at_once_and_asks_no_other_daemon(files: DaemonFiles, daemons: Daemons, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal stops the sandbox; the run's end must not wait for a second answer on that
    connection, nor hand the stopped sandbox's listener to a new daemon (even with a connection queued)."""
    monkeypatch.setattr(handover, "ping_or_hung", lambda files: (None, True))
    session, door = opened(files, daemons)
    queued = socket.create_connection(door.getsockname())  # the command connected before the refusal came
    daemons.answer({"ok": False, "error": "audit log /a: permission denied"})
    with pytest.raises(launch.ProxyDaemonError, match="refused the session"):
        session.settle()
    started = time.monotonic()
    ended = session.end()
    assert time.monotonic() - started < 0.5
    assert len(daemons.ends) == 1  # no daemon was asked again
    assert ended.denials == [] and session.conn is None and door.fileno() == -1
    queued.close()


def test_a_daemon_this_run_started_that_gave_up_is_not_waited_for_again(files: DaemonFiles, daemons: Daemons) -> None:
    daemons.started = [True]
    session, door = opened(files, daemons)
    queued = socket.create_connection(door.getsockname())
    with pytest.raises(launch.ProxyDaemonError, match="did not start within"):
        session.overdue()
    started = time.monotonic()
    session.end()
    assert time.monotonic() - started < 0.5 and len(daemons.ends) == 1
    queued.close()


def test_a_daemon_that_closed_before_the_request_was_sent_is_replaced(files: DaemonFiles, daemons: Daemons) -> None:
    """A daemon exiting on idle just after the run connected: the send fails, a new daemon is asked."""
    session = handover.Handover(files, dict(SPEC))
    session.reach()
    daemons.ends[0].close()  # gone before the namespace existed
    door = listener()
    session.send([door])  # type: ignore[list-item]
    assert len(daemons.ends) == 2 and daemons.replacing[1] == (1, 2)
    message, fds = daemons.request(1)
    assert message["op"] == "open" and len(fds) == 1
    daemons.answer({"ok": True, "protocol": PROTOCOL}, 1)
    session.settle()
    assert session.settled


def test_a_daemon_this_run_started_that_closed_before_the_send_fails_the_run(files: DaemonFiles, daemons: Daemons) -> None:
    daemons.started = [True]
    session = handover.Handover(files, dict(SPEC))
    session.reach()
    daemons.ends[0].close()
    with pytest.raises(launch.ProxyDaemonError, match="did not start"):
        session.send([listener()])  # type: ignore[list-item]
    assert len(daemons.ends) == 1


def test_an_answer_that_came_after_the_sandbox_ended_is_read_not_abandoned(files: DaemonFiles, daemons: Daemons) -> None:
    """The daemon answered, opened the door and took the queued connection between the sandbox's
    end and the run's end: the listener's queue is empty, but the session served something, so
    its denials must still be asked for."""
    session, door = opened(files, daemons)
    client = socket.create_connection(door.getsockname())
    daemons.answer({"ok": True, "protocol": PROTOCOL, "session_id": "s1"})  # the answer, unread
    served, _ = door.accept()  # the daemon's door took the connection: nothing waits in the queue
    daemons.answer({"ok": True, "denials": [{"host": "x.test", "port": 443}], "audit_error": None, "refused": None})
    ended = session.end()
    assert ended.denials == [{"host": "x.test", "port": 443}]
    daemons.request()
    assert daemons.request()[0] == {"op": "end", "session_id": "s1"}
    served.close()
    client.close()


def test_an_unanswered_session_with_nothing_queued_is_still_abandoned(files: DaemonFiles, daemons: Daemons) -> None:
    session, _door = opened(files, daemons)
    started = time.monotonic()
    ended = session.end()
    assert time.monotonic() - started < 0.5 and ended.denials == [] and session.conn is None


def test_a_real_daemon_that_served_before_the_run_read_its_answer_reports_the_denial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a real daemon: the sandbox's connection was served (denied) before the run read the
    answer, and nothing waits in the queue any more. The run's end must still collect the denial."""
    from tests.netkit import stop_daemon

    monkeypatch.setenv(launch.IDLE_ENV, "30")
    files = DaemonFiles(str(tmp_path / "run"), str(tmp_path / "state"))
    audit = tmp_path / "audit.jsonl"
    spec = {**SPEC, "session_id": "late1", "audit_path": str(audit), "allow": ["allowed.test"]}
    session = handover.Handover(files, spec)
    try:
        session.reach()  # cold: a real daemon is spawned
        door = listener()
        session.send([door])  # type: ignore[list-item]
        with socket.create_connection(door.getsockname(), timeout=30) as client:
            client.sendall(b"GET http://denied.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n")
            assert client.recv(64).startswith(b"HTTP/1.1 403")  # served: the daemon answered and its door took it
        ended = session.end()
        assert [(d["host"], d["port"]) for d in ended.denials] == [("denied.test", 80)], ended
        assert ended.trouble == ""
        control = handover.Handover(files, {**spec, "session_id": "late2"})  # the legitimate end of a settled session
        control.reach()
        control.send([listener()])  # type: ignore[list-item]
        control.wait()
        assert control.end().denials == [] and control.conn is None
    finally:
        stop_daemon(Path(files.runtime))


def test_an_answer_with_a_protocol_that_is_no_number_is_an_older_daemons(files: DaemonFiles, daemons: Daemons) -> None:
    session, _door = opened(files, daemons)
    daemons.request(0)
    daemons.answer({"ok": True, "protocol": "3"}, 0)  # not ours: a daemon that answers this way is replaced, no traceback
    session.settle()
    assert not session.settled and len(daemons.ends) == 2
