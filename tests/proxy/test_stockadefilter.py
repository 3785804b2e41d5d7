from __future__ import annotations

import base64
import ipaddress
import json
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from mitmproxy import exceptions, http
from mitmproxy.connection import Client, Server
from mitmproxy.options import Options
from mitmproxy.proxy import server_hooks
from mitmproxy.proxy.context import Context
from mitmproxy.tcp import TCPMessage
from mitmproxy.test import taddons, tflow, tutils
from mitmproxy.tls import ClientHelloData, TlsData
from mitmproxy.tools.dump import DumpMaster

from stockade.proxy import stockadefilter as sf
from stockade.proxy.control import SessionSpec
from stockade.proxy.decide import Decision
from stockade.proxy.resolver import Resolved
from stockade.proxy.stockadefilter import (
    StockadeFilter,
    denial_text,
    host_mismatch,
    parse_proxy_authorization,
    sni_mismatch,
)

ip = ipaddress.ip_address
UPSTREAM = ip("127.0.0.1")


def credential(token: str, user: str = "stockade") -> str:
    """The Proxy-Authorization value the relay inserts."""
    return "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


class FakeResolver:
    """Answers from a table; every test upstream is 127.0.0.1:8443; records what was asked."""

    def __init__(self, names: dict[str, list[str]] | None = None) -> None:
        self.names = names or {
            "allowed.test": ["127.0.0.1"],
            "a.wild.test": ["127.0.0.1"],
            "rebind.wild.test": ["127.0.0.1"],
            "meta.wild.test": ["169.254.169.254"],
            "public.wild.test": ["93.184.216.34"],
        }
        self.queries: list[str] = []

    async def __call__(self, host: str, port: int) -> Resolved:
        self.queries.append(host)
        try:
            return Resolved((ip(host),), frozenset({(UPSTREAM, 8443)}))
        except ValueError:
            pass
        return Resolved(tuple(ip(a) for a in self.names.get(host.lower().rstrip("."), [])), frozenset({(UPSTREAM, 8443)}))


@pytest.fixture
def addon() -> StockadeFilter:
    filt = StockadeFilter()
    filt.own_addresses = lambda: frozenset()  # type: ignore[method-assign]
    return filt


def register(addon: StockadeFilter, spec: SessionSpec) -> str:
    token, _session = addon.registry.register(spec)
    return token


def connect_flow(host: str, port: int = 8443, token: str | None = None, client: Client | None = None) -> http.HTTPFlow:
    f = tflow.tflow(req=tutils.treq(method=b"CONNECT", host=host, port=port, path=b"", headers=http.Headers(), content=b""))
    if client is not None:
        f.client_conn = client
    if token is not None:
        f.request.headers["Proxy-Authorization"] = credential(token)
    return f


def get_flow(
    host: str,
    port: int = 8443,
    token: str | None = None,
    host_header: str | None = "",
    path: bytes = b"/p?q=1&token=s3cret",
    client: Client | None = None,
) -> http.HTTPFlow:
    headers = http.Headers()
    if host_header == "":
        host_header = host if port == 80 else f"{host}:{port}"
    if host_header is not None:
        headers["Host"] = host_header
    f = tflow.tflow(req=tutils.treq(host=host, port=port, path=path, headers=headers, content=b""))
    if client is not None:
        f.client_conn = client
    if token is not None:
        f.request.headers["Proxy-Authorization"] = credential(token)
    return f


def hello(client: Client, sni: str | None) -> ClientHelloData:
    return ClientHelloData(Context(client, Options()), SimpleNamespace(sni=sni))  # type: ignore[arg-type]


def hook_data(client: Client, address: tuple[str, int]) -> server_hooks.ServerConnectionHookData:
    return server_hooks.ServerConnectionHookData(client=client, server=Server(address=address))


# -- the addon in mitmproxy ----------------------------------------------------


async def test_addon_loads_into_dumpmaster_without_name_clash() -> None:
    master = DumpMaster(Options(), with_termlog=False, with_dumper=False)
    master.addons.add(StockadeFilter())
    assert master.addons.get("stockadefilter") is not None


