"""The last check under all the others: every server connection is judged again before it is dialed.

Whatever a hook above missed (a request mitmproxy routes somewhere else, a
tunnel's raw TCP, a connection of no session), `server_connect` decides
again on the address mitmproxy is about to dial, looks the name up itself
(or takes the lookup Decisions just checked), refuses inside addresses, and
dials the very address that was checked. Once connected the connection gets
its name back, so mitmproxy can reuse it for the same host.

mitmproxy swallows exceptions from hooks and carries on (the dial goes
ahead), so `server_connect` catches everything itself and refuses.
"""

from __future__ import annotations

import logging

from mitmproxy.proxy import server_hooks

from stockade.proxy.filter.lookup import Lookup
from stockade.proxy.filter.refusal import INTERNAL_ERROR
from stockade.proxy.filter.resolver import Resolved
from stockade.proxy.filter.state import Connections
from stockade.proxy.rules.decide import Decision, check_resolved, decide

logger = logging.getLogger(__name__)


class Backstop:
    def __init__(self, connections: Connections, lookup: Lookup) -> None:
        self.connections = connections
        self.lookup = lookup

    async def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        server = data.server
        try:
            if server.error:
                return
            server_state = self.connections.server(server)
            refused, server_state.refused = server_state.refused, None
            if refused is not None:
                server.error = f"stockade: {refused.rule}"
                return
            state = self.connections.client(data.client)
            session = state.session
            if session is None or session.stopped:
                server.error = "stockade: no live session for this connection"
                return
            if not server.address:
                server.error = "stockade: no destination"
                return
            host, port = str(server.address[0]), int(server.address[1])
            decision = decide(session.rules, host, port)
            if not decision.allowed and (host, port) in state.approved:
                decision = Decision(True, "approved once by you", "", decision.host or host)
                if state.tunnel is None:  # plain HTTP: once was that request; the next one asks again
                    state.approved.discard((host, port))
            resolved: Resolved | None = None
            if decision.allowed:
                resolved = state.pending.pop((host, port), None) or await self.lookup.resolver(host, port)
                decision = check_resolved(session.rules, decision.host, port, resolved.addresses, self.lookup.own_addresses(), resolved.upstreams)
            if not decision.allowed or resolved is None:
                server.error = f"stockade: {decision.rule}"
                self._denied(data, host, port, decision)
                return
            server_state.dialed = (host, port)
            server.address = (str(resolved.addresses[0]), port)  # dial what was checked
        except Exception:
            logger.exception("server_connect failed; refusing the connection")
            server.error = f"stockade: {INTERNAL_ERROR}"

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        checked = self._restore_address(data)
        if checked is not None:
            self.connections.client(data.client).checked[data.server] = checked

    def server_disconnected(self, data: server_hooks.ServerConnectionHookData) -> None:
        self.connections.client(data.client).checked.pop(data.server, None)

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        self._restore_address(data)

    def _denied(self, data: server_hooks.ServerConnectionHookData, host: str, port: int, decision: Decision) -> None:
        state = self.connections.client(data.client)
        if state.tunnel is not None:
            state.tunnel.deny(decision)
        else:  # an HTTP flow: its `error` hook (metering.py) writes the record
            state.denied_dials[(host, port)] = decision

    def _restore_address(self, data: server_hooks.ServerConnectionHookData) -> tuple[str, int] | None:
        """Give the connection its name back once it is connected.

        mitmproxy reuses a connection only for the same `address`, so a
        connection labelled with the IP would never be reused (and idle ones
        would pile up against its five-per-destination limit). The name is
        what mitmproxy itself keeps in `address` when it resolves a host;
        the IP stays in `peername`. Server refuses address changes on open
        connections (to stop redirects); this is a relabel, not a redirect.
        Returns the checked (host, port), or None for a connection the backstop did not dial.
        """
        state = self.connections.server(data.server)
        original, state.dialed = state.dialed, None
        if original is not None:
            object.__setattr__(data.server, "address", original)
        return original
