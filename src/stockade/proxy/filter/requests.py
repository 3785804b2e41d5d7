"""Allow or deny each request of an admitted session, before anything is looked up or dialed.

- `http_connect` (CONNECT host:port): 403 before any lookup or dial;
- `requestheaders` (plain HTTP, and each request inside a tunnel whose TLS
  stockade terminated for a host with HTTP rules): judged on `request.host`
  (the request target), and a `Host` header that disagrees with it is a 403;
  inside an inspected tunnel, by the host's HTTP rules too (method and path);
- `dns_request`: always REFUSED (the sandbox has no resolver).

An allowed name is looked up and its addresses checked here too, so a name
that resolves inside (rebinding) is refused with its own 403; the checked
lookup waits in the connection's state for the backstop (backstop.py) to
dial. An allowed request's start record is written before it goes on; one
that cannot be recorded is refused.

mitmproxy swallows exceptions from hooks and carries on (the flow passes),
so every hook here catches everything itself and denies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from mitmproxy import connection, dns, http
from mitmproxy.net.http import url

from stockade.proxy.filter import refusal
from stockade.proxy.filter.approvals import Approvals
from stockade.proxy.filter.lookup import Lookup
from stockade.proxy.filter.placeholders import Swap, carried, judge, swap
from stockade.proxy.filter.sessions import Session
from stockade.proxy.filter.state import HELD_BODY, META, SESSION, SWAPPED, ClientState, Connections
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.rules.bodies import HELD_LIMIT, NO_BODY_METHODS, BodyGate, head_refusal, is_method_name, may_override
from stockade.proxy.rules.decide import (
    PUSH_PENDING,
    Decision,
    HttpTable,
    canonical_target,
    check_resolved,
    decide,
    decide_request,
    inspected,
    push_line,
    push_patterns,
)
from stockade.proxy.rules.gitpush import PushGate

logger = logging.getLogger(__name__)


class Decisions:
    def __init__(self, connections: Connections, lookup: Lookup, approvals: Approvals | None = None) -> None:
        self.connections = connections
        self.lookup = lookup
        self.approvals = approvals if approvals is not None else Approvals()

    async def http_connect(self, flow: http.HTTPFlow) -> None:
        session: Session | None = flow.metadata.get(SESSION)
        if session is None:
            return  # answered by SessionAuth
        try:
            request = flow.request
            decision = decide(session.rules, request.host, request.port)
            if session.rules.secrets:
                judged = judge(session.rules.secrets, request, decision.host, tls=False)
                if isinstance(judged, Decision) or judged:  # a CONNECT carries a credential nowhere
                    decision = judged if isinstance(judged, Decision) else Decision(False, "a credential in a CONNECT request", "", decision.host)
            if not decision.allowed:  # held for the user's answer when the run asked for that
                state = self.connections.client(flow.client_conn)
                decision = await self.approvals.consider(session, decision, request.host, request.port, state.approved, self.lookup.own_addresses())
            tracked = refusal.track(flow, session, decision, scheme="connect", path=None)
            if decision.allowed:
                decision = await self._check_addresses(flow.client_conn, session, request.host, request.port, decision)
            if not await _goes_on(flow, session, tracked, decision):
                return
            del flow.metadata[META]  # the tunnel's record ends with the connection, not with this flow
            self.connections.client(flow.client_conn).tunnel = tracked
        except Exception:
            logger.exception("http_connect failed; refusing %s", refusal.where(flow))
            refusal.fail(flow)

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        session: Session | None = flow.metadata.get(SESSION)
        if session is None:
            return  # answered by SessionAuth
        try:
            request = flow.request
            state = self.connections.client(flow.client_conn)
            tunnel = state.tunnel
            decision = decide(session.rules, request.host, request.port)
            if not decision.allowed and tunnel is not None and (request.host, request.port) in state.approved:
                decision = Decision(True, "approved once by you", "", decision.host)  # plain HTTP in the tunnel it approved
            elif not decision.allowed and tunnel is None:  # plain HTTP; a tunnel's host was asked at its CONNECT
                # Once is this request: the backstop takes the approval when it dials for it, and
                # one that makes no dial (refused after all, or a kept-alive connection reused) drops it below.
                decision = await self.approvals.consider(session, decision, request.host, request.port, state.approved, self.lookup.own_addresses())
            tables: tuple[HttpTable, ...] = ()
            if decision.allowed:
                # A host with HTTP rules has each request judged: inside its terminated TLS, and in
                # plain HTTP too (direct, or inside a CONNECT tunnel that carries no TLS).
                tables = state.inspected if tunnel is not None and state.inspected else inspected(session.rules, request.host, request.port)
                if tables:
                    decision = _inspected_request(request, tunnel.record.host if tunnel is not None else decision.host, tables, decision)
            tracked = refusal.track(flow, session, decision, scheme=request.scheme or "http", path=request.path)
            mismatch = host_mismatch(request, in_tunnel=tunnel is not None, tunnel_host=tunnel.record.host if tunnel is not None else None)
            if mismatch:
                decision = Decision(False, mismatch, "", decision.host)
            if decision.allowed and tunnel is None and not _reusable(state, request.host, request.port):
                # Inside a tunnel the connection is the CONNECT's, checked when it was made; a kept-alive
                # connection to this very host:port was checked when it was dialed (a new one would be too).
                decision = await self._check_addresses(flow.client_conn, session, request.host, request.port, decision)
            swaps: list[Swap] = []
            if session.rules.secrets:
                judged = judge(session.rules.secrets, request, decision.host, tls=flow.client_conn.tls)
                if isinstance(judged, Decision):
                    decision = judged  # a placeholder where it may not go: said as such, whatever else was decided
                elif judged and decision.allowed:
                    swaps = judged
                    names = ", ".join(one.secret.name for one in swaps)
                    tracked.record.rule = f"{decision.rule}; credential {names} swapped in"
            judged_host = tunnel.record.host if tunnel is not None else decision.host
            kept_here = carried(session.rules.secrets, request.host, request.port)  # the credentials that may go here
            guarded = bool(tables) or bool(kept_here)
            whole = (
                bool(tables) and request.method.upper() == "POST" and may_override(request.headers.get_all("content-type"))
                and not _every_method_allowed(tables, judged_host, request.path)
            )  # fmt: skip
            if decision.allowed and guarded and decision.rule != PUSH_PENDING:
                why = head_refusal(request.method, request.headers, whole)
                if why:
                    decision = Decision(False, why, "", decision.host)
            dials = decision.allowed and not _reusable(state, request.host, request.port)
            goes_on = await _goes_on(flow, session, tracked, decision)
            if tunnel is None and not (goes_on and dials):  # a once no dial takes (refused after all, or reused) ends here
                state.approved.discard((request.host, request.port))
            if goes_on:
                one_target(request)
            if goes_on and decision.rule == PUSH_PENDING:
                request.stream = push_gate(flow, tracked, tables)
            elif goes_on and guarded and whole and _readable_whole(request):
                flow.metadata[HELD_BODY] = (tables, judged_host)  # read whole by mitmproxy, judged in `request`
            elif goes_on and guarded:
                request.stream = body_gate(flow, tracked, tables, judged_host, whole)
            if goes_on and session.rules.secrets:
                if swaps:
                    swap(request, swaps)
                # Every answer of a credential's host is masked, not only one to a request that carried
                # the value: a host may keep what it got and show it later (a request bin, a log, an error).
                # (A value swapped in went to one of its hosts, so it is among these.)
                masked = [secret.value for secret in kept_here]
                if masked:
                    request.headers["Accept-Encoding"] = "identity"  # the answer is read on its way back
                    flow.metadata[SWAPPED] = masked
        except Exception:
            logger.exception("requestheaders failed; refusing %s", refusal.where(flow))
            _drop_once(self.connections, flow)
            refusal.fail(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        """A body held whole (HELD_BODY) is judged now, before any of the request goes on: a refused
        one is answered with a 403 and never reaches the origin."""
        held = flow.metadata.get(HELD_BODY)
        tracked: Tracked | None = flow.metadata.get(META)
        if held is None or tracked is None or tracked.written or flow.response is not None:
            return
        try:
            tables, host = held
            refused: list[str] = []
            gate = body_gate(flow, tracked, tables, host, True, refused.append)
            gate(flow.request.raw_content or b"")
            gate(b"")
            if refused:
                refusal.refuse(flow, tracked, Decision(False, refused[0], "", tracked.record.host))
        except Exception:
            logger.exception("request failed; refusing %s", refusal.where(flow))
            refusal.fail(flow)

    def dns_request(self, flow: Any) -> None:
        """The sandbox has no resolver; a DNS query that reaches the proxy is refused."""
        try:
            flow.response = flow.request.fail(dns.response_codes.REFUSED)
        except Exception:
            logger.exception("dns_request failed; killing the flow")
            if flow.killable:
                flow.kill()

    async def _check_addresses(self, client: connection.Client, session: Session, host: str, port: int, decision: Decision) -> Decision:
        resolved = await self.lookup.resolver(host, port)
        checked = check_resolved(session.rules, decision.host, port, resolved.addresses, self.lookup.own_addresses(), resolved.upstreams)
        if checked.allowed:
            self.connections.client(client).pending[(host, port)] = resolved
            return decision
        return checked


def _drop_once(connections: Connections, flow: http.HTTPFlow) -> None:
    """A plain-HTTP request approved once that failed before its dial takes its approval with it."""
    try:
        state = connections.client(flow.client_conn)
        if state.tunnel is None:
            state.approved.discard((flow.request.host, flow.request.port))
    except Exception:  # noqa: BLE001 - already failing: refusing the flow is what matters
        logger.exception("could not drop a once approval of %s", refusal.where(flow))


def _inspected_request(request: http.Request, tunnel_host: str, tables: tuple[HttpTable, ...], decision: Decision) -> Decision:
    """A request to a host with HTTP rules: for the tunnel's host only (when it came through one), judged by those rules."""
    if decision.host != tunnel_host:
        return Decision(False, f"a request for {refusal.shown_host(request.host)} inside the tunnel to {tunnel_host}", "", decision.host)
    return decide_request(tables, tunnel_host, request.method, request.path, method_overrides(request))


