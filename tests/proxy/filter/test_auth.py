"""Tests of auth.py (SessionAuth: the session of each request).

Most run the whole filter chain (tests/proxy/filterkit.py), as the daemon does: what an addon
must do depends on what the addons before it decided."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mitmproxy.test import taddons

from stockade.proxy.control import SessionSpec
from stockade.proxy.filter import auth
from stockade.proxy.filter.auth import SessionAuth
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.state import SESSION, Connections
from tests.proxy.filterkit import FakeResolver, FilterChain, connect_flow, credential, get_flow, register


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
    assert auth.parse_proxy_authorization(value) == token


async def test_no_credential_is_407(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    register(chain, make_spec())
    with chain.context():
        f = connect_flow("allowed.test")
        await chain.http_connect(f)
        assert f.response is not None and f.response.status_code == 407
        assert "Proxy-Authenticate" in f.response.headers


async def test_unknown_token_is_407(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", token="not-a-session")
        await chain.requestheaders(f)
        assert f.response is not None and f.response.status_code == 407


async def test_credential_binds_the_connection_and_is_stripped(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        first = get_flow("allowed.test", token=token)
        await chain.requestheaders(first)
        assert first.response is None
        assert "Proxy-Authorization" not in first.request.headers
        second = get_flow("allowed.test")  # no header: the relay sends it on the first request only
        second.client_conn = first.client_conn
        await chain.requestheaders(second)
        assert second.response is None


async def test_two_credentials_are_refused(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    token = register(chain, make_spec())
    with chain.context():
        f = connect_flow("allowed.test", token=token)
        f.request.headers.set_all("Proxy-Authorization", [credential(token), credential("sandbox-made")])
        await chain.http_connect(f)
        assert f.response is not None and f.response.status_code == 403
        assert "Proxy-Authorization" not in f.request.headers
        anonymous = connect_flow("allowed.test")
        anonymous.request.headers.set_all("Proxy-Authorization", [credential("x"), credential("y")])
        await chain.http_connect(anonymous)
        assert anonymous.response is not None and anonymous.response.status_code == 407
    assert [r["rule"] for r in audit_lines()] == ["more than one Proxy-Authorization header"]


async def test_session_a_cannot_use_session_b_rules(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    token_a = register(chain, make_spec(allow=("allowed.test",)))
    token_b = register(chain, make_spec(allow=("a.wild.test",)))
    with chain.context():
        f = connect_flow("a.wild.test", token=token_a)
        await chain.http_connect(f)
        assert f.response is not None and f.response.status_code == 403
        g = connect_flow("a.wild.test", token=token_b)
        await chain.http_connect(g)
        assert g.response is None


async def test_credential_cannot_switch_session_on_a_connection(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    token_a = register(chain, make_spec(allow=("allowed.test",)))
    token_b = register(chain, make_spec(allow=("a.wild.test",)))
    with chain.context():
        first = get_flow("allowed.test", token=token_a)
        await chain.requestheaders(first)
        assert first.response is None
        second = get_flow("a.wild.test", token=token_b)
        second.client_conn = first.client_conn
        await chain.requestheaders(second)
        assert second.response is not None and second.response.status_code == 403
        assert b"does not match this connection" in second.response.content


async def test_ended_session_is_refused(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    spec = make_spec()
    token = register(chain, spec)
    with chain.context():
        first = get_flow("allowed.test", token=token)
        await chain.requestheaders(first)
        assert first.response is None
        chain.registry.end(spec.session_id)
        again = get_flow("allowed.test", client=first.client_conn)
        await chain.requestheaders(again)  # the connection is still bound to the ended session
        assert again.response is not None and again.response.status_code == 403
        assert b"ended with the run" in again.response.content
        fresh = connect_flow("allowed.test", token=token)
        await chain.http_connect(fresh)  # the token is gone
        assert fresh.response is not None and fresh.response.status_code == 407


async def test_failed_audit_write_refuses_the_next_flow(chain: FilterChain, make_spec: Callable[..., SessionSpec], tmp_path: Path) -> None:
    chain.resolver = FakeResolver()
    spec = make_spec()
    token = register(chain, spec)
    audit = Path(spec.audit_path)
    with chain.context():
        first = connect_flow("denied.test", 443, token)
        await chain.http_connect(first)
        assert audit.exists()
        audit.unlink()
        audit.mkdir()  # the log can no longer be written
        second = connect_flow("denied-too.test", 443, token)  # another destination: a line of its own
        await chain.http_connect(second)  # this record is lost: the session stops
        third = connect_flow("allowed.test", 8443, token, client=second.client_conn)
        await chain.http_connect(third)
    assert third.response is not None and third.response.status_code == 403
    assert b"audit log unwritable" in third.response.content


# -- SessionAuth alone ---------------------------------------------------------


async def test_a_door_bound_connection_refuses_a_credential_from_inside(
    make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    registry = Registry()
    token, session = registry.register(make_spec())
    alone = SessionAuth(registry, Connections())
    with taddons.context(alone):
        f = get_flow("allowed.test", 8443, token)
        alone.bind(f.client_conn, session)
        alone.requestheaders(f)
    assert f.response is not None and f.response.status_code == 403
    assert b"from inside the sandbox" in f.response.content and SESSION not in f.metadata
    assert "Proxy-Authorization" not in f.request.headers
    assert [r["rule"] for r in audit_lines()] == ["a Proxy-Authorization header from inside the sandbox"]


async def test_an_admitted_flow_carries_its_session_and_binds_its_connection(make_spec: Callable[..., SessionSpec]) -> None:
    registry = Registry()
    token, session = registry.register(make_spec())
    connections = Connections()
    alone = SessionAuth(registry, connections)
    with taddons.context(alone):
        f = connect_flow("allowed.test", 8443, token)
        alone.http_connect(f)
    assert f.response is None and f.metadata[SESSION] is session
    assert connections.client(f.client_conn).session is session and not connections.client(f.client_conn).doored
