"""A transparent layer around a CONNECT tunnel's content: counts bytes into its audit record, cuts on demand.

Why it exists: a TLS tunnel that mitmproxy passes through untouched
(`ignore_connection`) has no flow and fires no hook after the ClientHello,
so nothing else can count its bytes or close it when its SNI is wrong, its
session ends or its audit log breaks. `tls_clienthello` has no reject lever
either; it sets `Tracked.cut` and this layer closes the client before the
handshake (or anything else) goes on.

It wraps whatever mitmproxy's NextLayer chose (TLS pass-through, HTTP or raw
TCP) without joining `context.layers`, so the layers below see the stack
they expect.
"""

from __future__ import annotations

from mitmproxy.proxy import commands, events, layer
from mitmproxy.proxy.context import Context

from stockade.proxy.tracking import Tracked


class Meter(layer.Layer):
    def __init__(self, context: Context, child: layer.Layer, tracked: Tracked) -> None:
        super().__init__(context)
        context.layers.remove(self)  # not a protocol layer
        self.child = child
        self.tracked = tracked
        self.closed = False

    def handle_event(self, event: events.Event) -> layer.CommandGenerator[None]:
        if self.closed:
            return
        if self.tracked.must_close:
            self.closed = True
            yield commands.CloseConnection(self.context.client)
            return
        client = self.context.client
        record = self.tracked.record
        if isinstance(event, events.DataReceived) and event.connection is client:
            record.bytes_up += len(event.data)
        for command in self.child.handle_event(event):
            if isinstance(command, commands.SendData) and command.connection is client:
                record.bytes_down += len(command.data)
            yield command

    _handle_event = handle_event
