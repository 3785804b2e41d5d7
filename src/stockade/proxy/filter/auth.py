"""Which session a request belongs to: the first addon of the filter, so every later one knows.

A connection that came in through a session's door (its sandbox's own
listener, proxy/daemon/door.py) is that session's from the start, and any
Proxy-Authorization header on it is the sandbox's own and refused. On the
daemon's loopback port (macOS), a connection is bound to a session by the
`Proxy-Authorization: Basic base64("stockade:" + token)` header of its
first request. No credential is a 407; two credentials, or one that
disagrees with the connection's session, are refused; the header never goes
upstream. An admitted flow carries its session in `flow.metadata[SESSION]`;
a flow without it was answered here and the later addons leave it alone.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from mitmproxy import connection, http

from stockade.proxy.control import PROXY_USER
from stockade.proxy.filter import refusal
from stockade.proxy.filter.sessions import Registry, Session
from stockade.proxy.filter.state import PROCESS, SESSION, Connections

logger = logging.getLogger(__name__)


class SessionAuth:
    def __init__(self, registry: Registry, connections: Connections) -> None:
        self.registry = registry
        self.connections = connections

    def bind(self, client: connection.Client, session: Session, forwarded: bool = False, process: dict[str, Any] | None = None) -> None:
        """A connection accepted on `session`'s door: it is that session's, whatever it says;
        `forwarded`: at a forwarded loopback port, whose one tunnel the door opened itself; `process`:
        the process inside that opened it, named in each of its records."""
        state = self.connections.client(client)
        state.session = session
        state.doored = True
        state.forwarded = forwarded
        state.process = process

    def http_connect(self, flow: http.HTTPFlow) -> None:
        self._admit(flow, "http_connect")

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        self._admit(flow, "requestheaders")

    def _admit(self, flow: http.HTTPFlow, hook: str) -> None:
        try:
            session = self._authenticate(flow)
            if session is not None:
                flow.metadata[SESSION] = session
                flow.metadata[PROCESS] = self.connections.client(flow.client_conn).process
        except Exception:
            logger.exception("%s failed; refusing %s", hook, refusal.where(flow))
            refusal.fail(flow)

    def _authenticate(self, flow: http.HTTPFlow) -> Session | None:
        """The flow's session (bound to its connection on first use), or None after answering 407/403."""
        state = self.connections.client(flow.client_conn)
        headers = flow.request.headers
        values = headers.get_all("Proxy-Authorization")
        if values:
            del headers["Proxy-Authorization"]  # never forwarded, whatever happens next
        found = [s for s in (self.registry.lookup(t) for t in map(parse_proxy_authorization, values) if t) if s]
        bound = state.session
        if values and bound is not None and state.doored:
            refusal.refuse_session(flow, bound, "a Proxy-Authorization header from inside the sandbox")
            return None
        if len(values) > 1:
            session = bound or (found[0] if found else None)
            if session is None:
                flow.response = refusal.auth_required_response()
            else:
                refusal.refuse_session(flow, session, "more than one Proxy-Authorization header")
            return None
        if bound is not None:
            if values and (not found or found[0] is not bound):
                refusal.refuse_session(flow, bound, "credential does not match this connection's session")
                return None
            session = bound
        elif not found:
            flow.response = refusal.auth_required_response()
            return None
        else:
            session = found[0]
            state.session = session
        if session.stopped:
            flow.response = refusal.text_response(403, f"stockade: {session.stopped}; request refused")
            return None
        return session


def parse_proxy_authorization(value: str) -> str | None:
    """The session token in `Basic base64("stockade:" + token)`, or None."""
    scheme, _, param = value.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(param.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, token = decoded.partition(":")
    return token if sep and user == PROXY_USER and token else None
