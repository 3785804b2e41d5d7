"""The enforcing mitmproxy addon: every connection of every session is judged here.

Who may use the proxy: a connection that came in through a session's door
(its sandbox's own listener, proxy/door.py) is that session's from the start,
and any Proxy-Authorization header on it is the sandbox's own and refused.
On the daemon's loopback port (macOS), a connection is bound to a session by
the `Proxy-Authorization: Basic base64("stockade:" + token)` header of its
first request. No credential is a 407; two credentials, or one that disagrees
with the connection's session, are refused; the header never goes upstream.

Where it is judged, and what deny means there:
- `http_connect` (CONNECT host:port): 403 before any lookup or dial;
- `requestheaders` (plain HTTP): judged on `request.host` (the request
  target), and a `Host` header that disagrees with it is a 403;
- `tls_clienthello`: the SNI must be the CONNECT host; then the TLS stream
  passes through untouched (`ignore_connection`). On a mismatch the tunnel
  is cut by the `Meter` around it, never "ignored" (that would pass it);
- `tcp_start`: raw TCP in a tunnel is killed (only TLS or HTTP may tunnel);
- `dns_request`: always REFUSED;
- `server_connect`, the backstop under all of them: judge again, resolve
  the name ourselves, refuse inside addresses, and dial the very address
  that was checked.

mitmproxy swallows exceptions from hooks and carries on (the flow passes),
so every enforcing hook catches everything itself and denies.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import time
import weakref
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from mitmproxy import connection, ctx, dns, exceptions, http, tcp, tls
from mitmproxy.net.http import url
from mitmproxy.proxy import layer, server_hooks
from mitmproxy.proxy.layers import HttpLayer, TCPLayer

from stockade.profiles.hints import allow_command
from stockade.profiles.text import shown
from stockade.proxy import bodysplice, splicer
from stockade.proxy.audit import AuditRecord, now_iso, redact_path
from stockade.proxy.control import PROXY_USER
from stockade.proxy.decide import Decision, canonical_target, check_resolved, decide
from stockade.proxy.meter import Meter
from stockade.proxy.resolver import Resolved, Resolver, file_resolver, own_addresses, system_resolver
from stockade.proxy.sessions import Registry, Session
from stockade.proxy.tracking import Tracked

logger = logging.getLogger(__name__)

META = "stockade"  # flow.metadata key holding the flow's Tracked
OWN_ADDRESSES_TTL = 30.0  # seconds between re-reading this host's interface addresses
INTERNAL_ERROR = "stockade internal error (request refused; see the daemon log)"
RAW_TCP = "raw TCP is not allowed through a tunnel (only TLS or HTTP)"
DENIED_BODY_LIMIT = 1 << 20  # the daemon's stream_large_bodies: denied bodies up to this size still get a 403


class StockadeFilter:
    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry if registry is not None else Registry()
        self.resolver: Resolver = system_resolver
        # Per-connection state dies with the connection (as in mitmproxy's ProxyAuth).
        self.bound: MutableMapping[connection.Client, Session] = weakref.WeakKeyDictionary()
        self.doored: weakref.WeakSet[connection.Client] = weakref.WeakSet()  # came in through a session's door
        self.tunnels: MutableMapping[connection.Client, Tracked] = weakref.WeakKeyDictionary()
        self.metered: MutableMapping[connection.Client, Meter] = weakref.WeakKeyDictionary()
        self.splicing: MutableMapping[connection.Client, splicer.Splicer] = weakref.WeakKeyDictionary()
        self.pending: MutableMapping[connection.Client, dict[tuple[str, int], Resolved]] = weakref.WeakKeyDictionary()
        self.backstop: MutableMapping[connection.Client, dict[tuple[str, int], Decision]] = weakref.WeakKeyDictionary()
        self.dialed: MutableMapping[connection.Server, tuple[str, int]] = weakref.WeakKeyDictionary()
        # Open server connections of each client, by the (host, port) the backstop checked before dialing.
        self.checked: MutableMapping[connection.Client, dict[connection.Server, tuple[str, int]]] = weakref.WeakKeyDictionary()
        self.upgraded: MutableMapping[connection.Server, Tracked] = weakref.WeakKeyDictionary()
        self.refused: MutableMapping[connection.Server, Decision] = weakref.WeakKeyDictionary()
        self.spliced_total = 0  # tunnels handed to a splicer since start (reported by the daemon's ping)
        self.bodies_spliced = 0  # plain-HTTP response bodies spliced whole since start (likewise)
        self._own: frozenset[Any] = frozenset()
        self._own_at = float("-inf")

    # -- configuration ---------------------------------------------------

    def load(self, loader: Any) -> None:
        loader.add_option(
            "stockade_splice",
            bool,
            True,
            "Move the bytes of checked TLS tunnels, and plain-HTTP response bodies of known length, with splice(2) "
            "outside the event loop (Linux). Off: every chunk goes through mitmproxy, slower but identical in effect.",
        )
        loader.add_option(
            "stockade_test_resolver",
            str,
            "",
            "Path of a JSON file that answers every name lookup (names, test upstreams, query log), "
            "for tests only. Empty: use the system resolver.",
        )

    def configure(self, updated: set[str]) -> None:
        if "stockade_test_resolver" in updated:
            path = ctx.options.stockade_test_resolver
            if not path:
                self.resolver = system_resolver
                return
            try:
                table = json.loads(Path(path).read_text())
                if not isinstance(table, dict) or not isinstance(table.get("names", {}), dict):
                    raise ValueError("expected an object with a 'names' object")
            except (OSError, ValueError) as exc:
                raise exceptions.OptionsError(f"stockade_test_resolver: cannot use {path!r}: {exc}") from exc
            self.resolver = file_resolver(path)

    def own_addresses(self) -> frozenset[Any]:
        now = time.monotonic()
        if now - self._own_at > OWN_ADDRESSES_TTL:
            self._own, self._own_at = own_addresses(), now
        return self._own

    def bind(self, client: connection.Client, session: Session) -> None:
        """A connection accepted on `session`'s door: it is that session's, whatever it says."""
        self.bound[client] = session
        self.doored.add(client)

    # -- HTTP: CONNECT and plain requests ------------------------------

    async def http_connect(self, flow: http.HTTPFlow) -> None:
        try:
            session = self._authenticate(flow)
            if session is None:
                return
            request = flow.request
            decision = decide(session.rules, request.host, request.port)
            tracked = self._track(flow, session, decision, scheme="connect", path=None)
            if decision.allowed:
                decision = await self._check_addresses(flow.client_conn, session, request.host, request.port, decision)
            if not decision.allowed:
                await _paced(session)
                self._refuse(flow, tracked, decision)
                return
            if not tracked.opened():
                self._unrecordable(flow, tracked)
                return
            del flow.metadata[META]  # the tunnel's record ends with the connection, not with this flow
            self.tunnels[flow.client_conn] = tracked
        except Exception:
            logger.exception("http_connect failed; refusing %s", _where(flow))
            self._fail(flow)

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        try:
            session = self._authenticate(flow)
            if session is None:
                return
            request = flow.request
            tunnel = self.tunnels.get(flow.client_conn)
            decision = decide(session.rules, request.host, request.port)
            tracked = self._track(flow, session, decision, scheme=request.scheme or "http", path=request.path)
            mismatch = host_mismatch(request, in_tunnel=tunnel is not None)
            if mismatch:
                decision = Decision(False, mismatch, "", decision.host)
            if decision.allowed and tunnel is None and not self._reusable(flow.client_conn, request.host, request.port):
                # Inside a tunnel the connection is the CONNECT's, checked when it was made; a kept-alive
                # connection to this very host:port was checked when it was dialed (a new one would be too).
                decision = await self._check_addresses(flow.client_conn, session, request.host, request.port, decision)
            if not decision.allowed:
                await _paced(session)
                self._refuse(flow, tracked, decision)
                return
            if not tracked.opened():
                self._unrecordable(flow, tracked)
                return
            tracked.record.bytes_up = _head_size(request)
            request.stream = _counter(tracked, "bytes_up")
        except Exception:
            logger.exception("requestheaders failed; refusing %s", _where(flow))
            self._fail(flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written or flow.response is None:
            return
        try:
            if tracked.must_close:
                flow.kill()
                return
            tracked.record.bytes_down = _head_size(flow.response)
            flow.response.stream = _counter(tracked, "bytes_down")
            self._offer_body(flow, tracked)
        except Exception:
            logger.exception("responseheaders failed; killing %s", _where(flow))
            if flow.killable:
                flow.kill()

    def response(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written:
            return
        if flow.response is not None and flow.response.status_code == 101:
            self.upgraded[flow.server_conn] = tracked  # its raw TCP continuation is allowed
        tracked.record.address = _peer(flow.server_conn)
        tracked.finish()

    def error(self, flow: http.HTTPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written:
            return
        refused = self.backstop.get(flow.client_conn, {}).pop((flow.request.host, flow.request.port), None)
        if refused is not None:
            tracked.deny(refused)
        else:
            tracked.finish(error=flow.error.msg if flow.error else None)

    # -- tunnels -----------------------------------------------------------

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        client = nextlayer.context.client
        tracked = self.tunnels.get(client)
        if tracked is None or nextlayer.layer is None or client in self.metered:
            return
        try:
            chosen = nextlayer.layer
            if isinstance(chosen, HttpLayer):
                tracked.record.scheme = "http"
            elif isinstance(chosen, TCPLayer):
                tracked.record.scheme = "tcp"
            meter = Meter(nextlayer.context, chosen, tracked)
            if ctx.options.stockade_splice and splicer.AVAILABLE:
                meter.on_drained = self._offer_splice
            self.metered[client] = meter
            nextlayer.layer = meter
        except Exception:
            logger.exception("cannot meter the tunnel to %s:%s; cutting it", tracked.record.host, tracked.record.port)
            tracked.deny(Decision(False, INTERNAL_ERROR, "", tracked.record.host))

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        tracked = self.tunnels.get(data.context.client)
        data.ignore_connection = False
        if tracked is None:
            return  # TLS outside a CONNECT tunnel: tls_start_client refuses it
        try:
            sni = data.client_hello.sni
            tracked.record.scheme = "tls"
            tracked.record.sni = sni
            reason = sni_mismatch(sni, tracked.record.host)
            if reason:
                tracked.deny(Decision(False, reason, "", tracked.record.host))
                return
            data.establish_server_tls_first = False
            data.ignore_connection = True  # pass the TLS stream through, untouched
            meter = self.metered.get(data.context.client)
            if meter is not None:
                meter.passthrough = True
        except Exception:
            logger.exception("tls_clienthello failed; cutting the tunnel")
            data.ignore_connection = False
            tracked.deny(Decision(False, INTERNAL_ERROR, "", tracked.record.host))

    def tls_start_client(self, data: tls.TlsData) -> None:
        """stockade never intercepts TLS: any attempt to terminate a client's TLS fails the connection."""
        data.ssl_conn = None
        tracked = self.tunnels.get(data.context.client)
        if tracked is not None and not tracked.cut:
            tracked.deny(Decision(False, "TLS interception refused", "", tracked.record.host))

    def _offer_splice(self, meter: Meter) -> None:
        """The meter saw the tunnel drained: try to hand it to a splicer once the loop is free."""
        asyncio.get_running_loop().call_soon(self._splice, meter, 0)

    def _splice(self, meter: Meter, attempt: int) -> None:
        client = meter.context.client
        try:
            if meter.tracked.must_close or client not in self.tunnels:
                return
            handler = _handler(client)
            if handler is None:
                return
            spliced = splicer.Splicer(handler, client, meter.context.server, meter.tracked)
            if spliced.start():
                self.splicing[client] = spliced
                self.spliced_total += 1
                logger.debug("tunnel to %s:%s spliced", meter.tracked.record.host, meter.tracked.record.port)
            elif attempt < 20:  # a write still in flight: look again shortly
                asyncio.get_running_loop().call_later(0.005, self._splice, meter, attempt + 1)
        except Exception:
            logger.exception("cannot splice the tunnel to %s; it stays on mitmproxy's path", meter.tracked.record.host)

    def _offer_body(self, flow: http.HTTPFlow, tracked: Tracked) -> None:
        """A checked plain-HTTP response's body of known length goes by splice (proxy/bodysplice.py)."""
        if not (ctx.options.stockade_splice and bodysplice.AVAILABLE) or flow.client_conn in self.tunnels:
            return
        if bodysplice.body_length(flow) is None:
            return
        handler = _handler(flow.client_conn)
        if handler is not None:
            bodysplice.BodySplice(handler, flow, tracked, self._count_body).start()

    def _count_body(self) -> None:
        self.bodies_spliced += 1

    def client_disconnected(self, client: connection.Client) -> None:
        tracked = self.tunnels.pop(client, None)
        if tracked is not None:
            tracked.finish(error=tracked.must_close)  # e.g. "session ended" for a tunnel cut by the end

    # -- raw TCP and DNS ---------------------------------------------------

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        try:
            upgraded = self.upgraded.pop(flow.server_conn, None)
            if upgraded is not None and not upgraded.session.stopped:
                record = dataclasses.replace(
                    upgraded.record, scheme="tcp", time=now_iso(), bytes_up=0, bytes_down=0, error=None, path=None
                )
                tracked = Tracked(upgraded.session, dataclasses.replace(record, flow=None))
                flow.metadata[META] = tracked
                if not tracked.opened() and flow.killable:
                    flow.kill()
                return
            host = flow.server_conn.address[0] if flow.server_conn.address else "?"
            tunnel = self.tunnels.get(flow.client_conn)
            if tunnel is not None:
                tunnel.record.scheme = "tcp"
                host = tunnel.record.host
            self._kill_tcp(flow, tunnel, Decision(False, RAW_TCP, "", host))
        except Exception:
            logger.exception("tcp_start failed; killing the flow")
            self._kill_tcp(flow, None, Decision(False, INTERNAL_ERROR))

    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is None:
            return
        message = flow.messages[-1]
        if message.from_client:
            tracked.record.bytes_up += len(message.content)
        else:
            tracked.record.bytes_down += len(message.content)
        flow.messages.clear()  # relayed already; keep memory flat on long connections
        if tracked.must_close and flow.killable:
            flow.kill()

    def tcp_end(self, flow: tcp.TCPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is not None:
            tracked.finish()

    def tcp_error(self, flow: tcp.TCPFlow) -> None:
        tracked = flow.metadata.get(META)
        if tracked is not None:
            tracked.finish(error=flow.error.msg if flow.error else None)

    def dns_request(self, flow: Any) -> None:
        """The sandbox has no resolver; a DNS query that reaches the proxy is refused."""
        try:
            flow.response = flow.request.fail(dns.response_codes.REFUSED)
        except Exception:
            logger.exception("dns_request failed; killing the flow")
            if flow.killable:
                flow.kill()

    # -- the backstop ------------------------------------------------------

    async def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        server = data.server
        try:
            if server.error:
                return
            refused = self.refused.pop(server, None)
            if refused is not None:
                server.error = f"stockade: {refused.rule}"
                return
            session = self.bound.get(data.client)
            if session is None or session.stopped:
                server.error = "stockade: no live session for this connection"
                return
            if not server.address:
                server.error = "stockade: no destination"
                return
            host, port = str(server.address[0]), int(server.address[1])
            decision = decide(session.rules, host, port)
            resolved: Resolved | None = None
            if decision.allowed:
                resolved = self.pending.get(data.client, {}).pop((host, port), None) or await self.resolver(host, port)
                decision = check_resolved(
                    session.rules, decision.host, port, resolved.addresses, self.own_addresses(), resolved.upstreams
                )
            if not decision.allowed or resolved is None:
                server.error = f"stockade: {decision.rule}"
                self._backstop_denied(data.client, host, port, decision)
                return
            self.dialed[server] = (host, port)
            server.address = (str(resolved.addresses[0]), port)  # dial what was checked
        except Exception:
            logger.exception("server_connect failed; refusing the connection")
            server.error = f"stockade: {INTERNAL_ERROR}"

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        checked = self._restore_address(data)
        if checked is not None:
            self.checked.setdefault(data.client, {})[data.server] = checked
        tracked = self.tunnels.get(data.client)
        if tracked is not None:
            tracked.record.address = _peer(data.server)

    def server_disconnected(self, data: server_hooks.ServerConnectionHookData) -> None:
        self.checked.get(data.client, {}).pop(data.server, None)

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        self._restore_address(data)
        tracked = self.tunnels.get(data.client)
        if tracked is not None and data.server.error and not tracked.record.error:
            tracked.record.error = data.server.error

    # -- helpers -----------------------------------------------------------

    def _authenticate(self, flow: http.HTTPFlow) -> Session | None:
        """The flow's session (bound to its connection on first use), or None after answering 407/403."""
        client = flow.client_conn
        headers = flow.request.headers
        values = headers.get_all("Proxy-Authorization")
        if values:
            del headers["Proxy-Authorization"]  # never forwarded, whatever happens next
        found = [s for s in (self.registry.lookup(t) for t in map(parse_proxy_authorization, values) if t) if s]
        bound = self.bound.get(client)
        if values and bound is not None and client in self.doored:
            self._refuse_session(flow, bound, "a Proxy-Authorization header from inside the sandbox")
            return None
        if len(values) > 1:
            session = bound or (found[0] if found else None)
            if session is None:
                flow.response = auth_required_response()
            else:
                self._refuse_session(flow, session, "more than one Proxy-Authorization header")
            return None
        if bound is not None:
            if values and (not found or found[0] is not bound):
                self._refuse_session(flow, bound, "credential does not match this connection's session")
                return None
            session = bound
        elif not found:
            flow.response = auth_required_response()
            return None
        else:
            session = found[0]
            self.bound[client] = session
        if session.stopped:
            flow.response = _text_response(403, f"stockade: {session.stopped}; request refused")
            return None
        return session

    def _fail(self, flow: http.HTTPFlow) -> None:
        """Deny after an unexpected error, with a record when the session is known."""
        tracked = flow.metadata.get(META)
        if tracked is not None:
            tracked.deny(Decision(False, INTERNAL_ERROR, "", tracked.record.host))
        if _body_too_big_to_answer(flow.request):
            if flow.killable:
                flow.kill()
            return
        flow.response = _text_response(403, f"stockade: {INTERNAL_ERROR}\n")

    def _refuse_session(self, flow: http.HTTPFlow, session: Session, reason: str) -> None:
        request = flow.request
        decision = Decision(False, reason, "", _shown(request.host))
        tracked = self._track(flow, session, decision, scheme=request.scheme or "http", path=request.path)
        self._refuse(flow, tracked, decision)

    def _track(self, flow: http.HTTPFlow, session: Session, decision: Decision, *, scheme: str, path: str | None) -> Tracked:
        request = flow.request
        record = AuditRecord(
            session=session.spec.session_id,
            command=list(session.spec.command),
            scheme=scheme,
            host=decision.host or _shown(request.host),
            port=request.port,
            method=request.method,
            path=redact_path(path) if path is not None else None,
            decision="allow" if decision.allowed else "deny",
            rule=decision.rule,
        )
        tracked = Tracked(session, record)
        flow.metadata[META] = tracked
        return tracked

    def _unrecordable(self, flow: http.HTTPFlow, tracked: Tracked) -> None:
        """An allowed request whose start record could not be written: refused, saying why."""
        tracked.written = True  # its final record could not be written either
        del flow.metadata[META]
        flow.response = _text_response(403, f"stockade: {tracked.cut}; the request was refused because it could not be recorded\n")

    def _refuse(self, flow: http.HTTPFlow, tracked: Tracked, decision: Decision) -> None:
        tracked.deny(decision)
        if _body_too_big_to_answer(flow.request):
            flow.kill()
            return
        flow.response = _text_response(
            403, denial_text(tracked.record.host, tracked.record.port, decision, tracked.session.spec.origin)
        )

    async def _check_addresses(self, client: connection.Client, session: Session, host: str, port: int, decision: Decision) -> Decision:
        resolved = await self.resolver(host, port)
        checked = check_resolved(session.rules, decision.host, port, resolved.addresses, self.own_addresses(), resolved.upstreams)
        if checked.allowed:
            self.pending.setdefault(client, {})[(host, port)] = resolved
            return decision
        return checked

    def _backstop_denied(self, client: connection.Client, host: str, port: int, decision: Decision) -> None:
        tracked = self.tunnels.get(client)
        if tracked is not None:
            tracked.deny(decision)
        else:  # an HTTP flow: its `error` hook writes the record
            self.backstop.setdefault(client, {})[(host, port)] = decision

    def _kill_tcp(self, flow: tcp.TCPFlow, tracked: Tracked | None, decision: Decision) -> None:
        # mitmproxy 11 does not stop a TCP flow killed in tcp_start; refusing its
        # server connection and cutting the tunnel do.
        self.refused[flow.server_conn] = decision
        if tracked is not None:
            tracked.deny(decision)
        if flow.killable:
            flow.kill()

    def _reusable(self, client: connection.Client, host: str, port: int) -> bool:
        """Whether mitmproxy would send a request to host:port over a connection the backstop checked.

        mitmproxy reuses an open server connection whose `address` is the
        request's (host, port); its address was checked when it was dialed,
        and looking the name up again would not change where the bytes go.
        """
        return (host, port) in self.checked.get(client, {}).values()

    def _restore_address(self, data: server_hooks.ServerConnectionHookData) -> tuple[str, int] | None:
        """Give the connection its name back once it is connected.

        mitmproxy reuses a connection only for the same `address`, so a
        connection labelled with the IP would never be reused (and idle ones
        would pile up against its five-per-destination limit). The name is
        what mitmproxy itself keeps in `address` when it resolves a host;
        the IP stays in `peername`. Server refuses address changes on open
        connections (to stop redirects); this is a relabel, not a redirect.
        Returns the checked (host, port), or None for a connection the backstop did not dial.
        """
        original = self.dialed.pop(data.server, None)
        if original is not None:
            object.__setattr__(data.server, "address", original)
        return original


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


def host_mismatch(request: http.Request, *, in_tunnel: bool) -> str | None:
    """Why the Host header disagrees with the request target, or None.

    The target decides where mitmproxy connects; an origin server routes on
    Host. Letting them differ would judge one name and serve another.
    Inside a CONNECT tunnel only the name is compared (the port is the tunnel's).
    """
    hosts = request.headers.get_all("Host")
    if len(hosts) > 1:
        return "more than one Host header"
    value = request.host_header
    if value is None:
        return None
    try:
        name, port = url.parse_authority(value, check=True)
        same = str(canonical_target(name)) == str(canonical_target(request.host))
    except ValueError:
        return f"malformed Host header {_shown(value)}"
    if not same:
        return f"Host header {_shown(value)} does not match the request target {_shown(request.host)}"
    if in_tunnel:
        return None
    expected = port if port is not None else (443 if request.scheme == "https" else 80)
    if expected != request.port:
        return f"Host header {_shown(value)} does not match the request target port {request.port}"
    return None


def sni_mismatch(sni: str | None, host: str) -> str | None:
    """Why a ClientHello's SNI may not enter a tunnel to `host` (canonical), or None.

    A tunnel to a name needs that very name as SNI (no fronting, no missing
    SNI); a tunnel to an IP literal must not carry a name at all.
    """
    try:
        is_address = canonical_target(host).address is not None
    except ValueError:
        return "invalid tunnel host"
    if sni is None or sni == "":
        return None if is_address else f"TLS without SNI to {host}"
    try:
        same = str(canonical_target(sni)) == host
    except ValueError:
        same = False
    if is_address or not same:
        return f"TLS SNI {_shown(sni)} does not match the CONNECT host {host}"
    return None


def denial_text(host: str, port: int, decision: Decision, origin: str) -> str:
    """The one line a person or a coding agent reads in a 403."""
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    where = origin or "the stockade policy"
    command = allow_command(decision.hint, origin) if decision.hint else ""
    if command:
        fix = f"to allow it, run: {command}"
    elif decision.hint:
        fix = f"to allow it, add `{decision.hint}` under [network] in {where}"
    elif decision.rule.startswith('deny "'):
        fix = f"it is listed under deny in [network] of {where}"
    else:
        fix = "no policy change allows this request"
    return f"stockade: the sandbox's policy blocked {target} ({decision.rule}); going around the proxy will not work; {fix}\n"


def auth_required_response() -> http.Response:
    return http.Response.make(
        407,
        "stockade: this proxy serves registered stockade sessions only (Proxy-Authorization required).\n",
        {"Proxy-Authenticate": 'Basic realm="stockade"', "Content-Type": "text/plain; charset=utf-8"},
    )


def _text_response(status: int, text: str) -> http.Response:
    """A body a sandboxed tool may print to the user's terminal: one line per line, shown safely."""
    body = "\n".join(shown(line) for line in text.split("\n"))
    return http.Response.make(status, body, {"Content-Type": "text/plain; charset=utf-8"})


def _body_too_big_to_answer(request: http.Request) -> bool:
    """True if a denied request's body cannot be waited for: it is killed instead of answered.

    mitmproxy sends a response set in `requestheaders` only after reading the
    whole request body, and cannot both answer and stream; a body over
    `stream_large_bodies` (or of unknown, chunked length) would either sit in
    memory or break the stream. Such a request gets its connection closed.
    """
    if request.method == "CONNECT":
        return False
    if "transfer-encoding" in request.headers:
        return True
    length = request.headers.get("content-length", "0").strip()
    return not length.isdigit() or int(length) > DENIED_BODY_LIMIT


def _counter(tracked: Tracked, attribute: str) -> Callable[[bytes], bytes]:
    """A `stream` callable: the body flows through unbuffered and is counted on the way."""
    record = tracked.record

    def count(chunk: bytes) -> bytes:
        setattr(record, attribute, getattr(record, attribute) + len(chunk))
        return chunk

    return count


def _head_size(message: http.Message) -> int:
    """Bytes of a message's start line and headers, about as they cross the wire."""
    size = sum(len(k) + len(v) + 4 for k, v in message.headers.fields) + 2
    if isinstance(message, http.Request):
        return size + len(message.method) + len(message.path) + 11
    reason = message.reason if isinstance(message, http.Response) else ""
    return size + len(reason or "") + 15


def _handler(client: connection.Client) -> Any:
    """mitmproxy's ConnectionHandler of a client connection, or None."""
    proxyserver = ctx.master.addons.get("proxyserver")
    if proxyserver is None:
        return None
    found = proxyserver.connections.get(client.id)
    if getattr(found, "client", None) is client:
        return found
    # Else by identity: the key of `connections` differs between mitmproxy versions.
    return next((h for h in proxyserver.connections.values() if getattr(h, "client", None) is client), None)


def _peer(server: connection.Server) -> str | None:
    return str(server.peername[0]) if server.peername else None


def _shown(host: str) -> str:
    try:
        return str(canonical_target(host))
    except ValueError:
        return host.encode("unicode_escape").decode("ascii")[:255]


def _where(flow: http.HTTPFlow) -> str:
    return f"{_shown(flow.request.host)}:{flow.request.port}"


async def _paced(session: Session) -> None:
    """Wait for this denial's slot (sessions.DENIAL_RATE): a flood of denials is slowed, not served at once."""
    delay = session.denial_pace.delay(time.monotonic())
    if delay > 0:
        await asyncio.sleep(delay)
