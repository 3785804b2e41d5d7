"""The daemon's doors, in process: which sockets open a door, and what closing one records (end to end: test_daemon.py)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import pytest

from stockade.proxy.audit import AuditError
from stockade.proxy.control import SessionSpec
from stockade.proxy.daemon.doorkeeper import Doors
from stockade.proxy.filter.sessions import Registry, Session


@pytest.fixture
def registry() -> Registry:
    return Registry()


def register(registry: Registry, make_spec: Callable[..., SessionSpec]) -> Session:
    _token, session = registry.register(make_spec())
    return session


def closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def doors() -> Doors:
    return Doors(lambda client, session: None)  # type: ignore[arg-type]


async def test_a_session_gets_one_door_on_one_listening_socket(registry: Registry, make_spec: Callable[..., SessionSpec]) -> None:
    session = register(registry, make_spec)
    sid = session.spec.session_id
    the_doors = doors()
    first, second = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    fds = [first.detach()]
    assert the_doors.listen(sid, session, fds) is None and fds == []  # taken: the door holds it
    assert set(the_doors.by_session) == {sid} and the_doors.budget.live == {sid: 0}
    fds = [second.fileno()]
    assert the_doors.listen(sid, session, fds) == f"session {sid!r} already has its listener"
    assert fds == [second.fileno()] and not closed(second.fileno())  # left to the caller to close
    the_doors.close_all()
    second.close()


@pytest.mark.parametrize("count", [0, 2])
async def test_listen_needs_one_socket_per_door(registry: Registry, make_spec: Callable[..., SessionSpec], count: int) -> None:
    session = register(registry, make_spec)
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(count)]
    fds = [s.fileno() for s in listeners]
    the_doors = doors()
    assert (
        the_doors.listen(session.spec.session_id, session, fds)
        == "listen needs one listening socket, one more for each of the spec's forwards, and those interception names"
    )
    assert fds == [s.fileno() for s in listeners] and the_doors.by_session == {}
    for s in listeners:
        s.close()


@pytest.mark.parametrize("kind", ["unlistening tcp", "udp"])
async def test_listen_refuses_and_closes_a_socket_that_is_not_listening(registry: Registry, make_spec: Callable[..., SessionSpec], kind: str) -> None:
    session = register(registry, make_spec)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "unlistening tcp" else socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    fd = sock.detach()
    the_doors = doors()
    assert (
        the_doors.listen(session.spec.session_id, session, [fd]) == "listen needs a listening TCP socket, and interception's sockets of their kinds"
    )
    assert the_doors.by_session == {} and closed(fd)


async def test_closing_a_door_records_what_its_budget_refused_once(
    registry: Registry, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    session = register(registry, make_spec)
    sid = session.spec.session_id
    the_doors = doors()
    listener = socket.create_server(("127.0.0.1", 0))
    address = listener.getsockname()
    assert the_doors.listen(sid, session, [listener.detach()]) is None
    door = the_doors.by_session[sid]
    door.refused, door.refusal = 3, "the sandbox held 2 proxy connections at once"
    door.first_refused, door.last_refused = "2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z"
    the_doors.close(sid)
    assert the_doors.by_session == {} and the_doors.budget.live == {}
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5).close()
    assert the_doors.refused(sid) == {"count": 3, "why": "the sandbox held 2 proxy connections at once"}
    assert the_doors.refused(sid) is None  # said once, in the end reply
    (record,) = audit_lines()
    assert (record["session"], record["command"], record["scheme"], record["host"], record["port"]) == (sid, session.spec.command, "connect", "*", 0)
    assert (record["decision"], record["rule"], record["repeats"]) == ("deny", "the sandbox held 2 proxy connections at once", 3)
    assert (record["time"], record["last_time"]) == ("2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z")
    the_doors.close(sid)  # a session without a door (any more): nothing happens
    assert len(audit_lines()) == 1


async def test_a_door_that_refused_nothing_records_nothing(
    registry: Registry, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    session = register(registry, make_spec)
    the_doors = doors()
    assert the_doors.listen(session.spec.session_id, session, [socket.create_server(("127.0.0.1", 0)).detach()]) is None
    the_doors.close(session.spec.session_id)
    assert the_doors.refused(session.spec.session_id) is None and audit_lines() == []


async def test_a_broken_audit_log_does_not_keep_a_door_open(
    registry: Registry, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = register(registry, make_spec)
    sid = session.spec.session_id
    the_doors = doors()
    assert the_doors.listen(sid, session, [socket.create_server(("127.0.0.1", 0)).detach()]) is None
    the_doors.by_session[sid].refused = 1

    def broken(record: object) -> None:
        raise AuditError("cannot write audit log")

    monkeypatch.setattr(session.writer, "write", broken)
    the_doors.close(sid)  # no exception: the run's end reports the broken log
    assert the_doors.by_session == {} and the_doors.refused(sid) == {"count": 1, "why": ""}


async def test_close_all_stops_every_door(registry: Registry, make_spec: Callable[..., SessionSpec]) -> None:
    the_doors = doors()
    addresses = []
    for _ in range(2):
        session = register(registry, make_spec)
        listener = socket.create_server(("127.0.0.1", 0))
        addresses.append(listener.getsockname())
        assert the_doors.listen(session.spec.session_id, session, [listener.detach()]) is None
    the_doors.close_all()
    for address in addresses:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address, timeout=5).close()


def _family(address: str = "127.0.0.1") -> list[socket.socket]:
    datagrams = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_DGRAM)
    datagrams.bind((address, 0))
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return [socket.create_server((address, 0), family=family), datagrams, socket.create_server((address, 0), family=family)]


def _log() -> socket.socket:
    """A netlink socket, as the packet log is (bwrap/parts/interception.py binds it to NFLOG; any will do here)."""
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)


def _interception_sockets(ipv6: bool = False) -> list[socket.socket]:
    return [*_family(), _log(), *(_family("::1") if ipv6 else [])]


@pytest.mark.parametrize("ipv6", [False, True])
async def test_an_intercepting_session_gets_transparent_doors_a_resolver_and_a_packet_log(
    registry: Registry, make_spec: Callable[..., SessionSpec], ipv6: bool
) -> None:
    _token, session = registry.register(make_spec(intercept=7 if ipv6 else 4))
    sid = session.spec.session_id
    the_doors = doors()
    given = [socket.create_server(("127.0.0.1", 0)), *_interception_sockets(ipv6)]
    fds = [each.detach() for each in given]
    taken = list(fds)
    assert the_doors.listen(sid, session, fds) is None and fds == []
    assert [door.transparent for door in the_doors.forwarded[sid]] == [True] * (2 if ipv6 else 1)
    assert len(the_doors.resolvers[sid].datagrams) == (2 if ipv6 else 1) and sid in the_doors.packet_logs
    the_doors.close(sid)
    assert sid not in the_doors.resolvers and sid not in the_doors.packet_logs and all(closed(fd) for fd in taken)


@pytest.mark.parametrize("swap", ["udp first", "tcp resolver not listening", "no packet log"])
async def test_an_intercepting_session_refuses_sockets_of_the_wrong_kinds(
    registry: Registry, make_spec: Callable[..., SessionSpec], swap: str
) -> None:
    _token, session = registry.register(make_spec(intercept=4))
    transparent, datagrams, stream, log = _interception_sockets()
    if swap == "udp first":
        transparent, datagrams = datagrams, transparent
    elif swap == "no packet log":
        log.close()
        log = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    else:
        stream.close()
        stream = socket.socket()
    fds = [socket.create_server(("127.0.0.1", 0)).detach(), transparent.detach(), datagrams.detach(), stream.detach(), log.detach()]
    the_doors = doors()
    assert (
        the_doors.listen(session.spec.session_id, session, list(fds))
        == "listen needs a listening TCP socket, and interception's sockets of their kinds"
    )
    assert the_doors.by_session == {} and the_doors.resolvers == {} and all(closed(fd) for fd in fds)
