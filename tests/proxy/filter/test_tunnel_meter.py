from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mitmproxy.options import Options
from mitmproxy.proxy import commands, events, layer
from mitmproxy.proxy.context import Context
from mitmproxy.test import tflow

from stockade.proxy.audit import AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.filter.tunnel_meter import Meter


class Relay(layer.Layer):
    """Stands in for mitmproxy's pass-through: client bytes to the server and back."""

    def _handle_event(self, event: events.Event) -> layer.CommandGenerator[None]:
        if isinstance(event, events.DataReceived):
            to = self.context.server if event.connection is self.context.client else self.context.client
            yield commands.SendData(to, event.data)


def meter(make_spec: Callable[..., SessionSpec]) -> tuple[Meter, Tracked, Registry]:
    registry = Registry()
    spec = make_spec()
    _token, session = registry.register(spec)
    record = AuditRecord(session=spec.session_id, command=spec.command, scheme="tls", host="allowed.test", port=443, decision="allow", rule="r")
    tracked = Tracked(session, record)
    context = Context(tflow.tclient_conn(), Options())
    context.server = tflow.tserver_conn()
    return Meter(context, Relay(context), tracked), tracked, registry


def test_counts_both_ways(make_spec: Callable[..., SessionSpec]) -> None:
    m, tracked, _ = meter(make_spec)
    up = list(m.handle_event(events.DataReceived(m.context.client, b"hello")))
    down = list(m.handle_event(events.DataReceived(m.context.server, b"world!!")))
    assert [type(c) for c in up + down] == [commands.SendData, commands.SendData]
    assert (tracked.record.bytes_up, tracked.record.bytes_down) == (5, 7)


def test_is_not_a_protocol_layer(make_spec: Callable[..., SessionSpec]) -> None:
    m, _, _ = meter(make_spec)
    assert m not in m.context.layers
    assert isinstance(m.child, Relay) and m.child in m.context.layers


def test_cut_closes_the_client_once_and_swallows_the_rest(make_spec: Callable[..., SessionSpec]) -> None:
    m, tracked, _ = meter(make_spec)
    tracked.cut = "TLS SNI denied.test does not match the CONNECT host allowed.test"
    first = list(m.handle_event(events.DataReceived(m.context.client, b"more")))
    assert len(first) == 1 and isinstance(first[0], commands.CloseConnection) and first[0].connection is m.context.client
    assert list(m.handle_event(events.DataReceived(m.context.server, b"late"))) == []
    assert tracked.record.bytes_up == 0


def test_ended_session_cuts_live_tunnels(make_spec: Callable[..., SessionSpec]) -> None:
    m, tracked, registry = meter(make_spec)
    assert list(m.handle_event(events.DataReceived(m.context.client, b"a")))
    registry.end(tracked.session.spec.session_id)
    (command,) = m.handle_event(events.DataReceived(m.context.client, b"b"))
    assert isinstance(command, commands.CloseConnection)


def test_broken_audit_log_cuts_live_tunnels(make_spec: Callable[..., SessionSpec], tmp_path: Path) -> None:
    m, tracked, _ = meter(make_spec)
    tracked.session.writer.broken = "cannot write audit log: disk full"
    (command,) = m.handle_event(events.DataReceived(m.context.server, b"x"))
    assert isinstance(command, commands.CloseConnection)
