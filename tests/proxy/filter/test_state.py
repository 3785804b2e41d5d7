"""Tests of state.py (what the addons know about each connection)."""

from __future__ import annotations

import gc

from mitmproxy.test import tflow

from stockade.proxy.filter.state import Connections


def test_one_state_per_connection() -> None:
    connections = Connections()
    client, other = tflow.tclient_conn(), tflow.tclient_conn()
    assert connections.client(client) is connections.client(client)
    assert connections.client(client) is not connections.client(other)
    server = tflow.tserver_conn()
    assert connections.server(server) is connections.server(server)


def test_state_dies_with_its_connection() -> None:
    connections = Connections()
    client, server = tflow.tclient_conn(), tflow.tserver_conn()
    connections.client(client).pending[("a.test", 443)] = None  # type: ignore[assignment]
    connections.server(server).dialed = ("a.test", 443)
    del client, server
    gc.collect()
    assert len(connections._clients) == 0 and len(connections._servers) == 0
