"""Tests of backstop.py (Backstop: the check before every dial).

Most run the whole filter chain (tests/proxy/filterkit.py), as the daemon does: what an addon
must do depends on what the addons before it decided."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mitmproxy.test import taddons, tflow

from stockade.proxy.control import SessionSpec
from stockade.proxy.filter import backstop
from stockade.proxy.filter.backstop import Backstop
from stockade.proxy.filter.lookup import Lookup
from stockade.proxy.filter.state import Connections
from stockade.proxy.rules.decide import Decision
from tests.proxy.filterkit import FakeResolver, FilterChain, boom, get_flow, hook_data, register


async def test_server_connect_dials_the_checked_address(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
        data = hook_data(f.client_conn, ("allowed.test", 8443))
        await chain.server_connect(data)
        assert data.server.error is None
        assert data.server.address == ("127.0.0.1", 8443)
        chain.server_connected(data)
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
    chain: FilterChain,
    make_spec: Callable[..., SessionSpec],
    address: tuple[str, int],
    bound: bool,
    error: str,
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token if bound else None)
        await chain.requestheaders(f)
        data = hook_data(f.client_conn, address)
        await chain.server_connect(data)
        assert data.server.error is not None and error in data.server.error
        assert data.server.address == address


async def test_backstop_refusal_is_audited_on_the_flow(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    resolver = FakeResolver()
    chain.resolver = resolver
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("a.wild.test", 8443, token)
        await chain.requestheaders(f)
        chain.connections.client(f.client_conn).pending.clear()  # the name now resolves elsewhere: the backstop looks again
        resolver.names["a.wild.test"] = ["10.0.0.5"]
        data = hook_data(f.client_conn, ("a.wild.test", 8443))
        await chain.server_connect(data)
        assert data.server.error and "(private)" in data.server.error
        f.error = tflow.terr(f"Connection killed: {data.server.error}")
        chain.error(f)
    (record,) = audit_lines()
    assert record["decision"] == "deny" and "10.0.0.5 (private)" in str(record["rule"])


async def test_exception_in_server_connect_refuses(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
        monkeypatch.setattr(backstop, "check_resolved", boom)
        data = hook_data(f.client_conn, ("allowed.test", 8443))
        await chain.server_connect(data)
    assert data.server.error and "internal error" in data.server.error


# -- Backstop alone ----------------------------------------------------------------


async def test_a_dial_tunnels_refused_is_refused() -> None:
    connections = Connections()
    alone = Backstop(connections, Lookup())
    data = hook_data(tflow.tclient_conn(), ("allowed.test", 8443))
    connections.server(data.server).refused = Decision(False, "raw TCP is not allowed")
    with taddons.context(alone):
        await alone.server_connect(data)
    assert data.server.error == "stockade: raw TCP is not allowed"
    assert connections.server(data.server).refused is None  # once


async def test_a_closed_connection_is_no_longer_reusable() -> None:
    connections = Connections()
    alone = Backstop(connections, Lookup())
    data = hook_data(tflow.tclient_conn(), ("127.0.0.1", 8443))
    connections.server(data.server).dialed = ("allowed.test", 8443)
    with taddons.context(alone):
        alone.server_connected(data)
        assert data.server.address == ("allowed.test", 8443)
        assert connections.client(data.client).checked == {data.server: ("allowed.test", 8443)}
        alone.server_disconnected(data)
    assert connections.client(data.client).checked == {}
