"""Caps on what a sandbox can make the daemon buffer: a request head, and pipelined requests.

mitmproxy's HTTP/1 server layer appends every byte it receives to a buffer
until it finds the blank line that ends the head, and sets no bound (11.x).
A sandbox sending endless header lines on a few connections grew the shared
daemon from 71 MB to 1.65 GB in a second, outside the sandbox's own memory
limit. `install()` wraps the layer's head-reading state so that a buffer
past MAX_REQUEST_HEAD without a complete head is answered 431 and closed.
The same buffer takes whatever a client sends while its request is being
answered (pipelined requests, parsed only once that response is done); a
denied request waits for its slot (sessions.DENIAL_RATE), so a flooding
client could pile up any amount there: past MAX_PIPELINED the connection
is closed.

This patches one method of a pinned mitmproxy (pyproject pins 11.0.x):
`tests/proxy/daemon/test_headlimit.py` fails if the method it wraps moves.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

MAX_REQUEST_HEAD = 64 << 10  # bytes: far above any real request's head (browsers stop near 16-32 KiB)
MAX_PIPELINED = 64 << 10  # bytes sent ahead of the answer to the request in hand (no real client pipelines)
_installed = False


def install() -> None:
    """Wrap Http1Server.read_headers and Http1Server.wait once per process."""
    global _installed
    if _installed:
        return
    from mitmproxy.proxy import commands, events
    from mitmproxy.proxy.layers.http import _http1

    original = _http1.Http1Server.read_headers

    def read_headers(self: Any, event: Any) -> Generator[Any, Any, None]:
        if isinstance(event, events.DataReceived) and len(self.buf) > MAX_REQUEST_HEAD and not _head_complete(bytes(self.buf)):
            yield commands.SendData(self.conn, _http1.make_error_response(431, f"stockade: request head larger than {MAX_REQUEST_HEAD} bytes"))
            yield commands.CloseConnection(self.conn)
            self.buf.maybe_extract_at_most(len(self.buf))  # drop what was buffered
            self.state = self.done  # as mitmproxy does after a head it cannot parse
            return
        yield from original(self, event)

    def wait(self: Any, event: Any) -> Generator[Any, Any, None]:
        if isinstance(event, events.DataReceived) and len(self.buf) > MAX_PIPELINED:
            self.buf.maybe_extract_at_most(len(self.buf))
            yield commands.CloseConnection(self.conn)
            return
        yield from _http1.Http1Connection.wait(self, event)

    _http1.Http1Server.read_headers = read_headers  # type: ignore[method-assign]
    _http1.Http1Server.wait = wait  # type: ignore[method-assign]
    _installed = True


def _head_complete(data: bytes) -> bool:
    """Whether the first MAX_REQUEST_HEAD bytes hold the blank line that ends a head."""
    window = data[: MAX_REQUEST_HEAD + 4]
    return b"\r\n\r\n" in window or b"\n\n" in window