def push_gate(flow: http.HTTPFlow, tracked: Tracked, tables: tuple[HttpTable, ...]) -> PushGate:
    """The `request.stream` of an allowed git push: its body is held back until its refs are judged
    (gitpush.py); a refused push is recorded with its refs and the line to add, and cut. Metering
    counts what the gate lets through (it wraps this callable)."""
    if flow.request.headers.get("content-encoding", "identity").strip().lower() != "identity":
        encoding = flow.request.headers["content-encoding"][:40]

        def encoded(_chunk: bytes) -> list[bytes]:  # git never compresses a push; its refs could not be read
            if not tracked.written:
                tracked.deny(Decision(False, f"git push refused: a body in {encoding} (git sends a push uncompressed)", "", tracked.record.host))
            refusal.cut(flow)
            return []

        return encoded  # type: ignore[return-value]

    def allow(rule: str) -> None:
        tracked.record.rule = rule

    def refuse(rule: str, ref: str | None) -> None:
        hint = push_line(tables[0].host, ref) if ref is not None else ""
        tracked.deny(Decision(False, rule, hint, tracked.record.host))
        refusal.cut(flow)

    return PushGate(push_patterns(tables), allow, refuse)


def body_gate(
    flow: http.HTTPFlow, tracked: Tracked, tables: tuple[HttpTable, ...], host: str, whole: bool, refuse: Callable[[str], None] | None = None
) -> BodyGate:
    """The `request.stream` of a request to a host with HTTP rules or a credential: its body is
    held until what it asks of the origin is judged (bodies.py), and a refused one is recorded
    and cut before any of it goes on (its head went on already: no 403 can follow it). `refuse`:
    what a refusal does instead (a body read whole, judged before its head went on)."""
    request = flow.request

    def judge(found: list[tuple[str, str]]) -> str | None:
        decision = decide_request(tables, host, request.method, request.path, tuple(found))
        return None if decision.allowed else decision.rule

    def cut(rule: str) -> None:
        tracked.deny(Decision(False, rule, "", tracked.record.host))
        refusal.cut(flow)

    no_body = request.method.upper() in NO_BODY_METHODS
    return BodyGate(request.headers.get_all("content-type"), whole, judge, refuse or cut, no_body)


