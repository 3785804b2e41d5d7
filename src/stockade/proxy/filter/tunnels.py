"""What may travel inside an allowed CONNECT tunnel: checked TLS, passed through or inspected; nothing else.

- `tls_clienthello`: the SNI must be the CONNECT host; then the TLS stream
  passes through untouched (`ignore_connection`), unless the host has HTTP
  rules ([network.http."HOST"]): then mitmproxy terminates it with
  stockade's CA and Decisions judges each request inside. On a mismatch
  the tunnel is cut by the `Meter` around it (metering.py), never
  "ignored" (that would pass it);
- `tls_start_client`: stockade terminates a client's TLS only for a host
  with HTTP rules;
- `tcp_start`: raw TCP in a tunnel is killed (only TLS or HTTP may tunnel),
  except the continuation of an allowed HTTP upgrade (101), which gets a
  record of its own; never on a host with HTTP rules, whose later bytes
  could hold requests nobody judged (only WebSocket, parsed, goes on there);
  and except SSH in a tunnel whose port an allow rule names (`github.com:22`,
  not 80 or 443, not a host with HTTP rules: `decide.raw_tcp_allowed`):
  `next_layer` lets raw TCP there only when the client's first bytes are an
  SSH banner ("SSH-"), so the port carries no TLS with another SNI and no
  HTTP nobody judged; it then passes as it is, metered like a TLS
  pass-through, its record's scheme "ssh". A connection at a forwarded
  loopback port (bwrap/parts/forwards.py) passes raw TCP of any kind: its door
  opened the tunnel to the allow entry itself, which names that port
  (a database's protocol); its record's scheme is "tcp".

mitmproxy swallows exceptions from hooks and carries on (the flow passes),
so every hook here catches everything itself and denies.
"""

from __future__ import annotations

import dataclasses
import logging

from mitmproxy import connection, tcp, tls
from mitmproxy.proxy import layer
from mitmproxy.proxy.layers import TCPLayer

from stockade.proxy.audit import now_iso
from stockade.proxy.filter.placeholders import carried
from stockade.proxy.filter.refusal import INTERNAL_ERROR, cut_tcp, shown_host
from stockade.proxy.filter.state import META, Connections
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.rules.decide import (
    HTTP_PORTS,
    Decision,
    allow_line,
    canonical_target,
    has_credentials,
    has_http_rules,
    inspected,
    raw_tcp_allowed,
)

logger = logging.getLogger(__name__)

RAW_TCP = "raw TCP is not allowed through a tunnel (only TLS or HTTP, and SSH to a host:port allow entry)"
SSH_BANNER = b"SSH-"  # how an SSH client opens (RFC 4253 4.2): the only raw TCP a host:port rule lets through
INSPECTED_UPGRADE = "an upgrade to raw TCP on a host with HTTP rules (its requests could no longer be judged)"


