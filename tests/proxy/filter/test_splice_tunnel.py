from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from mitmproxy.test import tflow

from stockade.proxy.audit import AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.filter import splice_tunnel
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.tracking import Tracked

pytestmark = pytest.mark.skipif(not splice_tunnel.AVAILABLE, reason="needs os.splice (Linux)")


class Watchdog:
    def __init__(self) -> None:
        self.disarmed = 0

    @contextmanager
    def disarm(self) -> Iterator[None]:
        self.disarmed += 1
        try:
            yield
        finally:
            self.disarmed -= 1


async def tcp_pair() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, socket.socket]:
    """An asyncio stream (mitmproxy's side) connected over loopback TCP to a plain blocking peer socket."""
    listener = socket.create_server(("127.0.0.1", 0))
    peer = socket.create_connection(listener.getsockname())
    ours, _ = listener.accept()
    listener.close()
    peer.settimeout(10)
    reader, writer = await asyncio.open_connection(sock=ours)
    return reader, writer, peer


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(1 << 20, size - len(data)))
        if not chunk:
            break
        data += chunk
    return bytes(data)


@pytest.fixture
async def tunnel(make_spec: Callable[..., SessionSpec]) -> Any:
    registry = Registry()
    spec = make_spec()
    _token, session = registry.register(spec)
    record = AuditRecord(session=spec.session_id, command=[], scheme="tls", host="allowed.test", port=443, decision="allow", rule="r")
    client, server = tflow.tclient_conn(), tflow.tserver_conn()
    c_reader, c_writer, client_peer = await tcp_pair()
    s_reader, s_writer, server_peer = await tcp_pair()
    handler = SimpleNamespace(
        transports={client: SimpleNamespace(reader=c_reader, writer=c_writer), server: SimpleNamespace(reader=s_reader, writer=s_writer)},
        timeout_watchdog=Watchdog(),
    )
    t = SimpleNamespace(
        splicer=splice_tunnel.Splicer(handler, client, server, Tracked(session, record)),
        handler=handler, writers=(c_writer, s_writer), client_peer=client_peer, server_peer=server_peer, registry=registry,
        session=session,
    )  # fmt: skip
    yield t
    for sock in (client_peer, server_peer):
        sock.close()
    for writer in t.writers:
        writer.close()


async def wait_closed(writers: tuple[asyncio.StreamWriter, ...], timeout: float = 10) -> bool:
    for _ in range(int(timeout / 0.01)):
        if all(w.is_closing() for w in writers):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_moves_and_counts_both_ways(tunnel: Any) -> None:
    assert tunnel.splicer.start()
    assert tunnel.handler.timeout_watchdog.disarmed == 1
    up, down = os.urandom(3 << 20), os.urandom(5 << 20)

    def exchange() -> tuple[bytes, bytes]:
        tunnel.client_peer.sendall(up)
        tunnel.client_peer.shutdown(socket.SHUT_WR)
        got_up = recv_exactly(tunnel.server_peer, len(up))
        assert tunnel.server_peer.recv(1) == b""  # the half-close was passed on
        tunnel.server_peer.sendall(down)
        tunnel.server_peer.shutdown(socket.SHUT_WR)
        return got_up, recv_exactly(tunnel.client_peer, len(down))

    got_up, got_down = await asyncio.to_thread(exchange)
    assert (got_up, got_down) == (up, down)
    assert await wait_closed(tunnel.writers)  # handed back to mitmproxy, closed
    record = tunnel.splicer.tracked.record
    assert (record.bytes_up, record.bytes_down) == (len(up), len(down))
    assert tunnel.handler.timeout_watchdog.disarmed == 0


async def test_refuses_when_bytes_are_buffered(tunnel: Any) -> None:
    c_reader = tunnel.handler.transports[tunnel.splicer.client].reader
    c_reader.feed_data(b"not yet processed by mitmproxy")
    assert not tunnel.splicer.start()
    assert all(not w.is_closing() for w in tunnel.writers)
    assert tunnel.handler.timeout_watchdog.disarmed == 0
    assert all(w.transport.is_reading() for w in tunnel.writers)


async def test_refuses_foreign_transports(tunnel: Any) -> None:
    tunnel.handler.transports[tunnel.splicer.server] = SimpleNamespace(reader=object(), writer=object())
    assert not tunnel.splicer.start()


async def test_ended_session_cuts_a_spliced_tunnel(tunnel: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(splice_tunnel, "WATCH_INTERVAL", 0.05)
    assert tunnel.splicer.start()
    await asyncio.to_thread(tunnel.client_peer.sendall, b"x" * 1000)
    assert await asyncio.to_thread(recv_exactly, tunnel.server_peer, 1000) == b"x" * 1000
    tunnel.registry.end(tunnel.session.spec.session_id)
    assert await wait_closed(tunnel.writers)
    assert await asyncio.to_thread(tunnel.client_peer.recv, 1) == b""
    assert await asyncio.to_thread(tunnel.server_peer.recv, 1) == b""