async def test_options_are_prefixed() -> None:
    filt = StockadeFilter()
    with taddons.context(filt) as tctx:
        ours = {name for name in tctx.options.keys() if name not in Options().keys()}
    assert ours and all(name.startswith("stockade_") for name in ours)


async def test_test_resolver_option(tmp_path: Path) -> None:
    table = tmp_path / "names.json"
    table.write_text(json.dumps({"names": {"allowed.test": ["127.0.0.1"]}, "upstreams": ["127.0.0.1:8443"]}))
    filt = StockadeFilter()
    with taddons.context(filt) as tctx:
        tctx.configure(filt, stockade_test_resolver=str(table))
        resolved = await filt.resolver("Allowed.Test.", 8443)
        assert resolved.addresses == (UPSTREAM,)
        assert (UPSTREAM, 8443) in resolved.upstreams
        assert (await filt.resolver("other.test", 80)).addresses == ()


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(None, "No such file", id="missing file"),
        pytest.param("not json", "Expecting value", id="not json"),
        pytest.param("[1]", "expected an object", id="not an object"),
        pytest.param('{"names": []}', "expected an object", id="names not an object"),
    ],
)
async def test_test_resolver_option_rejects(tmp_path: Path, content: str | None, message: str) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"names": {}}')
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    filt = StockadeFilter()
    with taddons.context(filt) as tctx:
        tctx.configure(filt, stockade_test_resolver=str(good))
        with pytest.raises(exceptions.OptionsError, match=f"stockade_test_resolver: cannot use .*{message}"):
            tctx.configure(filt, stockade_test_resolver=str(bad))
        assert tctx.options.stockade_test_resolver == str(good)


# -- authentication ----------------------------------------------------------


@pytest.mark.parametrize(
    "value, token",
    [
        pytest.param(credential("tok"), "tok", id="valid"),
        pytest.param("basic " + credential("tok")[6:], "tok", id="scheme is case-insensitive"),
        pytest.param(credential("tok", user="other"), None, id="wrong user"),
        pytest.param(credential(""), None, id="empty token"),
        pytest.param("Bearer tok", None, id="other scheme"),
        pytest.param("Basic !!!", None, id="bad base64"),
        pytest.param("Basic " + "c3RvY2thZGU=", None, id="no colon"),
    ],
)
def test_parse_proxy_authorization(value: str, token: str | None) -> None:
    assert parse_proxy_authorization(value) == token


