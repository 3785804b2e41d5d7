"""A session's own door: the listening socket inside its sandbox's network namespace, served by the daemon.

Why: `stockade run` used to accept on this socket itself and relay every byte
to the daemon's loopback port, stamping the session's credential on the first
request line. On a two-core machine that second copy of every byte cost a
third of the throughput. Now the run hands the listener itself to the daemon
(SCM_RIGHTS on its control connection, which only the registering process
holds), and a connection belongs to a session by the door it came in
through: no credential ever travels on the sandbox's connection.

Failure stays closed: the daemon holds the only copy of the listener, so when
it dies the door closes and connecting from inside is refused; when the
session ends the door closes too, and the filter cuts what is still open.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from mitmproxy import connection, ctx
from mitmproxy.proxy import layers, mode_specs
from mitmproxy.proxy.mode_servers import ProxyConnectionHandler

from stockade.proxy.daemon.accepting import accept
from stockade.proxy.filter.sessions import Session
from stockade.proxy.rules.budget import Budget, Pace
from stockade.proxy.rules.fake_names import is_fake

logger = logging.getLogger(__name__)

# Fairness: a sandbox that opens connections as fast as it can (each one a new mitmproxy handler)
# takes the event loop every session shares. Past a burst, a door accepts CONNECTION_RATE a
# second; the rest wait in the kernel's backlog, which costs the daemon nothing.
CONNECTION_RATE = 100.0
CONNECTION_BURST = 256
FIRST_BYTE_TIMEOUT = 600.0  # mitmproxy's own idle timeout for a connection that says nothing
NOT_HTTP = b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 58\r\n\r\nstockade: only HTTP proxy requests reach the network proxy"
_REGULAR = mode_specs.ProxyMode.parse("regular")
SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h: where a redirected connection was going
IP6T_SO_ORIGINAL_DST = 80  # linux/netfilter_ipv6/ip6_tables.h: the same for IPv6, at IPPROTO_IPV6
ATTRIBUTION_WAIT = 0.5  # seconds a connection waits for its process to be named, at most; then it has none
_LOOKUPS: Any = None


def _lookups() -> Any:
    """The daemon's threads for /proc lookups (two: one slow sandbox leaves the other to the rest)."""
    global _LOOKUPS
    if _LOOKUPS is None:
        from concurrent.futures import ThreadPoolExecutor

        _LOOKUPS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="attribution")
    return _LOOKUPS


HELD_LIMIT = 65536  # a forwarded connection's bytes held until its CONNECT is answered, before reading pauses

Bind = Callable[[connection.Client, Session, bool, "dict[str, object] | None"], None]


