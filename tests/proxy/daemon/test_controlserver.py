"""The control server, in process: its fences and what each op answers (end to end, through a real daemon: test_daemon.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stockade.proxy.control import MAX_LINE, PROTOCOL, SessionSpec
from stockade.proxy.daemon import controlserver
from stockade.proxy.daemon.controlserver import ControlReader, ControlServer, peer_uid
from stockade.proxy.daemon.doorkeeper import Doors
from stockade.proxy.filter.sessions import Registry


class FakeHost:
    """The daemon as the control server sees it."""

    def __init__(self) -> None:
        self.port, self.exiting, self.clients, self.touched = 3128, False, 2, 0

    def touch(self) -> None:
        self.touched += 1


@pytest.fixture
def server() -> ControlServer:
    splicing = SimpleNamespace(spliced_total=5, bodies_spliced=7)
    return ControlServer(FakeHost(), Registry(), Doors(lambda client, session: None), splicing)  # type: ignore[arg-type]


def host(server: ControlServer) -> FakeHost:
    assert isinstance(server.host, FakeHost)
    return server.host


def register(server: ControlServer, spec: SessionSpec, owned: set[str]) -> dict[str, Any]:
    return server.handle({"op": "register", "spec": spec.to_dict()}, owned)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder whose socket paths fit AF_UNIX's 108 bytes (pytest's tmp_path may not)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as name:
        yield Path(name)


# -- the ops ------------------------------------------------------------------------------


def test_ping_says_the_daemon_s_state(server: ControlServer) -> None:
    host(server).exiting = True
    assert server.handle({"op": "ping"}, set()) == {
        "ok": True, "port": 3128, "pid": os.getpid(), "protocol": PROTOCOL, "exiting": True,
        "sessions": 0, "clients": 2, "spliced": 5, "bodies": 7,
    }  # fmt: skip


def test_register_owns_the_session_on_this_connection(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    owned: set[str] = set()
    spec = make_spec()
    reply = register(server, spec, owned)
    assert reply["ok"] is True and reply["port"] == 3128 and reply["session_id"] == spec.session_id
    assert server.registry.lookup(reply["token"]) is server.registry.get(spec.session_id) is not None
    assert owned == {spec.session_id} and host(server).touched == 1
    assert register(server, spec, owned) == {"ok": False, "error": f"session {spec.session_id!r} is already registered"}


def test_register_is_refused_while_exiting_and_may_be_retried(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    host(server).exiting = True
    owned: set[str] = set()
    assert register(server, make_spec(), owned) == {"ok": False, "error": "the proxy daemon is exiting", "retry": True}
    assert owned == set() and len(server.registry) == 0


async def test_listen_only_for_a_session_registered_on_this_connection(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    owned: set[str] = set()
    register(server, spec, owned)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        fds = [listener.fileno()]
        for session_id, on in ((spec.session_id, set()), ("nobody", owned)):  # another connection's session; no session
            reply = server.handle({"op": "listen", "session_id": session_id}, on, fds)
            assert reply == {"ok": False, "error": f"session {session_id!r} was not registered on this connection"}
        assert fds == [listener.fileno()] and server.doors.by_session == {}
        fds = [os.dup(listener.fileno())]
        assert server.handle({"op": "listen", "session_id": spec.session_id}, owned, fds) == {"ok": True} and fds == []
        assert server.handle({"op": "listen", "session_id": spec.session_id}, owned, []) == {
            "ok": False, "error": f"session {spec.session_id!r} already has its listener",
        }  # fmt: skip
    server.doors.close_all()


async def test_end_closes_the_door_and_reports_its_refusals(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    owned: set[str] = set()
    register(server, spec, owned)
    listener = socket.create_server(("127.0.0.1", 0))
    assert server.handle({"op": "listen", "session_id": spec.session_id}, owned, [listener.detach()]) == {"ok": True}
    server.doors.by_session[spec.session_id].refused = 2
    reply = server.handle({"op": "end", "session_id": spec.session_id}, owned)
    assert reply == {"ok": True, "denials": [], "audit_error": None, "refused": {"count": 2, "why": ""}, "always": []}
    assert owned == set() and server.registry.get(spec.session_id) is None and server.doors.by_session == {}
    assert host(server).touched == 2
    assert server.handle({"op": "end", "session_id": spec.session_id}, owned) == {"ok": False, "error": f"unknown session {spec.session_id!r}"}


async def test_open_registers_and_listens_but_accepts_only_once_told(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    owned: set[str] = set()
    afterwards: list[Callable[[], None]] = []
    listener = socket.create_server(("127.0.0.1", 0))
    fds = [listener.detach()]
    reply = server.handle({"op": "open", "spec": spec.to_dict()}, owned, fds, afterwards)
    assert reply == {"ok": True, "protocol": PROTOCOL, "session_id": spec.session_id} and fds == []
    assert owned == {spec.session_id} and spec.session_id in server.doors.by_session
    door = server.doors.by_session[spec.session_id]
    assert door._accepting is None and len(afterwards) == 1  # not accepting before the reply is out
    afterwards[0]()
    assert door._accepting is not None
    server.handle({"op": "end", "session_id": spec.session_id}, owned)


@pytest.mark.parametrize("count", [0, 2])
def test_open_needs_one_listener_per_door_and_registers_nothing_without(
    server: ControlServer, make_spec: Callable[..., SessionSpec], count: int
) -> None:
    spec = make_spec()
    owned: set[str] = set()
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(count)]
    fds = [sock.fileno() for sock in sockets]
    reply = server.handle({"op": "open", "spec": spec.to_dict()}, owned, fds)
    assert reply == {"ok": False, "error": "open needs one listening socket, one more for each of the spec's forwards, and those interception names"}
    assert owned == set() and server.registry.get(spec.session_id) is None
    for sock in sockets:
        sock.close()


def test_open_with_a_socket_that_is_not_listening_leaves_no_session(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    owned: set[str] = set()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as idle:
        reply = server.handle({"op": "open", "spec": spec.to_dict()}, owned, [os.dup(idle.fileno())])
    assert reply == {"ok": False, "error": "listen needs a listening TCP socket, and interception's sockets of their kinds"}
    assert owned == set() and server.registry.get(spec.session_id) is None and server.doors.by_session == {}


def test_open_is_refused_while_exiting_and_may_be_retried(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    host(server).exiting = True
    with socket.create_server(("127.0.0.1", 0)) as listener:
        reply = server.handle({"op": "open", "spec": make_spec().to_dict()}, set(), [os.dup(listener.fileno())])
    assert reply["retry"] is True and reply["ok"] is False


async def test_a_starting_runs_connection_is_served_like_any_other(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    server.serve_descriptor(theirs.detach())
    spec = make_spec()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        reply = await exchange(ours, json.dumps({"op": "open", "spec": spec.to_dict()}).encode() + b"\n", [listener.fileno()])
    assert reply["ok"] is True and reply["protocol"] == PROTOCOL
    await asyncio.sleep(0)
    assert server.doors.by_session[spec.session_id]._accepting is not None  # accepting once the reply was sent
    ours.close()
    for _ in range(50):
        if server.registry.get(spec.session_id) is None:
            break
        await asyncio.sleep(0.01)
    assert server.registry.get(spec.session_id) is None  # the connection's end ended the session
    server.close()


def test_an_unknown_op_is_answered(server: ControlServer) -> None:
    assert server.handle({"op": "reboot"}, set()) == {"ok": False, "error": "unknown op 'reboot'"}


# -- a connection ------------------------------------------------------------------------


async def exchange(conn: socket.socket, data: bytes, fds: list[int] | None = None) -> dict[str, Any]:
    """Send `data` (with `fds`) and read one reply line."""
    loop = asyncio.get_running_loop()
    if fds:
        socket.send_fds(conn, [data], fds)
    else:
        await loop.sock_sendall(conn, data)
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = await asyncio.wait_for(loop.sock_recv(conn, 65536), 5)
        if not chunk:
            break
        reply += chunk
    return dict(json.loads(reply))


async def serving(server: ControlServer) -> tuple[socket.socket, asyncio.Task[None]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    return ours, asyncio.get_running_loop().create_task(server._serve(theirs))


async def test_another_uid_is_refused(server: ControlServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(controlserver, "peer_uid", lambda sock: os.getuid() + 1)
    ours, task = await serving(server)
    assert await exchange(ours, b'{"op":"ping"}\n') == {"ok": False, "error": "only the daemon's own user may use it"}
    await asyncio.wait_for(task, 5)
    ours.close()


async def test_a_bad_request_is_answered_and_the_connection_goes_on(server: ControlServer) -> None:
    ours, task = await serving(server)
    assert (await exchange(ours, b"not json\n"))["ok"] is False
    assert (await exchange(ours, b'{"op":"ping"}\n'))["ok"] is True
    ours.close()
    await asyncio.wait_for(task, 5)


async def test_too_long_a_request_is_answered_and_the_connection_closed(server: ControlServer) -> None:
    ours, task = await serving(server)
    assert await exchange(ours, b"x" * (MAX_LINE + 2)) == {"ok": False, "error": "control message too long"}
    await asyncio.wait_for(task, 5)
    ours.close()


async def test_descriptors_a_request_did_not_keep_are_closed(server: ControlServer) -> None:
    ours, task = await serving(server)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        before = len(os.listdir("/proc/self/fd"))
        assert (await exchange(ours, b'{"op":"ping"}\n', [listener.fileno()]))["ok"] is True
        assert len(os.listdir("/proc/self/fd")) == before  # the copy that came with the ping is gone
    ours.close()
    await asyncio.wait_for(task, 5)


async def test_a_connection_that_closes_ends_its_sessions(server: ControlServer, make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    ours, task = await serving(server)
    assert (await exchange(ours, json.dumps({"op": "register", "spec": spec.to_dict()}).encode() + b"\n"))["ok"] is True
    assert server.registry.get(spec.session_id) is not None
    ours.close()
    await asyncio.wait_for(task, 5)
    assert server.registry.get(spec.session_id) is None and host(server).touched == 2


async def test_reader_hands_each_line_the_descriptors_that_came_with_it() -> None:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    lines = ControlReader(theirs)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        socket.send_fds(ours, [b'{"op":"listen"}\n{"op":'], [listener.fileno()])
        line, fds = await asyncio.wait_for(lines.readline(), 5)
        assert line == b'{"op":"listen"}\n' and len(fds) == 1
        os.close(fds[0])
        ours.sendall(b'"ping"}\n')
        assert await asyncio.wait_for(lines.readline(), 5) == (b'{"op":"ping"}\n', [])
        ours.close()
        assert await asyncio.wait_for(lines.readline(), 5) == (b"", [])
    theirs.close()


def test_peer_uid_is_the_other_end_s() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert peer_uid(theirs) == os.getuid()


async def test_the_socket_is_ours_until_replaced_or_removed(server: ControlServer, short_dir: Path) -> None:
    path = short_dir / "proxy.sock"
    path.write_text("left by a daemon that died")
    server.start(path)
    try:
        assert os.stat(path).st_mode & 0o777 == 0o600 and server.still_ours()
        path.unlink()
        assert not server.still_ours()  # removed
        with socket.socket(socket.AF_UNIX) as newer:
            newer.bind(str(path))
            assert not server.still_ours()  # a newer daemon's
    finally:
        server.close()
