"""Handing checked traffic to splice(2), off mitmproxy's event loop (Linux).

Two offers, both for traffic already allowed, recorded and metered:
- a TLS tunnel passed through untouched, once its `Meter` saw every byte the
  client sent reach the server (splice_tunnel.py);
- a plain-HTTP response body of known length (splice_body.py), unless it is
  an answer of a credential's host, whose body is masked on the way.

It must come after Metering in the chain: it takes over the `Meter` Metering
installed and the body Metering counts. A failed offer leaves the traffic on
mitmproxy's path, which moves the same bytes more slowly.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.proxy import layer

from stockade.proxy.filter import splice_body, splice_tunnel
from stockade.proxy.filter.refusal import INTERNAL_ERROR, handler_of, where
from stockade.proxy.filter.state import META, SWAPPED, Connections
from stockade.proxy.filter.tunnel_meter import Meter
from stockade.proxy.rules.decide import Decision

logger = logging.getLogger(__name__)


class SpliceOffers:
    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self.spliced_total = 0  # tunnels handed to a splicer since start (reported by the daemon's ping)
        self.bodies_spliced = 0  # plain-HTTP response bodies spliced whole since start (likewise)

    def load(self, loader: Any) -> None:
        loader.add_option(
            "stockade_splice",
            bool,
            True,
            "Move the bytes of checked TLS tunnels, and plain-HTTP response bodies of known length, with splice(2) "
            "outside the event loop (Linux). Off: every chunk goes through mitmproxy, slower but identical in effect.",
        )

    # -- tunnels -------------------------------------------------------------

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        state = self.connections.client(nextlayer.context.client)
        meter = state.meter
        if meter is None or nextlayer.layer is not meter or meter.on_drained is not None:
            return  # no tunnel, not the call that installed its meter, or offered already
        try:
            if ctx.options.stockade_splice and splice_tunnel.AVAILABLE:
                meter.on_drained = self._offer_splice
        except Exception:
            logger.exception("cannot meter the tunnel to %s:%s; cutting it", meter.tracked.record.host, meter.tracked.record.port)
            meter.tracked.deny(Decision(False, INTERNAL_ERROR, "", meter.tracked.record.host))

    def _offer_splice(self, meter: Meter) -> None:
        """The meter saw the tunnel drained: try to hand it to a splicer once the loop is free."""
        asyncio.get_running_loop().call_soon(self._splice, meter, 0)

    def _splice(self, meter: Meter, attempt: int) -> None:
        client = meter.context.client
        try:
            state = self.connections.client(client)
            if meter.tracked.must_close or state.tunnel is None:
                return
            handler = handler_of(client)
            if handler is None:
                return
            spliced = splice_tunnel.Splicer(handler, client, meter.context.server, meter.tracked)
            if spliced.start():
                state.splicer = spliced
                self.spliced_total += 1
                logger.debug("tunnel to %s:%s spliced", meter.tracked.record.host, meter.tracked.record.port)
            elif attempt < 20:  # a write still in flight: look again shortly
                asyncio.get_running_loop().call_later(0.005, self._splice, meter, attempt + 1)
        except Exception:
            logger.exception("cannot splice the tunnel to %s; it stays on mitmproxy's path", meter.tracked.record.host)

    # -- plain-HTTP bodies ---------------------------------------------------

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """A checked plain-HTTP response's body of known length goes by splice (proxy/filter/splice_body.py)."""
        tracked = flow.metadata.get(META)
        if tracked is None or tracked.written or flow.response is None or tracked.must_close or flow.error is not None:
            return  # not allowed, already ended, or cut by Metering
        if flow.metadata.get(SWAPPED):
            return  # an answer of a credential's host is read on the way, to mask the value (proxy/filter/swapping.py)
        try:
            if not (ctx.options.stockade_splice and splice_body.AVAILABLE) or self.connections.client(flow.client_conn).tunnel is not None:
                return
            if splice_body.body_length(flow) is None:
                return
            handler = handler_of(flow.client_conn)
            if handler is not None:
                splice_body.BodySplice(handler, flow, tracked, self._count_body).start()
        except Exception:
            logger.exception("responseheaders failed; killing %s", where(flow))
            if flow.killable:
                flow.kill()

    def _count_body(self) -> None:
        self.bodies_spliced += 1