class Door:
    """Accepts on one session's listener and hands each connection to mitmproxy, bound to that session."""

    def __init__(
        self, session: Session, listener: socket.socket, bind: Bind, budget: Budget, target: str | None = None, transparent: bool = False,
        attributor: Any = None,
    ) -> None:  # fmt: skip
        self.session = session
        self.listener = listener
        # None: the proxy's door; else an allow entry (a host loopback port, bwrap/parts/forwards.py): each
        # connection is served as a CONNECT to it, so it is judged and recorded like any other
        self.target = target
        # the door of every other TCP connection of the sandbox (bwrap/parts/interception.py): each is served
        # as a CONNECT to where its client asked, by name when the sandbox's resolver gave the address
        self.transparent = transparent
        self.bind = bind
        self.budget = budget
        self.live = 0
        self.refused = 0  # connections over the session's budget (budget.py)
        self.refusal = ""  # why the last of them was refused
        self.first_refused = ""  # when the first was, and the last (audit.now_iso)
        self.last_refused = ""
        self._pace = Pace(CONNECTION_RATE, CONNECTION_BURST)
        self._accepting: asyncio.Task[None] | None = None
        self._tasks: dict[socket.socket, asyncio.Task[None]] = {}  # every connection's (asyncio keeps only weak references)
        self._unspoken: set[socket.socket] = set()  # accepted, first byte not seen yet
        self._attributor = attributor  # proxy/daemon/attribution.Attributor: the session's, shared by its doors; None: none said

    def open(self) -> None:
        self.budget.open(self.session.spec.session_id)
        self.listener.setblocking(False)
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    def close(self) -> None:
        """Stop accepting; connections that have not spoken yet go too.

        Connections already handed to mitmproxy stay with it: the filter cuts
        them (the session is stopped), and mitmproxy's teardown writes their records.
        Closing again does nothing: the daemon's shutdown and the session's end may both ask.
        """
        if self.listener.fileno() == -1:
            return
        if self._accepting is not None:
            asyncio.get_running_loop().remove_reader(self.listener.fileno())  # before its number can be reused
            self._accepting.cancel()
        self.budget.close(self.session.spec.session_id)
        for conn in list(self._unspoken):
            task = self._tasks.get(conn)
            if task is not None:
                task.cancel()
        self.listener.close()

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            delay = self._pace.delay(time.monotonic())
            if delay > 0:
                await asyncio.sleep(delay)
            conn = await accept(self.listener, f"session {self.session.spec.session_id}'s door")
            if conn is None:
                return
            if self.session.stopped:
                conn.close()
                continue
            refusal = self.budget.admit(self.session.spec.session_id)
            if refusal is not None:
                self._refuse(conn, refusal)
                continue
            self.live += 1
            # The task may run up to its first wait before create_task returns (eager task factories):
            # it keeps `_unspoken` itself, and only the strong reference is added here.
            self._tasks[conn] = task = loop.create_task(self._serve(conn))
            task.add_done_callback(functools.partial(self._forget, conn))

    def _forget(self, conn: socket.socket, _task: asyncio.Task[None]) -> None:
        self._tasks.pop(conn, None)

    async def _serve(self, conn: socket.socket) -> None:
        handed = False
        self._unspoken.add(conn)
        try:
            conn.setblocking(False)
            process = await self._who(conn)
            if self.transparent:
                target = self._asked_for(conn)
                if target is None:
                    return
                reader, writer = await _tunnelled(conn, target)
            elif self.target is not None:
                reader, writer = await _tunnelled(conn, self.target)
            elif not await _speaks_http(conn):
                return
            else:
                reader, writer = await asyncio.open_connection(sock=conn)
            handed = True
            self._unspoken.discard(conn)
            await self._hand_over(reader, writer, process)
        except (TimeoutError, OSError):
            pass
        except Exception:  # a fault of ours: the connection goes, the daemon stays, the log says why
            logger.exception("session %s: a connection failed", self.session.spec.session_id)
        finally:
            self.live -= 1
            self.budget.release(self.session.spec.session_id)
            self._unspoken.discard(conn)
            if not handed:
                conn.close()

    def _asked_for(self, conn: socket.socket) -> str | None:
        """HOST:PORT the client connected to, before the namespace's rule turned it to this door:
        the name when the sandbox's resolver gave that address out; None (recorded) for an address
        of the resolver's block it never gave, which names nothing."""
        address, port = self._original(conn)
        if conn.family == socket.AF_INET6:
            return f"[{address}]:{port}"
        if not is_fake(address):
            return f"{address}:{port}"
        name = self.session.names.name(address)
        if name is None:
            from stockade.proxy.audit import AuditError, AuditRecord

            spec = self.session.spec
            with contextlib.suppress(AuditError):
                self.session.writer.write(AuditRecord(
                    **spec.who(), scheme="connect", host=address, port=port, decision="deny",
                    rule="an address of the sandbox's resolver that it never gave out",
                ))  # fmt: skip
            return None
        return f"{name}:{port}"

    def _refuse(self, conn: socket.socket, why: str) -> None:
        """Answer at once and close: the connection is never read, so it costs nothing to hold."""
        from stockade.proxy.audit import now_iso

        self.refused += 1
        self.refusal = why
        self.last_refused = now_iso()
        self.first_refused = self.first_refused or self.last_refused
        body = f"stockade: {why}\n".encode()
        head = f"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        conn.setblocking(False)
        with contextlib.suppress(OSError):
            conn.recv(65536)  # what already came is taken, so closing sends a FIN after the answer, not a reset
        with contextlib.suppress(OSError):
            conn.send(head + body)
            conn.shutdown(socket.SHUT_WR)
        conn.close()

    async def _who(self, conn: socket.socket) -> dict[str, object] | None:
        """The process inside that opened the connection (proxy/daemon/attribution.py), where the run said
        which sandbox's processes to look among; it is waiting for its answer, so still there. Read on a
        worker thread, for at most ATTRIBUTION_WAIT: a sandbox of many processes never holds the loop
        every session shares."""
        if self._attributor is None:
            return None
        try:
            local = self._original(conn) if self.transparent else conn.getsockname()
            peer = conn.getpeername()
            loop = asyncio.get_running_loop()
            found = await asyncio.wait_for(loop.run_in_executor(_lookups(), self._attributor.who, peer, local), ATTRIBUTION_WAIT)
        except (OSError, TimeoutError):
            return None
        return found if isinstance(found, dict) else None

    @staticmethod
    def _original(conn: socket.socket) -> tuple[str, int]:
        """Where a redirected connection was going, as its client's socket still says (address, port)."""
        if conn.family == socket.AF_INET6:  # sockaddr_in6: family, port, flow info, address
            raw = conn.getsockopt(socket.IPPROTO_IPV6, IP6T_SO_ORIGINAL_DST, 28)
            return socket.inet_ntop(socket.AF_INET6, raw[8:24]), int.from_bytes(raw[2:4], "big")
        raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        return socket.inet_ntoa(raw[4:8]), int.from_bytes(raw[2:4], "big")

    async def _hand_over(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, process: dict[str, object] | None) -> None:
        """What mitmproxy's own server does with an accepted connection, with the session bound first."""
        proxyserver = ctx.master.addons.get("proxyserver")
        handler = ProxyConnectionHandler(ctx.master, reader, writer, ctx.options, _REGULAR)
        handler.layer = layers.modes.HttpProxy(handler.layer.context)
        self.bind(handler.client, self.session, self.target is not None, process)  # a transparent door's tunnel is judged as a proxied one
        with proxyserver.register_connection(handler.client.id, handler):
            await handler.handle_client()


