"""Tests of metering.py (Metering: counting and final records).

Most run the whole filter chain (tests/proxy/filterkit.py), as the daemon does: what an addon
must do depends on what the addons before it decided."""

from __future__ import annotations

import json
from collections.abc import Callable

from mitmproxy import http
from mitmproxy.options import Options
from mitmproxy.proxy import layer
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layers import TCPLayer
from mitmproxy.test import taddons, tflow, tutils

from stockade.proxy.audit import AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.filter.metering import Metering
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.state import META, Connections
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.filter.tunnel_meter import Meter
from tests.proxy.filterkit import FakeResolver, FilterChain, connect_flow, get_flow, hello, register


async def test_http_flow_is_audited_once_with_bytes(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    chain.resolver = FakeResolver()
    spec = make_spec()
    token = register(chain, spec)
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
        assert callable(f.request.stream)
        f.request.stream(b"x" * 100)
        f.response = tutils.tresp(content=b"")
        chain.responseheaders(f)
        assert callable(f.response.stream)
        f.response.stream(b"y" * 1000)
        chain.response(f)
        chain.response(f)  # a second call writes nothing more
    (record,) = audit_lines()
    assert record["decision"] == "allow" and record["rule"] == 'allow "allowed.test"'
    assert record["session"] == spec.session_id and record["command"] == spec.command
    assert record["method"] == "GET" and record["scheme"] == "http"
    assert record["path"] == "/p?q=1&token=REDACTED"
    assert isinstance(record["bytes_up"], int) and record["bytes_up"] > 100
    assert isinstance(record["bytes_down"], int) and record["bytes_down"] > 1000
    assert "s3cret" not in json.dumps(record)


async def test_http_error_is_audited(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
        f.error = tflow.terr("connection reset")
        chain.error(f)
    (record,) = audit_lines()
    assert (record["decision"], record["error"]) == ("allow", "connection reset")


async def test_tunnel_record_written_at_disconnect(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = connect_flow("allowed.test", 8443, token)
        await chain.http_connect(f)
        chain.tls_clienthello(hello(f.client_conn, "allowed.test"))
        tracked = chain.connections.client(f.client_conn).tunnel
        tracked.record.bytes_up, tracked.record.bytes_down = 10, 20
        chain.client_disconnected(f.client_conn)
        chain.client_disconnected(f.client_conn)
    (record,) = audit_lines()
    assert record["decision"] == "allow" and record["scheme"] == "tls" and record["sni"] == "allowed.test"
    assert (record["bytes_up"], record["bytes_down"], record["method"]) == (10, 20, "CONNECT")


async def test_an_allowed_flow_is_recorded_before_its_first_byte_goes_upstream(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], audit_lines: Callable[..., list[dict[str, object]]]
) -> None:
    """A daemon killed mid-download must leave a record of the connection: the start record is
    written when the request is allowed, before mitmproxy dials or sends anything."""
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token)
        await chain.requestheaders(f)
        assert f.response is None
        (start,) = audit_lines(starts=True)
        assert (start["phase"], start["decision"], start["host"], start["bytes_down"]) == ("start", "allow", "allowed.test", 0)
        tunnel = connect_flow("allowed.test", 8443, token)
        await chain.http_connect(tunnel)
        assert [r["phase"] for r in audit_lines(starts=True)] == ["start", "start"]
        f.response = tutils.tresp(content=b"")
        chain.response(f)
    first, _tunnel_start, end = audit_lines(starts=True)
    assert end["phase"] == "end" and end["flow"] == first["flow"] and first["flow"]


# -- Metering alone --------------------------------------------------------------


def recorded(f: http.HTTPFlow, spec: SessionSpec, *, written: bool = False) -> Tracked:
    """The flow's record as Decisions leaves an allowed (or, written, a denied) flow."""
    _token, session = Registry().register(spec)
    record = AuditRecord(
        session=spec.session_id, command=[], scheme="http", host="allowed.test", port=8443, decision="allow", rule='allow "allowed.test"'
    )
    tracked = f.metadata[META] = Tracked(session, record, written=written)
    return tracked


async def test_only_recorded_allowed_flows_are_counted(make_spec: Callable[..., SessionSpec]) -> None:
    alone = Metering(Connections())
    with taddons.context(alone):
        unrecorded = get_flow("allowed.test")
        alone.requestheaders(unrecorded)
        denied = get_flow("allowed.test")
        recorded(denied, make_spec(), written=True)
        alone.requestheaders(denied)
        allowed = get_flow("allowed.test")
        tracked = recorded(allowed, make_spec())
        alone.requestheaders(allowed)
    assert not unrecorded.request.stream and not denied.request.stream
    assert callable(allowed.request.stream) and list(allowed.request.stream(b"abc")) == [b"abc"]
    assert tracked.record.bytes_up > 3


async def test_a_cut_flow_is_killed_at_its_response_headers(make_spec: Callable[..., SessionSpec]) -> None:
    alone = Metering(Connections())
    with taddons.context(alone):
        f = get_flow("allowed.test")
        recorded(f, make_spec()).cut = "session ended"
        f.response = tutils.tresp(content=b"")
        alone.responseheaders(f)
    assert f.error is not None and f.error.msg == f.error.KILLED_MESSAGE and not f.response.stream


async def test_a_tunnel_is_metered_once(make_spec: Callable[..., SessionSpec]) -> None:
    connections = Connections()
    alone = Metering(connections)
    client = tflow.tclient_conn()
    _token, session = Registry().register(make_spec())
    record = AuditRecord(session="s", command=[], scheme="connect", host="allowed.test", port=8443, decision="allow", rule='allow "allowed.test"')
    connections.client(client).tunnel = Tracked(session, record)
    context = Context(client, Options())
    with taddons.context(alone):
        first = layer.NextLayer(context)
        first.layer = TCPLayer(context)
        alone.next_layer(first)
        second = layer.NextLayer(context)
        second.layer = TCPLayer(context)
        alone.next_layer(second)
    assert isinstance(first.layer, Meter) and connections.client(client).meter is first.layer
    assert isinstance(second.layer, TCPLayer) and record.scheme == "tcp"