def _readable_whole(request: http.Request) -> bool:
    """A body mitmproxy reads whole before the request goes on: a declared length within the
    daemon's streaming limit (stream_large_bodies), no transfer coding."""
    length = request.headers.get("content-length", "").strip()
    return not request.headers.get("transfer-encoding") and length.isdigit() and int(length) <= HELD_LIMIT


# Methods an override may name, judged on a POST's path: if the rules allow each (and any other,
# OTHER_METHOD), no override can change the decision, and the body need not be held whole.
COMMON_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT")
OTHER_METHOD = "STOCKADE-ANY-OTHER"


def _every_method_allowed(tables: tuple[HttpTable, ...], host: str, path: str) -> bool:
    named = {method for table in tables for rule in (*table.allow, *table.deny) for method in (rule.methods or ())}
    return all(decide_request(tables, host, method, path).allowed for method in (*COMMON_METHODS, *sorted(named), OTHER_METHOD))


# Where servers take a method other than the request line's (Rails, Express method-override, Symfony,
# Laravel, ASP.NET, Google APIs): the headers, and the `_method` query parameter.
OVERRIDE_HEADERS = ("X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override")


def method_overrides(request: http.Request) -> tuple[tuple[str, str], ...]:
    """Each method a server may act on instead of the request's own, with where it was asked: the
    headers (a CGI-style server reads `X_HTTP_METHOD_OVERRIDE` as the same), and a query
    parameter any server reads as `_method` (bodies.is_method_name)."""
    wanted = {name.lower().replace("-", "_"): name for name in OVERRIDE_HEADERS}
    spelled = ((name.lower().replace("-", "_"), value) for name, value in request.headers.items(multi=True))
    found = [(wanted[key], value.strip()) for key, value in spelled if key in wanted]
    found += [("the _method parameter", value.strip()) for name, value in request.query.items(multi=True) if is_method_name(name)]
    return tuple((where, value) for where, value in found if value)


