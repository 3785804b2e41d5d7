"""Tests of requests.py (Decisions: allow or deny each request).

Most run the whole filter chain (tests/proxy/filterkit.py), as the daemon does: what an addon
must do depends on what the addons before it decided."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils

from stockade.proxy.control import SessionSpec
from stockade.proxy.filter import refusal, requests
from stockade.proxy.filter.lookup import Lookup
from stockade.proxy.filter.requests import Decisions
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.state import META, SESSION, Connections
from tests.proxy.filterkit import UPSTREAM, FakeResolver, FilterChain, boom, connect_flow, get_flow, register


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
    chain: FilterChain,
    make_spec: Callable[..., SessionSpec],
    audit_lines: Callable[[], list[dict[str, object]]],
    host: str,
    port: int,
    status: int | None,
    rule: str | None,
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = connect_flow(host, port, token)
        await chain.http_connect(f)
    if status is None:
        assert f.response is None
        assert chain.connections.client(f.client_conn).tunnel is not None
        assert audit_lines() == []  # written when the tunnel ends
    else:
        assert f.response is not None and f.response.status_code == status
        assert rule is not None and rule in f.response.text
        (record,) = audit_lines()
        assert (record["decision"], record["rule"], record["method"], record["port"]) == ("deny", rule, "CONNECT", port)


async def test_denied_names_are_never_resolved(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    resolver = FakeResolver()
    chain.resolver = resolver
    token = register(chain, make_spec())
    with chain.context():
        for host in ("d1.exfil.denied.test", "blocked.wild.test", "x.exfil.test"):
            await chain.http_connect(connect_flow(host, 443, token))
            await chain.requestheaders(get_flow(host, 80, token))
    assert resolver.queries == []


async def test_denial_text_names_rule_and_origin(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    token = register(chain, spec)
    with chain.context():
        f = connect_flow("denied.test", 443, token)
        await chain.http_connect(f)
    assert f.response is not None
    text = f.response.text
    assert text == (
        "stockade: the sandbox's policy blocked denied.test:443 (no allow rule matches); going around the proxy "
        f"will not work; to allow it, run: stockade allow denied.test --policy {spec.origin}\n"
    )
    assert text.count("\n") == 1


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
    chain: FilterChain,
    make_spec: Callable[..., SessionSpec],
    host: str,
    port: int,
    host_header: str | None,
    allowed: bool,
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow(host, port, token, host_header)
        await chain.requestheaders(f)
    if allowed:
        assert f.response is None
        assert callable(f.request.stream)
    else:
        assert f.response is not None and f.response.status_code == 403


async def test_two_host_headers_are_refused(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        f.request.headers.set_all("Host", ["allowed.test:8443", "denied.test"])
        await chain.requestheaders(f)
        assert f.response is not None and b"more than one Host header" in f.response.content


async def test_http_inside_a_tunnel_is_judged_on_the_tunnel(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        tunnel = connect_flow("allowed.test", 8443, token)
        await chain.http_connect(tunnel)
        inner = get_flow("allowed.test", 8443, host_header="allowed.test")  # port-less Host is fine in a tunnel
        inner.client_conn = tunnel.client_conn
        await chain.requestheaders(inner)
        assert inner.response is None
        fronted = get_flow("allowed.test", 8443, host_header="denied.test")
        fronted.client_conn = tunnel.client_conn
        await chain.requestheaders(fronted)
        assert fronted.response is not None and fronted.response.status_code == 403


async def test_host_mismatch_helper() -> None:
    request = tutils.treq(host="allowed.test", port=80, headers=http.Headers(host="allowed.test"))
    assert requests.host_mismatch(request, in_tunnel=False) is None
    request.headers["Host"] = "denied.test"
    assert "does not match" in str(requests.host_mismatch(request, in_tunnel=False))


async def test_dns_is_refused(chain: FilterChain) -> None:
    with chain.context():
        f = tflow.tdnsflow()
        chain.dns_request(f)
        assert f.response is not None and f.response.response_code == 5  # REFUSED


async def test_exception_in_http_connect_denies(chain: FilterChain, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    token = register(chain, make_spec())
    monkeypatch.setattr(requests, "decide", boom)
    with chain.context():
        f = connect_flow("allowed.test", 8443, token)
        await chain.http_connect(f)
    assert f.response is not None and f.response.status_code == 403
    assert chain.connections.client(f.client_conn).tunnel is None


async def test_exception_in_requestheaders_denies(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch, audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    chain.resolver = boom  # type: ignore[assignment]
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
    assert f.response is not None and f.response.status_code == 403
    (record,) = audit_lines()
    assert record["decision"] == "deny" and record["rule"] == refusal.INTERNAL_ERROR


@pytest.mark.parametrize(
    "headers, killed",
    [
        pytest.param({}, False, id="no body"),
        pytest.param({"Content-Length": "1000"}, False, id="small body: answered"),
        pytest.param({"Content-Length": str(refusal.DENIED_BODY_LIMIT + 1)}, True, id="large body: killed"),
        pytest.param({"Transfer-Encoding": "chunked"}, True, id="chunked body: killed"),
        pytest.param({"Content-Length": "x"}, True, id="malformed length: killed"),
    ],
)
async def test_denied_request_with_a_big_body_is_killed(
    chain: FilterChain,
    make_spec: Callable[..., SessionSpec],
    audit_lines: Callable[[], list[dict[str, object]]],
    headers: dict[str, str],
    killed: bool,
) -> None:
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("denied.test", 80, token)
        for name, value in headers.items():
            f.request.headers[name] = value
        await chain.requestheaders(f)
    if killed:
        assert f.response is None and f.error is not None and f.error.msg == f.error.KILLED_MESSAGE
    else:
        assert f.response is not None and f.response.status_code == 403
    assert [r["decision"] for r in audit_lines()] == ["deny"]


async def test_an_allowed_request_that_cannot_be_recorded_is_refused_saying_why(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], tmp_path: Path
) -> None:
    chain.resolver = FakeResolver()
    spec = make_spec()
    token = register(chain, spec)
    session = chain.registry.get(spec.session_id)
    assert session is not None
    with chain.context():
        control = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(control)
        assert control.response is None, "control: a recordable request goes through"
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, session.writer._fd)  # the next write fails, as on a full disk (the writer still owns its descriptor)
        os.close(full)
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
    assert f.response is not None and f.response.status_code == 403
    assert b"could not be recorded" in f.response.content and b"cannot write audit log" in f.response.content


# -- Decisions alone -------------------------------------------------------------


def admitted(registry: Registry, spec: SessionSpec, f: http.HTTPFlow) -> http.HTTPFlow:
    """`f` as SessionAuth leaves an admitted flow."""
    _token, session = registry.register(spec)
    f.metadata[SESSION] = session
    return f


async def test_a_flow_without_an_admitted_session_is_left_alone() -> None:
    alone = Decisions(Connections(), Lookup())
    with taddons.context(alone):
        f = get_flow("denied.test", 80)
        await alone.requestheaders(f)
    assert f.response is None and META not in f.metadata


async def test_a_checked_lookup_waits_for_the_backstop(make_spec: Callable[..., SessionSpec]) -> None:
    connections, lookup = Connections(), Lookup()
    lookup.resolver = FakeResolver()
    alone = Decisions(connections, lookup)
    with taddons.context(alone):
        f = admitted(Registry(), make_spec(), get_flow("allowed.test", 8443))
        await alone.requestheaders(f)
    assert f.response is None and f.metadata[META].record.decision == "allow"
    assert connections.client(f.client_conn).pending[("allowed.test", 8443)].addresses == (UPSTREAM,)


async def test_a_connection_the_backstop_checked_is_not_looked_up_again(make_spec: Callable[..., SessionSpec]) -> None:
    connections, lookup = Connections(), Lookup()
    resolver = FakeResolver()
    lookup.resolver = resolver
    alone = Decisions(connections, lookup)
    with taddons.context(alone):
        f = admitted(Registry(), make_spec(), get_flow("allowed.test", 8443))
        connections.client(f.client_conn).checked[f.server_conn] = ("allowed.test", 8443)
        await alone.requestheaders(f)
        other = admitted(Registry(), make_spec(), get_flow("a.wild.test", 8443, client=f.client_conn))
        await alone.requestheaders(other)
    assert f.response is None and other.response is None
    assert resolver.queries == ["a.wild.test"]  # only the destination no open connection was checked for


async def test_a_once_approval_a_failed_request_never_used_is_dropped(make_spec: Callable[..., SessionSpec]) -> None:
    """Approved once, then the request failed before its dial (here: the lookup raised): the
    approval must not stay on the connection for a later request to the same host and port."""
    import asyncio

    from stockade.proxy.filter.approvals import Approvals

    connections, lookup, approvals = Connections(), Lookup(), Approvals()
    lookup.resolver = boom  # type: ignore[assignment]
    alone = Decisions(connections, lookup, approvals)
    with taddons.context(alone):
        f = admitted(Registry(), make_spec(approve=5), get_flow("new.test", 80))
        waiting = asyncio.ensure_future(alone.requestheaders(f))
        (question,) = await approvals.wait("", [], 2)
        assert approvals.answer(question["id"], "once") is None
        await waiting
    assert f.response is not None and f.response.status_code == 403
    assert connections.client(f.client_conn).approved == set()


def test_a_request_without_host_goes_on_with_the_judged_targets() -> None:
    """Review of issue 34: an HTTP/1.0 request with no Host got its credential swapped in and went on without
    one, for a front to send to its default virtual host."""
    from mitmproxy import http as mitm_http
    from mitmproxy.test import tutils as mitm_tutils

    from stockade.proxy.filter.requests import one_target

    request = mitm_tutils.treq(host="api.test", port=8443, path=b"/nohost", headers=mitm_http.Headers())
    request.http_version = "HTTP/1.0"
    one_target(request)
    assert request.headers["Host"] == "api.test:8443"
    kept = mitm_tutils.treq(host="api.test", port=443, path=b"/x", headers=mitm_http.Headers(host="api.test"))
    one_target(kept)
    assert kept.headers.get_all("Host") == ["api.test"]
