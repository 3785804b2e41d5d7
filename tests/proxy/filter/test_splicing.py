"""Tests of splicing.py (offers of checked traffic to splice(2))."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
from mitmproxy import http
from mitmproxy.options import Options
from mitmproxy.proxy import layer
from mitmproxy.proxy.context import Context
from mitmproxy.test import taddons, tflow, tutils

from stockade.proxy.audit import AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.filter import splice_body, splice_tunnel
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.splicing import SpliceOffers
from stockade.proxy.filter.state import META, Connections
from stockade.proxy.filter.tracking import Tracked
from tests.proxy.filterkit import get_flow


def installed(connections: Connections) -> layer.NextLayer:
    """A NextLayer call in which Metering just installed a tunnel's meter."""
    context = Context(tflow.tclient_conn(), Options())
    meter = SimpleNamespace(on_drained=None)
    connections.client(context.client).meter = meter  # type: ignore[assignment]
    nextlayer = layer.NextLayer(context)
    nextlayer.layer = meter  # type: ignore[assignment]
    return nextlayer


@pytest.mark.parametrize("option, available, offered", [(True, True, True), (False, True, False), (True, False, False)])
async def test_a_new_meter_is_offered_to_the_splicer(monkeypatch: pytest.MonkeyPatch, option: bool, available: bool, offered: bool) -> None:
    monkeypatch.setattr(splice_tunnel, "AVAILABLE", available)
    connections = Connections()
    alone = SpliceOffers(connections)
    with taddons.context(alone) as tctx:
        tctx.configure(alone, stockade_splice=option)
        nextlayer = installed(connections)
        alone.next_layer(nextlayer)
    assert (nextlayer.layer.on_drained is not None) is offered  # type: ignore[union-attr]


async def test_only_the_call_that_installed_the_meter_offers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(splice_tunnel, "AVAILABLE", True)
    connections = Connections()
    alone = SpliceOffers(connections)
    with taddons.context(alone):
        nextlayer = installed(connections)
        meter = nextlayer.layer
        nextlayer.layer = object()  # type: ignore[assignment]  # a later layer choice on the same connection
        alone.next_layer(nextlayer)
    assert meter.on_drained is None  # type: ignore[union-attr]


@pytest.mark.parametrize("cut, asked", [(None, True), ("session ended", False)])
async def test_no_body_of_a_cut_flow_is_offered(
    monkeypatch: pytest.MonkeyPatch, make_spec: Callable[..., SessionSpec], cut: str | None, asked: bool
) -> None:
    monkeypatch.setattr(splice_body, "AVAILABLE", True)
    lengths: list[http.HTTPFlow] = []
    monkeypatch.setattr(splice_body, "body_length", lambda flow: lengths.append(flow))
    alone = SpliceOffers(Connections())
    _token, session = Registry().register(make_spec())
    with taddons.context(alone):
        f = get_flow("allowed.test")
        record = AuditRecord(session="s", command=[], scheme="http", host="allowed.test", port=8443, decision="allow", rule='allow "allowed.test"')
        f.metadata[META] = Tracked(session, record, cut=cut)
        f.response = tutils.tresp(content=b"")
        alone.responseheaders(f)
    assert (lengths == [f]) is asked