async def test_no_credential_is_407(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    register(addon, make_spec())
    with taddons.context(addon):
        f = connect_flow("allowed.test")
        await addon.http_connect(f)
        assert f.response is not None and f.response.status_code == 407
        assert "Proxy-Authenticate" in f.response.headers


async def test_unknown_token_is_407(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", token="not-a-session")
        await addon.requestheaders(f)
        assert f.response is not None and f.response.status_code == 407


async def test_credential_binds_the_connection_and_is_stripped(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        first = get_flow("allowed.test", token=token)
        await addon.requestheaders(first)
        assert first.response is None
        assert "Proxy-Authorization" not in first.request.headers
        second = get_flow("allowed.test")  # no header: the relay sends it on the first request only
        second.client_conn = first.client_conn
        await addon.requestheaders(second)
        assert second.response is None


async def test_two_credentials_are_refused(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = connect_flow("allowed.test", token=token)
        f.request.headers.set_all("Proxy-Authorization", [credential(token), credential("sandbox-made")])
        await addon.http_connect(f)
        assert f.response is not None and f.response.status_code == 403
        assert "Proxy-Authorization" not in f.request.headers
        anonymous = connect_flow("allowed.test")
        anonymous.request.headers.set_all("Proxy-Authorization", [credential("x"), credential("y")])
        await addon.http_connect(anonymous)
        assert anonymous.response is not None and anonymous.response.status_code == 407
    assert [r["rule"] for r in audit_lines()] == ["more than one Proxy-Authorization header"]


async def test_session_a_cannot_use_session_b_rules(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    addon.resolver = FakeResolver()
    token_a = register(addon, make_spec(allow=("allowed.test",)))
    token_b = register(addon, make_spec(allow=("a.wild.test",)))
    with taddons.context(addon):
        f = connect_flow("a.wild.test", token=token_a)
        await addon.http_connect(f)
        assert f.response is not None and f.response.status_code == 403
        g = connect_flow("a.wild.test", token=token_b)
        await addon.http_connect(g)
        assert g.response is None


async def test_credential_cannot_switch_session_on_a_connection(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    addon.resolver = FakeResolver()
    token_a = register(addon, make_spec(allow=("allowed.test",)))
    token_b = register(addon, make_spec(allow=("a.wild.test",)))
    with taddons.context(addon):
        first = get_flow("allowed.test", token=token_a)
        await addon.requestheaders(first)
        assert first.response is None
        second = get_flow("a.wild.test", token=token_b)
        second.client_conn = first.client_conn
        await addon.requestheaders(second)
        assert second.response is not None and second.response.status_code == 403
        assert b"does not match this connection" in second.response.content


async def test_ended_session_is_refused(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    addon.resolver = FakeResolver()
    spec = make_spec()
    token = register(addon, spec)
    with taddons.context(addon):
        first = get_flow("allowed.test", token=token)
        await addon.requestheaders(first)
        assert first.response is None
        addon.registry.end(spec.session_id)
        again = get_flow("allowed.test", client=first.client_conn)
        await addon.requestheaders(again)  # the connection is still bound to the ended session
        assert again.response is not None and again.response.status_code == 403
        assert b"session ended" in again.response.content
        fresh = connect_flow("allowed.test", token=token)
        await addon.http_connect(fresh)  # the token is gone
        assert fresh.response is not None and fresh.response.status_code == 407


# -- CONNECT -----------------------------------------------------------------


@pytest.mark.parametrize(
    "host, port, status, rule",
    [
        pytest.param("allowed.test", 8443, None, None, id="allowed"),
        pytest.param("Allowed.TEST.", 8443, None, None, id="allowed, other spelling"),
        pytest.param("a.wild.test", 8443, None, None, id="wildcard"),
        pytest.param("denied.test", 443, 403, "no allow rule matches", id="unlisted"),
        pytest.param("blocked.wild.test", 443, 403, 'deny "blocked.wild.test"', id="deny rule"),
        pytest.param("wild.test", 443, 403, "no allow rule matches", id="apex of wildcard"),
        pytest.param("203.0.113.7", 443, 403, "IP literal not listed", id="ip literal"),
        pytest.param("2130706433", 443, 403, "IP literal not listed", id="decimal ip literal"),
        pytest.param("rebind.wild.test", 9999, 403, "rebind.wild.test resolves to 127.0.0.1 (loopback)", id="rebind"),
        pytest.param("meta.wild.test", 80, 403, "meta.wild.test resolves to 169.254.169.254 (cloud metadata)", id="metadata"),
        pytest.param("nowhere.wild.test", 443, 403, "nowhere.wild.test did not resolve", id="no address"),
    ],
)
async def test_http_connect(
    addon: StockadeFilter,
    make_spec: Callable[..., SessionSpec],
    audit_lines: Callable[[], list[dict[str, object]]],
    host: str,
    port: int,
    status: int | None,
    rule: str | None,
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = connect_flow(host, port, token)
        await addon.http_connect(f)
    if status is None:
        assert f.response is None
        assert f.client_conn in addon.tunnels
        assert audit_lines() == []  # written when the tunnel ends
    else:
        assert f.response is not None and f.response.status_code == status
        assert rule is not None and rule in f.response.text
        (record,) = audit_lines()
        assert (record["decision"], record["rule"], record["method"], record["port"]) == ("deny", rule, "CONNECT", port)


async def test_denied_names_are_never_resolved(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    resolver = FakeResolver()
    addon.resolver = resolver
    token = register(addon, make_spec())
    with taddons.context(addon):
        for host in ("d1.exfil.denied.test", "blocked.wild.test", "x.exfil.test"):
            await addon.http_connect(connect_flow(host, 443, token))
            await addon.requestheaders(get_flow(host, 80, token))
    assert resolver.queries == []


async def test_denial_text_names_rule_and_origin(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    token = register(addon, spec)
    with taddons.context(addon):
        f = connect_flow("denied.test", 443, token)
        await addon.http_connect(f)
    assert f.response is not None
    text = f.response.text
    assert text == (
        "stockade: the sandbox's policy blocked denied.test:443 (no allow rule matches); going around the proxy "
        f"will not work; to allow it, run: stockade allow denied.test --policy {spec.origin}\n"
    )
    assert text.count("\n") == 1


@pytest.mark.parametrize(
    "host, port, rule, expected",
    [
        pytest.param(
            "x.test",
            443,
            Decision(False, "no allow rule matches", 'allow = ["x.test"]'),
            "run: stockade allow x.test --policy /p/.stockade.toml",
            id="hint",
        ),
        pytest.param("b.test", 443, Decision(False, 'deny "b.test"'), "listed under deny", id="deny rule"),
        pytest.param("2001:db8::1", 443, Decision(False, "IP literal not listed", 'allow = ["2001:db8::1"]'), "[2001:db8::1]:443", id="v6"),
        pytest.param("bad", 443, Decision(False, "invalid host name"), "no policy change", id="nothing to add"),
    ],
)
def test_denial_text(host: str, port: int, rule: Decision, expected: str) -> None:
    assert expected in denial_text(host, port, rule, "/p/.stockade.toml")


# -- plain HTTP --------------------------------------------------------------


@pytest.mark.parametrize(
    "host, port, host_header, allowed",
    [
        pytest.param("allowed.test", 8443, "", True, id="matching Host"),
        pytest.param("allowed.test", 8443, "ALLOWED.test.:8443", True, id="Host in another spelling"),
        pytest.param("allowed.test", 8443, None, True, id="no Host header"),
        pytest.param("allowed.test", 8443, "denied.test", False, id="Host names another host"),
        pytest.param("allowed.test", 8443, "allowed.test:9999", False, id="Host names another port"),
        pytest.param("allowed.test", 8443, "allowed.test", False, id="Host without the non-default port"),
        pytest.param("denied.test", 80, "", False, id="denied target"),
        pytest.param("allowed.test", 8443, "bad host", False, id="malformed Host"),
    ],
)
async def test_requestheaders(
    addon: StockadeFilter,
    make_spec: Callable[..., SessionSpec],
    host: str,
    port: int,
    host_header: str | None,
    allowed: bool,
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow(host, port, token, host_header)
        await addon.requestheaders(f)
    if allowed:
        assert f.response is None
        assert callable(f.request.stream)
    else:
        assert f.response is not None and f.response.status_code == 403


async def test_two_host_headers_are_refused(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        f.request.headers.set_all("Host", ["allowed.test:8443", "denied.test"])
        await addon.requestheaders(f)
        assert f.response is not None and b"more than one Host header" in f.response.content


async def test_http_inside_a_tunnel_is_judged_on_the_tunnel(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        tunnel = connect_flow("allowed.test", 8443, token)
        await addon.http_connect(tunnel)
        inner = get_flow("allowed.test", 8443, host_header="allowed.test")  # port-less Host is fine in a tunnel
        inner.client_conn = tunnel.client_conn
        await addon.requestheaders(inner)
        assert inner.response is None
        fronted = get_flow("allowed.test", 8443, host_header="denied.test")
        fronted.client_conn = tunnel.client_conn
        await addon.requestheaders(fronted)
        assert fronted.response is not None and fronted.response.status_code == 403


async def test_http_flow_is_audited_once_with_bytes(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    addon.resolver = FakeResolver()
    spec = make_spec()
    token = register(addon, spec)
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
        assert callable(f.request.stream)
        f.request.stream(b"x" * 100)
        f.response = tutils.tresp(content=b"")
        addon.responseheaders(f)
        assert callable(f.response.stream)
        f.response.stream(b"y" * 1000)
        addon.response(f)
        addon.response(f)  # a second call writes nothing more
    (record,) = audit_lines()
    assert record["decision"] == "allow" and record["rule"] == 'allow "allowed.test"'
    assert record["session"] == spec.session_id and record["command"] == spec.command
    assert record["method"] == "GET" and record["scheme"] == "http"
    assert record["path"] == "/p?q=1&token=REDACTED"
    assert isinstance(record["bytes_up"], int) and record["bytes_up"] > 100
    assert isinstance(record["bytes_down"], int) and record["bytes_down"] > 1000
    assert "s3cret" not in json.dumps(record)


async def test_http_error_is_audited(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
        f.error = tflow.terr("connection reset")
        addon.error(f)
    (record,) = audit_lines()
    assert (record["decision"], record["error"]) == ("allow", "connection reset")


# -- TLS ---------------------------------------------------------------------


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
    addon: StockadeFilter,
    make_spec: Callable[..., SessionSpec],
    audit_lines: Callable[[], list[dict[str, object]]],
    connect: str,
    sni: str | None,
    passes: bool,
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = connect_flow(connect, 8443, token)
        await addon.http_connect(f)
        data = hello(f.client_conn, sni)
        data.ignore_connection = True  # whatever ran before us, only a match passes
        addon.tls_clienthello(data)
        tracked = addon.tunnels[f.client_conn]
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
    result = sni_mismatch(sni, host)
    assert (result is None) if reason is None else (result is not None and reason in result)


async def test_tls_outside_a_tunnel_is_never_passed_or_intercepted(addon: StockadeFilter) -> None:
    with taddons.context(addon):
        client = tflow.tclient_conn()
        data = hello(client, "allowed.test")
        data.ignore_connection = True
        addon.tls_clienthello(data)
        assert data.ignore_connection is False
        start = TlsData(client, Context(client, Options()))
        start.ssl_conn = object()  # type: ignore[assignment]
        addon.tls_start_client(start)
        assert start.ssl_conn is None


async def test_tunnel_record_written_at_disconnect(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = connect_flow("allowed.test", 8443, token)
        await addon.http_connect(f)
        addon.tls_clienthello(hello(f.client_conn, "allowed.test"))
        tracked = addon.tunnels[f.client_conn]
        tracked.record.bytes_up, tracked.record.bytes_down = 10, 20
        addon.client_disconnected(f.client_conn)
        addon.client_disconnected(f.client_conn)
    (record,) = audit_lines()
    assert record["decision"] == "allow" and record["scheme"] == "tls" and record["sni"] == "allowed.test"
    assert (record["bytes_up"], record["bytes_down"], record["method"]) == (10, 20, "CONNECT")


# -- raw TCP and DNS ---------------------------------------------------------


async def test_raw_tcp_in_a_tunnel_is_killed_and_never_dialed(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = connect_flow("allowed.test", 8443, token)
        await addon.http_connect(f)
        t = tflow.ttcpflow()
        t.client_conn = f.client_conn
        addon.tcp_start(t)
        assert t.error is not None and t.error.msg == t.error.KILLED_MESSAGE
        data = server_hooks.ServerConnectionHookData(client=f.client_conn, server=t.server_conn)
        await addon.server_connect(data)
        assert data.server.error and sf.RAW_TCP in data.server.error
    (record,) = audit_lines()
    assert (record["decision"], record["rule"], record["scheme"]) == ("deny", sf.RAW_TCP, "tcp")


async def test_tcp_after_an_allowed_upgrade_is_counted(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
        f.response = tutils.tresp(status_code=101, content=b"")
        addon.response(f)
        t = tflow.ttcpflow()
        t.messages.clear()
        t.client_conn, t.server_conn = f.client_conn, f.server_conn
        addon.tcp_start(t)
        assert t.error is None
        t.messages.append(TCPMessage(True, b"hello"))
        addon.tcp_message(t)
        t.messages.append(TCPMessage(False, b"world!"))
        addon.tcp_message(t)
        assert t.messages == []
        addon.tcp_end(t)
    upgrade, stream = audit_lines()
    assert upgrade["scheme"] == "http" and stream["scheme"] == "tcp"
    assert (stream["bytes_up"], stream["bytes_down"]) == (5, 6)


async def test_dns_is_refused(addon: StockadeFilter) -> None:
    with taddons.context(addon):
        f = tflow.tdnsflow()
        addon.dns_request(f)
        assert f.response is not None and f.response.response_code == 5  # REFUSED


# -- the backstop --------------------------------------------------------------


async def test_server_connect_dials_the_checked_address(addon: StockadeFilter, make_spec: Callable[..., SessionSpec]) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
        data = hook_data(f.client_conn, ("allowed.test", 8443))
        await addon.server_connect(data)
        assert data.server.error is None
        assert data.server.address == ("127.0.0.1", 8443)
        addon.server_connected(data)
        assert data.server.address == ("allowed.test", 8443)  # named again, so mitmproxy reuses it


@pytest.mark.parametrize(
    "address, bound, error",
    [
        pytest.param(("denied.test", 443), True, "no allow rule matches", id="denied name"),
        pytest.param(("rebind.wild.test", 80), True, "(loopback)", id="rebinding"),
        pytest.param(("127.0.0.1", 8443), True, "IP literal not listed", id="literal"),
        pytest.param(("allowed.test", 8443), False, "no live session", id="unauthenticated client"),
    ],
)
async def test_server_connect_refuses(
    addon: StockadeFilter,
    make_spec: Callable[..., SessionSpec],
    address: tuple[str, int],
    bound: bool,
    error: str,
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token if bound else None)
        await addon.requestheaders(f)
        data = hook_data(f.client_conn, address)
        await addon.server_connect(data)
        assert data.server.error is not None and error in data.server.error
        assert data.server.address == address


async def test_backstop_refusal_is_audited_on_the_flow(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    resolver = FakeResolver()
    addon.resolver = resolver
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("a.wild.test", 8443, token)
        await addon.requestheaders(f)
        addon.pending.clear()  # the name now resolves elsewhere: the backstop looks again
        resolver.names["a.wild.test"] = ["10.0.0.5"]
        data = hook_data(f.client_conn, ("a.wild.test", 8443))
        await addon.server_connect(data)
        assert data.server.error and "(private)" in data.server.error
        f.error = tflow.terr(f"Connection killed: {data.server.error}")
        addon.error(f)
    (record,) = audit_lines()
    assert record["decision"] == "deny" and "10.0.0.5 (private)" in str(record["rule"])


# -- failing closed ----------------------------------------------------------


def boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom")


async def test_exception_in_http_connect_denies(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    token = register(addon, make_spec())
    monkeypatch.setattr(sf, "decide", boom)
    with taddons.context(addon):
        f = connect_flow("allowed.test", 8443, token)
        await addon.http_connect(f)
    assert f.response is not None and f.response.status_code == 403
    assert f.client_conn not in addon.tunnels


async def test_exception_in_requestheaders_denies(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch, audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    addon.resolver = boom  # type: ignore[assignment]
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
    assert f.response is not None and f.response.status_code == 403
    (record,) = audit_lines()
    assert record["decision"] == "deny" and record["rule"] == sf.INTERNAL_ERROR


async def test_exception_in_server_connect_refuses(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
        monkeypatch.setattr(sf, "check_resolved", boom)
        data = hook_data(f.client_conn, ("allowed.test", 8443))
        await addon.server_connect(data)
    assert data.server.error and "internal error" in data.server.error


async def test_exception_in_tls_clienthello_cuts(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = connect_flow("allowed.test", 8443, token)
        await addon.http_connect(f)
        monkeypatch.setattr(sf, "sni_mismatch", boom)
        data = hello(f.client_conn, "allowed.test")
        addon.tls_clienthello(data)
    assert data.ignore_connection is False
    assert addon.tunnels[f.client_conn].cut


async def test_exception_in_tcp_start_kills(addon: StockadeFilter, monkeypatch: pytest.MonkeyPatch) -> None:
    with taddons.context(addon):
        t = tflow.ttcpflow()
        monkeypatch.setattr(addon.upgraded, "pop", boom)
        addon.tcp_start(t)
    assert t.error is not None and t.error.msg == t.error.KILLED_MESSAGE


async def test_failed_audit_write_refuses_the_next_flow(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], tmp_path: Path
) -> None:
    addon.resolver = FakeResolver()
    spec = make_spec()
    token = register(addon, spec)
    audit = Path(spec.audit_path)
    with taddons.context(addon):
        first = connect_flow("denied.test", 443, token)
        await addon.http_connect(first)
        assert audit.exists()
        audit.unlink()
        audit.mkdir()  # the log can no longer be written
        second = connect_flow("denied-too.test", 443, token)  # another destination: a line of its own
        await addon.http_connect(second)  # this record is lost: the session stops
        third = connect_flow("allowed.test", 8443, token, client=second.client_conn)
        await addon.http_connect(third)
    assert third.response is not None and third.response.status_code == 403
    assert b"audit log unwritable" in third.response.content


async def test_host_mismatch_helper() -> None:
    request = tutils.treq(host="allowed.test", port=80, headers=http.Headers(host="allowed.test"))
    assert host_mismatch(request, in_tunnel=False) is None
    request.headers["Host"] = "denied.test"
    assert "does not match" in str(host_mismatch(request, in_tunnel=False))


@pytest.mark.parametrize(
    "headers, killed",
    [
        pytest.param({}, False, id="no body"),
        pytest.param({"Content-Length": "1000"}, False, id="small body: answered"),
        pytest.param({"Content-Length": str(sf.DENIED_BODY_LIMIT + 1)}, True, id="large body: killed"),
        pytest.param({"Transfer-Encoding": "chunked"}, True, id="chunked body: killed"),
        pytest.param({"Content-Length": "x"}, True, id="malformed length: killed"),
    ],
)
async def test_denied_request_with_a_big_body_is_killed(
    addon: StockadeFilter,
    make_spec: Callable[..., SessionSpec],
    audit_lines: Callable[[], list[dict[str, object]]],
    headers: dict[str, str],
    killed: bool,
) -> None:
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("denied.test", 80, token)
        for name, value in headers.items():
            f.request.headers[name] = value
        await addon.requestheaders(f)
    if killed:
        assert f.response is None and f.error is not None and f.error.msg == f.error.KILLED_MESSAGE
    else:
        assert f.response is not None and f.response.status_code == 403
    assert [r["decision"] for r in audit_lines()] == ["deny"]


async def test_an_allowed_flow_is_recorded_before_its_first_byte_goes_upstream(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], audit_lines: Callable[..., list[dict[str, object]]]
) -> None:
    """A daemon killed mid-download must leave a record of the connection: the start record is
    written when the request is allowed, before mitmproxy dials or sends anything."""
    addon.resolver = FakeResolver()
    token = register(addon, make_spec())
    with taddons.context(addon):
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
        assert f.response is None
        (start,) = audit_lines(starts=True)
        assert (start["phase"], start["decision"], start["host"], start["bytes_down"]) == ("start", "allow", "allowed.test", 0)
        tunnel = connect_flow("allowed.test", 8443, token)
        await addon.http_connect(tunnel)
        assert [r["phase"] for r in audit_lines(starts=True)] == ["start", "start"]
        f.response = tutils.tresp(content=b"")
        addon.response(f)
    first, _tunnel_start, end = audit_lines(starts=True)
    assert end["phase"] == "end" and end["flow"] == first["flow"] and first["flow"]


async def test_an_allowed_request_that_cannot_be_recorded_is_refused_saying_why(
    addon: StockadeFilter, make_spec: Callable[..., SessionSpec], tmp_path: Path
) -> None:
    addon.resolver = FakeResolver()
    spec = make_spec()
    token = register(addon, spec)
    session = addon.registry.get(spec.session_id)
    assert session is not None
    with taddons.context(addon):
        control = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(control)
        assert control.response is None, "control: a recordable request goes through"
        os.close(session.writer._fd)  # the next write fails, as on a full disk
        f = get_flow("allowed.test", 8443, token)
        await addon.requestheaders(f)
    assert f.response is not None and f.response.status_code == 403
    assert b"could not be recorded" in f.response.content and b"cannot write audit log" in f.response.content