class Tunnels:
    def __init__(self, connections: Connections) -> None:
        self.connections = connections

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        state = self.connections.client(data.context.client)
        tracked = state.tunnel
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
            rules = tracked.session.rules
            tables = inspected(rules, tracked.record.host, tracked.record.port)
            if tables or carried(rules.secrets, tracked.record.host, tracked.record.port):
                state.inspected = tables  # TlsConfig makes the certificate; every request is judged (requests.py)
                state.terminated = True
                data.establish_server_tls_first = True  # the origin's ALPN (h2 or http/1.1) is the one offered back
                return
            data.establish_server_tls_first = False
            data.ignore_connection = True  # pass the TLS stream through, untouched
            if state.meter is not None:
                state.meter.passthrough = True
        except Exception:
            logger.exception("tls_clienthello failed; cutting the tunnel")
            data.ignore_connection = False
            tracked.deny(Decision(False, INTERNAL_ERROR, "", tracked.record.host))

    def tls_start_client(self, data: tls.TlsData) -> None:
        """Only a tunnel to a host with HTTP rules has its TLS terminated; any other attempt fails the connection."""
        state = self.connections.client(data.context.client)
        if state.terminated and state.tunnel is not None and not state.tunnel.cut:
            return  # TlsConfig (before us) set up the connection with stockade's CA
        data.ssl_conn = None
        tracked = state.tunnel
        if tracked is not None and not tracked.cut:
            tracked.deny(Decision(False, "TLS interception refused", "", tracked.record.host))

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        """Raw TCP chosen for a tunnel a host:port rule opens: SSH (its first bytes say so) may pass; else tcp_start kills it."""
        state = self.connections.client(nextlayer.context.client)
        tracked = state.tunnel
        if tracked is None or state.meter is not None or state.raw or not isinstance(nextlayer.layer, TCPLayer):
            return
        try:
            if state.inspected:
                return
            if state.forwarded:  # the allow entry names this very port, and the door chose the target: any protocol
                state.raw = True
                tracked.record.scheme = "tcp"
                return
            if not raw_tcp_allowed(tracked.session.rules, tracked.record.host, tracked.record.port):
                return
            data = nextlayer.data_client()
            if data.startswith(SSH_BANNER):
                state.raw = True
                tracked.record.scheme = "ssh"
            elif SSH_BANNER.startswith(data):
                nextlayer.layer = None  # a banner in pieces: decide on more bytes
        except Exception:
            logger.exception("next_layer failed; cutting the tunnel")
            tracked.deny(Decision(False, INTERNAL_ERROR, "", tracked.record.host))

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        try:
            upgraded = self._take_upgrade(flow.server_conn)
            if upgraded is not None and not upgraded.session.stopped:
                record = dataclasses.replace(upgraded.record, scheme="tcp", time=now_iso(), bytes_up=0, bytes_down=0, error=None, path=None)
                tracked = Tracked(upgraded.session, dataclasses.replace(record, flow=None))
                flow.metadata[META] = tracked
                rules = upgraded.session.rules
                host, port = upgraded.record.host, upgraded.record.port
                if self.connections.client(flow.client_conn).terminated or inspected(rules, host, port) or carried(rules.secrets, host, port):
                    # A host with HTTP rules has each request judged; raw bytes after a 101 could carry
                    # any request (h2c smuggling). Only WebSocket (parsed messages) continues there.
                    self._kill_tcp(flow, tracked, Decision(False, INSPECTED_UPGRADE, "", tracked.record.host))
                elif not tracked.opened():
                    cut_tcp(flow)
                return
            host = flow.server_conn.address[0] if flow.server_conn.address else "?"
            state = self.connections.client(flow.client_conn)
            tunnel = state.tunnel
            if tunnel is not None:
                tunnel.record.scheme = "tcp"
                host = tunnel.record.host
                if state.raw and not state.inspected and (state.forwarded or raw_tcp_allowed(tunnel.session.rules, host, tunnel.record.port)):
                    # next_layer saw an SSH banner, or this is a forwarded loopback port; the Meter counts it, the splicer may take it
                    tunnel.record.scheme = "tcp" if state.forwarded else "ssh"
                    if state.meter is not None:
                        state.meter.passthrough = True
                    return
            self._kill_tcp(flow, tunnel, Decision(False, RAW_TCP, _raw_hint(tunnel), host))
        except Exception:
            logger.exception("tcp_start failed; killing the flow")
            self._kill_tcp(flow, None, Decision(False, INTERNAL_ERROR))

    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        """An allowed SSH tunnel: its messages are not kept (the Meter counted them)."""
        if META not in flow.metadata and self.connections.client(flow.client_conn).raw:
            flow.messages.clear()  # relayed already; keep memory flat on long connections

    def _take_upgrade(self, server: connection.Server) -> Tracked | None:
        """The allowed upgrade (101) whose raw TCP continuation this server connection carries, once."""
        state = self.connections.server(server)
        upgraded, state.upgraded = state.upgraded, None
        return upgraded

    def _kill_tcp(self, flow: tcp.TCPFlow, tracked: Tracked | None, decision: Decision) -> None:
        # mitmproxy 11 does not stop a TCP flow killed in tcp_start; refusing its
        # server connection (the backstop reads `refused`) and cutting the tunnel do.
        self.connections.server(flow.server_conn).refused = decision
        if tracked is not None:
            tracked.deny(decision)
        cut_tcp(flow)  # an upgrade's server is connected already: refusing the dial alone would not stop it


def _raw_hint(tunnel: Tracked | None) -> str:
    """The allow line that opens SSH to this tunnel's host:port (none for 80 and 443, nor a host with HTTP rules
    or a credential, nor where that rule is there already: then what was refused was not SSH)."""
    if tunnel is None or tunnel.record.port in HTTP_PORTS:
        return ""
    rules = tunnel.session.rules
    if has_http_rules(rules, tunnel.record.host) or has_credentials(rules, tunnel.record.host):
        return ""
    if raw_tcp_allowed(tunnel.session.rules, tunnel.record.host, tunnel.record.port):
        return ""
    return allow_line(endpoint_text(tunnel.record.host, tunnel.record.port))


def endpoint_text(host: str, port: int) -> str:
    """host:port as a rule spells it ([v6]:port for an IPv6 address)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
        return f"TLS SNI {shown_host(sni)} does not match the CONNECT host {host}"
    return None
