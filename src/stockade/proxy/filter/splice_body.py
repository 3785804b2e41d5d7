"""Move the body of an allowed plain-HTTP response with splice(2), then give the connection back to mitmproxy.

Why: a streamed body goes through mitmproxy in 64 KiB chunks, each through
its layers and several Python copies (about 500 MB/s on two cores). Once a
response's headers are judged, its body of known length is just bytes.

How: `responseheaders` pauses reading from the server. Once mitmproxy has
sent the head and every body byte it had already read (nothing in its
buffers, nothing unsent), a thread splices exactly the rest of the
Content-Length from the server's socket to the client's. mitmproxy's HTTP/1
reader is then told those bytes arrived (its length counter) and sees the
message end, so its own code finishes the flow (the response hook, the
audit record) and parses the next request on the connection, which the
filter judges like any other. A body cut short leaves the count unfinished
and mitmproxy meets the server's EOF as it would have; a longer one leaves
the surplus unread, where mitmproxy finds it and drops the connection.

Anything this does not recognise (HTTP/2, chunked, a different mitmproxy
layout, bytes in flight) leaves the body on mitmproxy's path: slower, the
same effect.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from mitmproxy import http
from mitmproxy.net.http.http1 import expected_http_body_size
from mitmproxy.proxy import events
from mitmproxy.proxy.layers.http import HttpLayer

from stockade.proxy.filter import splice_tunnel
from stockade.proxy.filter.splice_tunnel import WATCH_INTERVAL, pump, shutdown
from stockade.proxy.filter.tracking import Tracked

try:  # mitmproxy's own HTTP/1 reader and the length counter it reads bodies with; private, so looked for
    from mitmproxy.proxy.layers.http._http1 import ContentLengthReader, Http1Client
except ImportError:  # pragma: no cover - another mitmproxy layout: bodies stay on its path
    ContentLengthReader = Http1Client = None  # type: ignore[assignment,misc]

logger = logging.getLogger(__name__)

AVAILABLE = splice_tunnel.AVAILABLE and Http1Client is not None

MIN_BODY = 1 << 20  # smaller bodies stay with mitmproxy: handing over costs a few turns of its loop
READY_TRIES = 200
READY_PAUSE = 0.005  # seconds between later looks while mitmproxy still sends the head (1 s in all)

_running: set[asyncio.Task[None]] = set()  # asyncio holds tasks weakly


def body_length(flow: http.HTTPFlow) -> int | None:
    """The Content-Length of a response whose body may be spliced, or None.

    HTTP/1 both ways, no TLS on either side, a body of known length (mitmproxy's own rules: not HEAD,
    204, 304, 1xx or chunked), at least MIN_BODY.
    """
    request, response = flow.request, flow.response
    if response is None or flow.client_conn.tls or flow.server_conn.tls:
        return None
    if not request.http_version.startswith("HTTP/1") or not response.http_version.startswith("HTTP/1"):
        return None
    try:
        size = expected_http_body_size(request, response)
    except ValueError:
        return None
    return size if size is not None and size >= MIN_BODY else None


class BodySplice:
    """One response body: wait until mitmproxy is idle on it, splice the rest, hand back."""

    def __init__(self, handler: Any, flow: http.HTTPFlow, tracked: Tracked, on_spliced: Callable[[], None] = lambda: None) -> None:
        self.handler = handler  # mitmproxy's ConnectionHandler of the client connection
        self.flow = flow
        self.tracked = tracked
        self.on_spliced = on_spliced  # called once a body went through whole
        self.moved = 0
        self._reader: Http1Client | None = None
        self._stream: Any = None

    def start(self) -> bool:
        """Pause the server's side and schedule the hand-over; False leaves the body to mitmproxy."""
        found = self._find()
        ios = [self.handler.transports.get(c) for c in (self.flow.client_conn, self.flow.server_conn)]
        if found is None or not all(io is not None and isinstance(io.writer, asyncio.StreamWriter) for io in ios):
            return False
        self._reader, self._stream = found
        ios[1].writer.transport.pause_reading()  # the rest of the body waits in the kernel
        task = asyncio.get_running_loop().create_task(self._run(*ios))
        _running.add(task)
        task.add_done_callback(_running.discard)
        return True

    def _find(self) -> tuple[Http1Client, Any] | None:
        """The HTTP/1 layer reading this response from the server, and the flow's stream."""
        layer = next((x for x in self.handler.layer.context.layers if isinstance(x, HttpLayer)), None)
        if layer is None:
            return None
        stream = next((s for s in layer.streams.values() if getattr(s, "flow", None) is self.flow), None)
        reader = layer.connections.get(self.flow.server_conn)
        if reader is not None and not isinstance(reader, Http1Client):
            reader = reader.context.layers[-1]  # the end of the connection's stack, as mitmproxy finds it
        if stream is None or not isinstance(reader, Http1Client) or not hasattr(stream, "state_stream_response_body"):
            return None
        return reader, stream

    async def _run(self, client_io: Any, server_io: Any) -> None:
        """mitmproxy's ConnectionIO of each side; a connection closed meanwhile is seen by `_ready`."""
        try:
            remaining = await self._wait_until_idle(client_io, server_io)
            if remaining:
                client_io.writer.transport.pause_reading()  # nothing from the client moves mitmproxy meanwhile
                try:
                    with self.handler.timeout_watchdog.disarm():
                        error = await self._move(client_io, server_io, remaining)
                finally:
                    client_io.writer.transport.resume_reading()
                await self._hand_back(remaining, error)
        except Exception:
            logger.exception("splicing the body from %s failed; the connection is cut", self.flow.request.host)
            self._cut(client_io, server_io)
        finally:
            server_io.writer.transport.resume_reading()

    async def _wait_until_idle(self, client_io: Any, server_io: Any) -> int:
        """The body bytes still to come, once mitmproxy has nothing in flight; 0 to leave it to mitmproxy."""
        for attempt in range(READY_TRIES):
            await asyncio.sleep(0 if attempt < 3 else READY_PAUSE)  # usually ready at once, after the hook
            ready = self._ready(client_io, server_io)
            if ready is not None:
                return ready
        return 0

    def _ready(self, client_io: Any, server_io: Any) -> int | None:
        """Remaining body bytes if it is time; None to look again; 0 to give up."""
        reader, stream, flow = self._reader, self._stream, self.flow
        assert reader is not None
        if self.tracked.must_close or flow.error or client_io.writer.is_closing() or server_io.writer.is_closing():
            return 0
        if stream.server_state != stream.state_stream_response_body:  # the head is not sent yet
            return None if stream.server_state == stream.state_wait_for_response_headers else 0
        body = getattr(reader, "body_reader", None)
        if reader.state != reader.read_body or reader.stream_id != stream.stream_id or not isinstance(body, ContentLengthReader):
            return 0
        unparsed = getattr(server_io.reader, "_buffer", None)  # read from the socket, not yet given to mitmproxy
        if unparsed is None or server_io.reader.at_eof():
            return 0
        if len(unparsed) or client_io.writer.transport.get_write_buffer_size():  # still going through mitmproxy
            return None
        remaining = getattr(body, "_remaining", 0)
        if not isinstance(remaining, int) or remaining < MIN_BODY // 2 or len(reader.buf):
            return 0
        # Paused again, in the same step as the look at its empty buffer: the StreamReader resumes
        # a transport it had paused itself once its buffer drains, and no byte may reach mitmproxy now.
        server_io.writer.transport.pause_reading()
        return remaining

    async def _move(self, client_io: Any, server_io: Any, remaining: int) -> OSError | None:
        """Splice `remaining` bytes in a thread; cut them off when the session must stop."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[OSError | None] = loop.create_future()
        source = os.dup(server_io.writer.get_extra_info("socket").fileno())
        sink = os.dup(client_io.writer.get_extra_info("socket").fileno())
        # Closed only once the thread is done with them: never a number that could be reused under it.
        done.add_done_callback(functools.partial(_close_both, source, sink))
        record = self.tracked.record

        def count(moved: int) -> None:
            self.moved += moved
            record.bytes_down += moved

        def work() -> None:
            error: OSError | None = None
            try:
                pump(source, sink, count, remaining)
            except OSError as exc:
                error = exc
            loop.call_soon_threadsafe(done.set_result, error)

        threading.Thread(target=work, name="stockade-body", daemon=True).start()
        try:
            while not done.done():
                await asyncio.wait([done], timeout=WATCH_INTERVAL)
                if not done.done() and self.tracked.must_close:
                    _stop(source, sink)
        except asyncio.CancelledError:  # the daemon is stopping
            if not done.done():
                _stop(source, sink)
            raise
        return done.result()

    async def _hand_back(self, remaining: int, error: OSError | None) -> None:
        """Tell mitmproxy's reader what arrived; at the body's end it finishes the flow itself."""
        assert self._reader is not None
        body = self._reader.body_reader
        if isinstance(body, ContentLengthReader):  # always: only such bodies are spliced (offer)
            body._remaining -= self.moved
        if error is not None:
            self.tracked.record.error = f"while splicing the body: {error}"
            self._cut(*(self.handler.transports.get(c) for c in (self.flow.client_conn, self.flow.server_conn)))
        elif self.moved == remaining:
            self.on_spliced()
            await self.handler.server_event(events.DataReceived(self.flow.server_conn, b""))
        # else: the server closed early; mitmproxy meets that EOF and ends the flow as truncated

    def _cut(self, client_io: Any, server_io: Any) -> None:
        """Both ends shut: mitmproxy sees the connection fail and tears it down (its error hook writes the record)."""
        for io in (client_io, server_io):
            sock = io.writer.get_extra_info("socket") if io is not None and io.writer is not None else None
            if sock is not None:
                shutdown(sock.fileno(), socket.SHUT_RDWR)


def _stop(*fds: int) -> None:
    """Shut sockets the pump thread holds: its splice or poll returns, and it ends."""
    for fd in fds:
        shutdown(fd, socket.SHUT_RDWR)


def _close_both(source: int, sink: int, _done: object) -> None:
    os.close(source)
    os.close(sink)