class _HeldUntilAnswered(asyncio.StreamReaderProtocol):
    """A forwarded or transparent connection's protocol: what the client sends is held back until
    mitmproxy has answered the CONNECT the door fed it, so the only request it can read first is
    that CONNECT. Refused, the held bytes are dropped and the connection aborted: nothing the
    client sent after a refusal is ever read as a request of its own."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        super().__init__(reader, loop=asyncio.get_running_loop())
        self.held = bytearray()
        self.answered = False
        self.refused = False
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.answered:
            super().data_received(data)
            return
        self.held += data
        if len(self.held) >= HELD_LIMIT and isinstance(self._transport, asyncio.ReadTransport):
            self._transport.pause_reading()  # the kernel's buffer holds the rest, at no cost to the daemon

    def release(self) -> None:
        """The CONNECT was allowed: the held bytes go to mitmproxy, and reading goes on."""
        self.answered = True
        held, self.held = bytes(self.held), bytearray()
        if held:
            super().data_received(held)
        if isinstance(self._transport, asyncio.ReadTransport) and not self._transport.is_reading():
            self._transport.resume_reading()

    def refuse(self) -> None:
        self.refused = True
        self.held.clear()


class _ConnectAnswer(asyncio.StreamWriter):
    """A forwarded connection's writer: mitmproxy's answer to the CONNECT it was fed is taken out;
    after a 200 the rest is the origin's, anything else (a refusal) aborts the connection."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: _HeldUntilAnswered, reader: asyncio.StreamReader) -> None:
        # built on the transport itself: a second StreamWriter over it would close it when collected
        super().__init__(transport, protocol, reader, asyncio.get_running_loop())
        self._held = protocol
        self._head = b""
        self._answered = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._answered:
            super().write(data)
            return
        self._head += bytes(data)
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            if len(self._head) > 65536:
                self._held.refuse()
                self.transport.abort()
            return
        head, rest = self._head[:end], self._head[end + 4 :]
        self._answered = True
        if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
            self._held.refuse()  # the daemon's record says why; the client sees the connection end
            self.transport.abort()
            return
        if rest:
            super().write(rest)
        self._held.release()


async def _tunnelled(conn: socket.socket, target: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams for a forwarded connection that read as `CONNECT target` followed by what the
    client sends once it was allowed; the answer to the CONNECT never reaches the client (_ConnectAnswer)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**16, loop=loop)
    reader.feed_data(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode("ascii"))  # before any byte of the client's
    protocol = _HeldUntilAnswered(reader)
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=conn)
    return reader, _ConnectAnswer(transport, protocol, reader)


async def _speaks_http(conn: socket.socket) -> bool:
    """Wait for the first byte without taking it: an HTTP method begins with a letter.

    Anything else (SOCKS, TLS, garbage) is refused at once with a 400, rather
    than left waiting for a line end that never comes.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(FIRST_BYTE_TIMEOUT):
        while True:
            try:
                first = conn.recv(1, socket.MSG_PEEK)
                break
            except BlockingIOError:
                await readable(loop, conn)
    if not first:
        return False
    if first.isalpha():
        return True
    with contextlib.suppress(OSError):
        conn.recv(65536)  # taken, so closing sends a FIN after the answer rather than a reset instead of it
        conn.send(NOT_HTTP)
        conn.shutdown(socket.SHUT_WR)
    return False


def _settle(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    """Wait until a non-blocking socket has something to read (or its peer closed)."""
    ready = loop.create_future()
    fd = sock.fileno()
    loop.add_reader(fd, _settle, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
