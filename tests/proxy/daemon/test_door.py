"""A session's door, in process: what it refuses before mitmproxy sees a byte (end to end: test_daemon.py)."""

from __future__ import annotations

import asyncio
import socket
from types import SimpleNamespace

import pytest

from stockade.proxy.daemon import door
from stockade.proxy.rules import budget


def session(stopped: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(stopped=stopped, spec=SimpleNamespace(session_id="s"))


async def closed_by_peer(sock: socket.socket) -> bool:
    """True once the door closed this connection (EOF or reset), False if it stays open for a second."""
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        return await asyncio.wait_for(loop.sock_recv(sock, 1), 1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def answer(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    data = b""
    while chunk := await asyncio.wait_for(loop.sock_recv(sock, 4096), 1):
        data += chunk
    return data


async def test_connections_over_the_cap_are_answered_and_silent_ones_go_with_the_door(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "MAX_PER_SESSION", 2)
    listener = socket.create_server(("127.0.0.1", 0))
    the_budget = budget.Budget()
    the_door = door.Door(session(), listener, lambda client, s: None, the_budget)  # type: ignore[arg-type]
    the_door.open()
    address = listener.getsockname()
    first, second = socket.create_connection(address), socket.create_connection(address)
    await asyncio.sleep(0.1)
    third = socket.create_connection(address)
    try:
        said = await answer(third)  # over the cap: told why, then closed
        assert said.startswith(b"HTTP/1.1 503 ") and b"stockade: the sandbox held 2 proxy connections at once" in said, said
        assert not await closed_by_peer(first) and not await closed_by_peer(second)  # the control: within it, waiting
        assert (the_door.live, the_door.refused) == (2, 1) and the_budget.live == {"s": 2}
        the_door.close()
        assert await closed_by_peer(first) and await closed_by_peer(second)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address).close()
        assert the_door.live == 0 and the_budget.live == {}
    finally:
        for sock in (first, second, third):
            sock.close()


async def test_a_stopped_session_s_door_takes_no_connection() -> None:
    stopped = session("audit log unwritable: disk full")
    listener = socket.create_server(("127.0.0.1", 0))
    the_door = door.Door(stopped, listener, lambda client, s: None, budget.Budget())  # type: ignore[arg-type]
    the_door.open()
    conn = socket.create_connection(listener.getsockname())
    try:
        assert await closed_by_peer(conn)
        stopped.stopped = None  # the control: a live session's door keeps it, waiting for the request
        again = socket.create_connection(listener.getsockname())
        assert not await closed_by_peer(again)
        again.close()
    finally:
        conn.close()
        the_door.close()


async def test_new_connections_past_the_burst_wait_in_the_backlog(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox opening connections as fast as it can took the event loop every session shares;
    past CONNECTION_BURST a door accepts CONNECTION_RATE a second, the rest wait in the kernel."""
    monkeypatch.setattr(door, "CONNECTION_BURST", 3)
    monkeypatch.setattr(door, "CONNECTION_RATE", 2.0)
    listener = socket.create_server(("127.0.0.1", 0))
    the_door = door.Door(session(), listener, lambda client, s: None, budget.Budget())  # type: ignore[arg-type]
    the_door.open()
    clients = [socket.create_connection(listener.getsockname()) for _ in range(8)]
    try:
        await asyncio.sleep(0.4)
        assert 3 <= the_door.live <= 5, the_door.live  # the burst, and at most a slot or two more
        assert not await closed_by_peer(clients[0]) and not await closed_by_peer(clients[-1])  # none refused: they wait
    finally:
        the_door.close()
        for c in clients:
            c.close()


async def test_a_burst_of_connections_is_accepted_at_once() -> None:
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    the_door = door.Door(session(), listener, lambda client, s: None, budget.Budget())  # type: ignore[arg-type]
    the_door.open()
    clients = [socket.create_connection(listener.getsockname()) for _ in range(40)]
    try:
        await asyncio.sleep(0.4)
        assert the_door.live == 40
    finally:
        the_door.close()
        for c in clients:
            c.close()


async def test_a_door_closed_twice_is_closed_once() -> None:
    """The daemon's shutdown closes every door, and then each control connection's clean-up closes its
    session's door again: the second close raised on the closed listener and skipped the session's end."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=4)
    held = budget.Budget()
    the_door = door.Door(session(), listener, lambda client, s: None, held)  # type: ignore[arg-type]
    the_door.open()
    the_door.close()
    the_door.close()
    assert listener.fileno() == -1


async def test_what_a_forwarded_client_sends_waits_for_the_connects_answer_and_a_refusal_drops_it() -> None:
    """The door feeds mitmproxy `CONNECT target` first; the client's own bytes reach mitmproxy only after
    a 200, so nothing sent ahead of a refusal (a smuggled CONNECT, a request) is ever read as a request."""
    for allowed in (True, False):
        server, client = socket.socketpair()
        client.sendall(b"CONNECT allowed.test:80 HTTP/1.1\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n")
        reader, writer = await door._tunnelled(server, "203.0.113.9:80")
        await asyncio.sleep(0.05)  # the loop has read what the client sent, if anything would
        first = await reader.readuntil(b"\r\n\r\n")
        assert first.startswith(b"CONNECT 203.0.113.9:80 HTTP/1.1") and reader._buffer == b""  # type: ignore[attr-defined]
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n" if allowed else b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
        if allowed:
            assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 1)).startswith(b"CONNECT allowed.test:80")
        else:
            await asyncio.sleep(0.05)
            assert reader._buffer == b"" and await closed_by_peer(client)  # type: ignore[attr-defined]
        client.close()
        writer.close()
