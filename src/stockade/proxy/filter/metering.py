"""Counting what allowed traffic moves, and ending each allowed flow's audit record once.

Plain HTTP bodies are counted as they stream (`request.stream`,
`response.stream`); a tunnel's content is wrapped in a `Meter` layer
(tunnel_meter.py) that counts it and cuts it when its `Tracked` says so; raw TCP
after an allowed upgrade is counted message by message. The final record of
a flow is written when it ends (`response`, `error`, `tcp_end`), of a tunnel
when its client disconnects.

It acts only on flows Decisions allowed and recorded: those carry an
unwritten `Tracked` in `flow.metadata[META]`, or a tunnel in the
connection's state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from mitmproxy import connection, http, tcp
from mitmproxy.proxy import layer, server_hooks
from mitmproxy.proxy.layers import HttpLayer, TCPLayer

from stockade.proxy.filter import refusal
from stockade.proxy.filter.refusal import INTERNAL_ERROR
from stockade.proxy.filter.state import HELD_BODY, META, SWAPPED, Connections
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.filter.tunnel_meter import Meter
from stockade.proxy.rules.decide import Decision

logger = logging.getLogger(__name__)


class Metering:
    def __init__(self, connections: Connections) -> None:
        self.connections = connections

    # -- plain HTTP ----------------------------------------------------------

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written:
            return  # not allowed, or not recorded: Decisions answered it
        try:
            tracked.record.bytes_up = _head_size(flow.request)
            if flow.metadata.get(HELD_BODY) is not None:
                return  # read whole, judged before it goes on (decisions.Decisions.request): counted in `request`
            inner = flow.request.stream  # a git push's gate (decisions.push_gate): count what it lets through
            flow.request.stream = _counter(tracked, "bytes_up", flow, inner if callable(inner) else None)
        except Exception:
            logger.exception("requestheaders failed; refusing %s", refusal.where(flow))
            refusal.fail(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written or flow.metadata.get(HELD_BODY) is None or flow.response is not None:
            return
        tracked.record.bytes_up += len(flow.request.raw_content or b"")

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written or flow.response is None:
            return
        try:
            if tracked.must_close:
                flow.kill()
                return
            tracked.record.bytes_down = _head_size(flow.response)
            flow.response.stream = _counter(tracked, "bytes_down", flow)
        except Exception:
            logger.exception("responseheaders failed; killing %s", refusal.where(flow))
            if flow.killable:
                flow.kill()

    def response(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written:
            return
        if flow.response is not None and flow.response.status_code == 101:
            self.connections.server(flow.server_conn).upgraded = tracked  # its raw TCP continuation is allowed
        tracked.record.address = _peer(flow.server_conn)
        tracked.finish()

    def error(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written:
            return
        refused = self.connections.client(flow.client_conn).denied_dials.pop((flow.request.host, flow.request.port), None)
        if refused is not None:
            tracked.deny(refused)
        elif unverified_origin(flow):
            # The daemon would not talk to an origin it could not verify (a host whose TLS it
            # terminates): a refusal of its own, said in the run's summary, not a bare error.
            why = f"the server's certificate did not verify ({error_text(flow)}); stockade checks it against this machine's roots"
            tracked.deny(Decision(False, why, "", tracked.record.host))
        else:
            tracked.finish(error=error_text(flow))

    # -- tunnels -------------------------------------------------------------

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        state = self.connections.client(nextlayer.context.client)
        tracked = state.tunnel
        if tracked is None or nextlayer.layer is None or state.meter is not None:
            return
        try:
            chosen = nextlayer.layer
            if isinstance(chosen, HttpLayer):
                tracked.record.scheme = "http"
            elif isinstance(chosen, TCPLayer):
                tracked.record.scheme = "tcp"
            meter = Meter(nextlayer.context, chosen, tracked)
            state.meter = meter
            nextlayer.layer = meter
        except Exception:
            logger.exception("cannot meter the tunnel to %s:%s; cutting it", tracked.record.host, tracked.record.port)
            tracked.deny(Decision(False, INTERNAL_ERROR, "", tracked.record.host))

    def client_disconnected(self, client: connection.Client) -> None:
        state = self.connections.client(client)
        tracked, state.tunnel = state.tunnel, None
        if tracked is not None:
            tracked.finish(error=tracked.must_close)  # e.g. "ended with the run" for a tunnel cut by the end

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        tracked = self.connections.client(data.client).tunnel
        if tracked is not None:
            tracked.record.address = _peer(data.server)

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        tracked = self.connections.client(data.client).tunnel
        if tracked is not None and data.server.error and not tracked.record.error:
            tracked.record.error = data.server.error

    # -- raw TCP after an upgrade ----------------------------------------------

    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None:
            return
        message = flow.messages[-1]
        if message.from_client:
            tracked.record.bytes_up += len(message.content)
        else:
            tracked.record.bytes_down += len(message.content)
        if tracked.must_close:
            refusal.cut_tcp(flow)  # before clear(): this very message is not sent on either
        flow.messages.clear()  # relayed already; keep memory flat on long connections

    def tcp_end(self, flow: tcp.TCPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is not None:
            tracked.finish()

    def tcp_error(self, flow: tcp.TCPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is not None:
            tracked.finish(error=error_text(flow))


def _counter(
    tracked: Tracked, attribute: str, flow: http.HTTPFlow, inner: Callable[[bytes], Iterable[bytes] | bytes] | None = None
) -> Callable[[bytes], Iterable[bytes] | bytes]:
    """A `stream` callable: the body flows through unbuffered and is counted on the way; once
    the flow must stop (its session ended, its audit log broke), no more of it goes on.
    `inner` sees each chunk first (it may hold bytes back); what it gives is what is counted and sent."""
    record = tracked.record

    def count(chunk: bytes) -> Iterable[bytes] | bytes:
        if tracked.must_close:
            refusal.cut(flow)
            return []  # never an empty chunk: in a chunked body it would end the body
        if inner is not None:
            given = inner(chunk)
            chunks = ([given] if given else []) if isinstance(given, bytes) else [part for part in given if part]
            if tracked.must_close:
                return []  # never an empty chunk: in a chunked body upstream it would end the body
            setattr(record, attribute, getattr(record, attribute) + sum(len(part) for part in chunks))
            return chunks
        setattr(record, attribute, getattr(record, attribute) + len(chunk))
        return [chunk] if chunk else []

    return count


def _head_size(message: http.Message) -> int:
    """Bytes of a message's start line and headers, about as they cross the wire."""
    size = sum(len(k) + len(v) + 4 for k, v in message.headers.fields) + 2
    if isinstance(message, http.Request):
        return size + len(message.method) + len(message.path) + 11
    reason = message.reason if isinstance(message, http.Response) else ""
    return size + len(reason or "") + 15


def _peer(server: connection.Server) -> str | None:
    return str(server.peername[0]) if server.peername else None


def unverified_origin(flow: http.HTTPFlow) -> bool:
    """Whether the flow failed because the origin's certificate did not verify."""
    return flow.error is not None and "certificate verify failed" in flow.error.msg.lower()


def error_text(flow: http.HTTPFlow | tcp.TCPFlow) -> str | None:
    """A flow's error for its record: mitmproxy quotes a server's malformed answer in it, and a
    credential's host may have put the value there (masked as in the answer, proxy/filter/placeholders.py)."""
    if flow.error is None:
        return None
    swapped: list[str] | None = flow.metadata.get(SWAPPED)
    if not swapped:
        return flow.error.msg
    from stockade.proxy.filter.placeholders import mask_text

    return mask_text(flow.error.msg, swapped)
