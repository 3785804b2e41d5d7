"""A transparent layer around a CONNECT tunnel's content: counts bytes into its audit record, cuts on demand.

Why it exists: a TLS tunnel that mitmproxy passes through untouched
(`ignore_connection`) has no flow and fires no hook after the ClientHello,
so nothing else can count its bytes or close it when its SNI is wrong, its
session ends or its audit log breaks. `tls_clienthello` has no reject lever
either; it sets `Tracked.cut` and this layer closes the client before the
handshake (or anything else) goes on.

It wraps whatever mitmproxy's NextLayer chose (TLS pass-through, HTTP or raw
TCP) without joining `context.layers`, so the layers below see the stack
they expect. For a checked TLS pass-through it also notices when every byte
the client sent has reached the server, the moment the tunnel can be handed
to the splicer.
"""

from __future__ import annotations

from collections.abc import Callable

from mitmproxy.proxy import commands, events, layer
from mitmproxy.proxy.context import Context

from stockade.proxy.filter.tracking import Tracked


class Meter(layer.Layer):
    def __init__(self, context: Context, child: layer.Layer, tracked: Tracked) -> None:
        super().__init__(context)
        context.layers.remove(self)  # not a protocol layer
        self.child = child
        self.tracked = tracked
        self.closed = False
        self.forwarded = 0  # client bytes the child has passed on to the server
        self.passthrough = False  # set once the stream is checked TLS that nothing will look into again
        self.on_drained: Callable[[Meter], None] | None = None  # offered the tunnel once nothing is in flight
        self.offered = False

    def handle_event(self, event: events.Event) -> layer.CommandGenerator[None]:
        if self.closed:
            return
        if self.tracked.must_close:
            self.closed = True
            yield commands.CloseConnection(self.context.client)
            return
        client, server = self.context.client, self.context.server
        record = self.tracked.record
        if isinstance(event, events.DataReceived) and event.connection is client:
            record.bytes_up += len(event.data)
        for command in self.child.handle_event(event):
            if isinstance(command, commands.SendData):
                if command.connection is client:
                    record.bytes_down += len(command.data)
                elif command.connection is server:
                    self.forwarded += len(command.data)
            yield command
        if self.passthrough and not self.offered and self.on_drained is not None and 0 < self.forwarded == record.bytes_up:
            self.offered = True
            self.on_drained(self)

    _handle_event = handle_event
