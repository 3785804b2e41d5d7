"""Tests of tunnels.py (Tunnels: what may travel in a tunnel).

Most run the whole filter chain (tests/proxy/filterkit.py), as the daemon does: what an addon
must do depends on what the addons before it decided."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
from mitmproxy.connection import Client
from mitmproxy.options import Options
from mitmproxy.proxy import events, layer, server_hooks
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layers import TCPLayer
from mitmproxy.tcp import TCPMessage
from mitmproxy.test import taddons, tflow, tutils
from mitmproxy.tls import TlsData

from stockade.proxy.audit import AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.filter import tunnels
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.state import Connections
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.filter.tunnels import Tunnels
from tests.proxy.filterkit import FakeResolver, FilterChain, boom, connect_flow, get_flow, hello, register


@pytest.mark.parametrize(
    "connect, sni, passes",
    [
        pytest.param("allowed.test", "allowed.test", True, id="same name"),
        pytest.param("allowed.test", "ALLOWED.test.", True, id="same name, other spelling"),
        pytest.param("allowed.test", "denied.test", False, id="fronting"),
        pytest.param("allowed.test", None, False, id="no SNI"),
        pytest.param("allowed.test", "", False, id="empty SNI"),
        pytest.param("a.wild.test", "blocked.wild.test", False, id="SNI of a denied sibling"),
    ],
)
async def test_tls_clienthello(
    chain: FilterChain,
    make_spec: Callable[..., SessionSpec],
    audit_lines: Callable[[], list[dict[str, object]]],
    connect: str,
    sni: str | None,
    passes: bool,
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = connect_flow(connect, 8443, token)
        await chain.http_connect(f)
        data = hello(f.client_conn, sni)
        data.ignore_connection = True  # whatever ran before us, only a match passes
        chain.tls_clienthello(data)
        tracked = chain.connections.client(f.client_conn).tunnel
    assert data.ignore_connection is passes
    assert (tracked.cut is None) is passes
    if not passes:
        (record,) = audit_lines()
        assert record["decision"] == "deny" and record["scheme"] == "tls" and record["sni"] == sni


@pytest.mark.parametrize(
    "sni, host, reason",
    [
        pytest.param("allowed.test", "allowed.test", None, id="match"),
        pytest.param(None, "198.51.100.7", None, id="ip tunnel without SNI"),
        pytest.param("allowed.test", "198.51.100.7", "does not match", id="ip tunnel with a name"),
        pytest.param(None, "allowed.test", "without SNI", id="name tunnel without SNI"),
        pytest.param("a\x1b.test", "allowed.test", "does not match", id="garbage SNI"),
    ],
)
def test_sni_mismatch(sni: str | None, host: str, reason: str | None) -> None:
    result = tunnels.sni_mismatch(sni, host)
    assert (result is None) if reason is None else (result is not None and reason in result)


async def test_tls_outside_a_tunnel_is_never_passed_or_intercepted(chain: FilterChain) -> None:
    with chain.context():
        client = tflow.tclient_conn()
        data = hello(client, "allowed.test")
        data.ignore_connection = True
        chain.tls_clienthello(data)
        assert data.ignore_connection is False
        start = TlsData(client, Context(client, Options()))
        start.ssl_conn = object()  # type: ignore[assignment]
        chain.tls_start_client(start)
        assert start.ssl_conn is None


async def test_raw_tcp_in_a_tunnel_is_killed_and_never_dialed(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = connect_flow("allowed.test", 8443, token)
        await chain.http_connect(f)
        t = tflow.ttcpflow()
        t.client_conn = f.client_conn
        chain.tcp_start(t)
        assert t.error is not None and t.error.msg == t.error.KILLED_MESSAGE
        data = server_hooks.ServerConnectionHookData(client=f.client_conn, server=t.server_conn)
        await chain.server_connect(data)
        assert data.server.error and tunnels.RAW_TCP in data.server.error
    (record,) = audit_lines()
    assert (record["decision"], record["rule"], record["scheme"]) == ("deny", tunnels.RAW_TCP, "tcp")


async def test_tcp_after_an_allowed_upgrade_is_counted(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
        f.response = tutils.tresp(status_code=101, content=b"")
        chain.response(f)
        t = tflow.ttcpflow()
        t.messages.clear()
        t.client_conn, t.server_conn = f.client_conn, f.server_conn
        chain.tcp_start(t)
        assert t.error is None
        t.messages.append(TCPMessage(True, b"hello"))
        chain.tcp_message(t)
        t.messages.append(TCPMessage(False, b"world!"))
        chain.tcp_message(t)
        assert t.messages == []
        chain.tcp_end(t)
    upgrade, stream = audit_lines()
    assert upgrade["scheme"] == "http" and stream["scheme"] == "tcp"
    assert (stream["bytes_up"], stream["bytes_down"]) == (5, 6)


async def test_exception_in_tls_clienthello_cuts(chain: FilterChain, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = connect_flow("allowed.test", 8443, token)
        await chain.http_connect(f)
        monkeypatch.setattr(tunnels, "sni_mismatch", boom)
        data = hello(f.client_conn, "allowed.test")
        chain.tls_clienthello(data)
    assert data.ignore_connection is False
    assert chain.connections.client(f.client_conn).tunnel.cut


async def test_exception_in_tcp_start_kills(chain: FilterChain, monkeypatch: pytest.MonkeyPatch) -> None:
    with chain.context():
        t = tflow.ttcpflow()
        monkeypatch.setattr(chain.filter.tunnels, "_take_upgrade", boom)
        chain.tcp_start(t)
    assert t.error is not None and t.error.msg == t.error.KILLED_MESSAGE


# -- Tunnels alone ---------------------------------------------------------------


def tunnel_of(connections: Connections, client: Client, spec: SessionSpec) -> Tracked:
    """An allowed tunnel to allowed.test, as Decisions leaves it."""
    _token, session = Registry().register(spec)
    record = AuditRecord(
        session=spec.session_id, command=[], scheme="connect", host="allowed.test", port=8443, decision="allow", rule='allow "allowed.test"'
    )
    tracked = connections.client(client).tunnel = Tracked(session, record)
    return tracked


async def test_a_checked_clienthello_lets_the_meter_hand_over_the_tunnel(make_spec: Callable[..., SessionSpec]) -> None:
    connections = Connections()
    alone = Tunnels(connections)
    client = tflow.tclient_conn()
    tunnel_of(connections, client, make_spec())
    meter = connections.client(client).meter = SimpleNamespace(passthrough=False)  # type: ignore[assignment]
    with taddons.context(alone):
        alone.tls_clienthello(hello(client, "allowed.test"))
    assert meter.passthrough is True


async def test_killed_raw_tcp_leaves_its_dial_refused(make_spec: Callable[..., SessionSpec]) -> None:
    connections = Connections()
    alone = Tunnels(connections)
    t = tflow.ttcpflow()
    tracked = tunnel_of(connections, t.client_conn, make_spec())
    with taddons.context(alone):
        alone.tcp_start(t)
    refused = connections.server(t.server_conn).refused
    assert refused is not None and refused.rule == tunnels.RAW_TCP and tracked.cut == tunnels.RAW_TCP


# -- raw TCP a host:port rule allows (ssh) ----------------------------------------


def chosen_tcp(chain: FilterChain, client: Client, first: bytes) -> layer.NextLayer:
    """mitmproxy's NextLayer chose raw TCP for a tunnel whose client sent `first`; the chain's next_layer has run."""
    context = Context(client, Options())
    nextlayer = layer.NextLayer(context)
    nextlayer.events.append(events.DataReceived(client, first))
    nextlayer.layer = TCPLayer(context)
    chain.next_layer(nextlayer)
    return nextlayer


SSH = b"SSH-2.0-OpenSSH_9.2\r\n"


@pytest.mark.parametrize(
    "allow, http, port, first, passes",
    [
        pytest.param(("allowed.test:2222",), (), 2222, SSH, True, id="the port named"),
        pytest.param(("allowed.test:2222",), (), 2222, b"\x00RAW", False, id="not SSH on the port named"),
        pytest.param(("allowed.test:2222",), (), 2222, b"\x16\x03\x01 after all", False, id="TLS once the layer was chosen"),
        pytest.param(("allowed.test",), (), 2222, SSH, False, id="a rule without a port"),
        pytest.param(("allowed.test:2222", "allowed.test"), (), 2223, SSH, False, id="another port"),
        pytest.param(("allowed.test:443",), (), 443, SSH, False, id="443 stays TLS or HTTP"),
        pytest.param(("allowed.test:80",), (), 80, SSH, False, id="80 stays TLS or HTTP"),
        pytest.param(("allowed.test:2222",), (("allowed.test", ("GET /**",), ()),), 2222, SSH, False, id="a host with HTTP rules"),
    ],
)
async def test_ssh_passes_only_where_a_rule_names_its_port(
    chain: FilterChain,
    make_spec: Callable[..., SessionSpec],
    audit_lines: Callable[[], list[dict[str, object]]],
    allow: tuple[str, ...],
    http: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...],
    port: int,
    first: bytes,
    passes: bool,
) -> None:
    chain.resolver = FakeResolver({"allowed.test": ["203.0.113.7"]})  # a public address (never dialed here): any port
    token = register(chain, make_spec(allow=allow, http=http))
    with chain.context():
        f = connect_flow("allowed.test", port, token)
        await chain.http_connect(f)
        assert f.response is None  # the CONNECT itself is allowed either way
        chosen_tcp(chain, f.client_conn, first)
        t = tflow.ttcpflow()
        t.messages.clear()
        t.client_conn = f.client_conn
        chain.tcp_start(t)
        if not passes:
            assert t.error is not None and t.error.msg == t.error.KILLED_MESSAGE
            data = server_hooks.ServerConnectionHookData(client=f.client_conn, server=t.server_conn)
            await chain.server_connect(data)
            assert data.server.error and tunnels.RAW_TCP in data.server.error
            (record,) = audit_lines()
            assert (record["decision"], record["rule"], record["scheme"]) == ("deny", tunnels.RAW_TCP, "tcp")
            return
        assert t.error is None
        t.messages.append(TCPMessage(True, first))
        chain.tcp_message(t)
        assert t.messages == []  # not kept: long connections stay flat
        chain.tcp_end(t)
        chain.client_disconnected(f.client_conn)
    start, end = audit_lines(True)
    assert (start["phase"], end["phase"], end["decision"], end["scheme"], end["port"]) == ("start", "end", "allow", "ssh", port)


async def test_a_refused_raw_tunnel_names_the_rule_that_would_allow_it(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    chain.resolver = FakeResolver({"allowed.test": ["203.0.113.7"]})  # a public address (never dialed here): any port
    token = register(chain, make_spec(allow=("allowed.test",)))
    with chain.context():
        f = connect_flow("allowed.test", 22, token)
        await chain.http_connect(f)
        chosen_tcp(chain, f.client_conn, SSH)
        t = tflow.ttcpflow()
        t.client_conn = f.client_conn
        chain.tcp_start(t)
    (record,) = audit_lines()
    assert record["hint"] == 'allow = ["allowed.test:22"]'


async def test_an_allowed_ssh_tunnel_is_offered_to_the_splicer(make_spec: Callable[..., SessionSpec]) -> None:
    connections = Connections()
    alone = Tunnels(connections)
    t = tflow.ttcpflow()
    tracked = tunnel_of(connections, t.client_conn, make_spec(allow=("allowed.test:8443",)))
    context = Context(t.client_conn, Options())
    nextlayer = layer.NextLayer(context)
    nextlayer.events.append(events.DataReceived(t.client_conn, SSH))
    nextlayer.layer = TCPLayer(context)
    with taddons.context(alone):
        alone.next_layer(nextlayer)
        meter = connections.client(t.client_conn).meter = SimpleNamespace(passthrough=False)  # type: ignore[assignment]
        alone.tcp_start(t)
    assert t.error is None and tracked.cut is None and meter.passthrough is True and tracked.record.scheme == "ssh"


@pytest.mark.parametrize("first, waits", [(b"S", True), (b"SSH", True), (b"SSH-", False), (b"SX", False), (b"", True)])
async def test_a_banner_in_pieces_waits_for_more_bytes(make_spec: Callable[..., SessionSpec], first: bytes, waits: bool) -> None:
    connections = Connections()
    alone = Tunnels(connections)
    client = tflow.tclient_conn()
    tunnel_of(connections, client, make_spec(allow=("allowed.test:8443",)))
    context = Context(client, Options())
    nextlayer = layer.NextLayer(context)
    nextlayer.events.append(events.DataReceived(client, first))
    nextlayer.layer = TCPLayer(context)
    with taddons.context(alone):
        alone.next_layer(nextlayer)
    assert (nextlayer.layer is None) is waits
    assert connections.client(client).raw is (first == b"SSH-")