def _reusable(state: ClientState, host: str, port: int) -> bool:
    """Whether mitmproxy would send a request to host:port over a connection the backstop checked.

    mitmproxy reuses an open server connection whose `address` is the
    request's (host, port); its address was checked when it was dialed,
    and looking the name up again would not change where the bytes go.
    """
    return (host, port) in state.checked.values()


async def _goes_on(flow: http.HTTPFlow, session: Session, tracked: Tracked, decision: Decision) -> bool:
    """Answer a denied flow (after its session's pace) or write an allowed one's start record;
    True only for an allowed flow whose start is recorded (one that cannot be recorded is refused)."""
    if not decision.allowed:
        await paced(session)
        refusal.refuse(flow, tracked, decision)
        return False
    if not tracked.opened():
        refusal.unrecordable(flow, tracked)
        return False
    return True


def host_mismatch(request: http.Request, *, in_tunnel: bool, tunnel_host: str | None = None) -> str | None:
    """Why the spellings of where a request goes disagree, or None (ESCAPES 84).

    The target decides where mitmproxy connects; an origin routes on Host, and
    a front that follows RFC 9112 section 3.2.2 on an absolute-form target's
    authority (HTTP/2: :authority). Letting any of them differ would judge, and
    swap a credential in for, one name while another is served. Inside a
    CONNECT tunnel the names must also be the tunnel's, and only names are
    compared (the port is the tunnel's). The request then goes on in origin
    form (`one_target`): the origin sees no spelling but the judged one.
    """
    hosts = request.headers.get_all("Host")
    if len(hosts) > 1:
        return "more than one Host header"
    if in_tunnel and tunnel_host is not None and not _same_name(request.host, tunnel_host):
        return f"the request target {refusal.shown_host(request.host)} is not the tunnel's host {refusal.shown_host(tunnel_host)}"
    if request.authority and not request.is_http2 and not request.is_http3 and request.method.upper() != "CONNECT":
        try:
            name, port = url.parse_authority(request.authority, check=True)
        except ValueError:
            return f"malformed request target {refusal.shown_host(request.authority)}"
        if not _same_name(name, request.host) or not _same_name(name, tunnel_host or request.host):
            return f"the request target {refusal.shown_host(request.authority)} does not match {refusal.shown_host(tunnel_host or request.host)}"
        if port is not None and port != request.port:
            return f"the request target {refusal.shown_host(request.authority)} does not match the port {request.port}"
    value = request.host_header
    if value is None:
        return None
    try:
        name, port = url.parse_authority(value, check=True)
        same = str(canonical_target(name)) == str(canonical_target(request.host))
    except ValueError:
        return f"malformed Host header {refusal.shown_host(value)}"
    if not same:
        return f"Host header {refusal.shown_host(value)} does not match the request target {refusal.shown_host(request.host)}"
    if in_tunnel:  # the port is the tunnel's: a Host that names another is refused, one that names none is fine
        if port is None or port == request.port:
            return None
        return f"Host header {refusal.shown_host(value)} does not match the tunnel's port {request.port}"
    expected = port if port is not None else (443 if request.scheme == "https" else 80)
    if expected != request.port:
        return f"Host header {refusal.shown_host(value)} does not match the request target port {request.port}"
    return None


def _same_name(one: str, other: str) -> bool:
    try:
        return str(canonical_target(one)) == str(canonical_target(other))
    except ValueError:
        return False


def one_target(request: http.Request) -> None:
    """Forward an HTTP/1 request in origin form: the absolute-form authority, checked equal to
    Host and the connection's target, is not passed on for a front to route by instead; and
    with the Host of the judged target, which one without any gets."""
    if not request.is_http2 and not request.is_http3 and request.method.upper() != "CONNECT":
        request.authority = ""
        if "host" not in request.headers:  # HTTP/1.0 needs none: a front would send it to its default virtual host
            request.headers["Host"] = url.hostport(request.scheme, request.host, request.port)


async def paced(session: Session) -> None:
    """Wait for this denial's slot (sessions.DENIAL_RATE): a flood of denials is slowed, not served at once."""
    delay = session.denial_pace.delay(time.monotonic())
    if delay > 0:
        await asyncio.sleep(delay)
