"""What the filter addons know about each connection, in one place.

mitmproxy calls each addon separately, so what one addon learns about a
connection (its session, its tunnel's record, the addresses checked for it)
is kept here for the others: one small object per client or server
connection, gone with the connection (weak keys, as in mitmproxy's
ProxyAuth). A flow's own audit record travels in `flow.metadata[META]`, and
the session `SessionAuth` admitted it for in `flow.metadata[SESSION]`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import MutableMapping

    from mitmproxy import connection

    from stockade.proxy.filter.resolver import Resolved
    from stockade.proxy.filter.sessions import Session
    from stockade.proxy.filter.splice_tunnel import Splicer
    from stockade.proxy.filter.tracking import Tracked
    from stockade.proxy.filter.tunnel_meter import Meter
    from stockade.proxy.rules.decide import Decision, HttpTable

META = "stockade"  # flow.metadata key holding the flow's Tracked
SESSION = "stockade_session"  # flow.metadata key holding the Session the flow was admitted for
PROCESS = "stockade_process"  # ... and the process inside that opened its connection (proxy/daemon/attribution.py), or None
HELD_BODY = "stockade_held_body"  # flow.metadata key: (HTTP tables, host) of a body read whole and judged before it goes on (bodies.py)
SWAPPED = "stockade_swapped"  # flow.metadata key: the credential values masked in the answer, those swapped in and those of its host


@dataclass(eq=False)
class ClientState:
    session: Session | None = None  # bound by its door, or by the credential of its first request
    doored: bool = False  # came in through a session's door: any credential on it is the sandbox's own
    tunnel: Tracked | None = None  # the allowed CONNECT tunnel's record, until the connection ends
    meter: Meter | None = None  # the layer that counts and cuts the tunnel's content
    splicer: Splicer | None = None  # moves the checked tunnel's bytes once it was handed over
    raw: bool = False  # the tunnel carries raw TCP its host:port rule allows (ssh): tunnels.py
    forwarded: bool = False  # came in at a forwarded loopback port (door.py): its tunnel is the allow entry's alone
    process: dict[str, Any] | None = None  # the process inside that opened it (proxy/daemon/attribution.py): in its records
    inspected: tuple[HttpTable, ...] = ()  # the tunnel's host has HTTP rules: each request is judged by them
    terminated: bool = False  # stockade terminated the tunnel's TLS (HTTP rules, or credentials that go there)
    # Addresses checked for a request, waiting for the backstop to dial them: (host, port) -> lookup.
    pending: dict[tuple[str, int], Resolved] = field(default_factory=dict)
    # Dials the backstop refused for a plain-HTTP flow, waiting for the flow's `error` hook to record them.
    denied_dials: dict[tuple[str, int], Decision] = field(default_factory=dict)
    # Open server connections the backstop dialed, by the (host, port) it checked before dialing.
    checked: dict[connection.Server, tuple[str, int]] = field(default_factory=dict)
    # (host, port) the user approved once for this connection (proxy/filter/approvals.py): the backstop lets it dial.
    approved: set[tuple[str, int]] = field(default_factory=set)


@dataclass(eq=False)
class ServerState:
    dialed: tuple[str, int] | None = None  # the name the backstop dialed by its checked address
    upgraded: Tracked | None = None  # an allowed HTTP upgrade (101): its raw TCP continuation may pass
    refused: Decision | None = None  # raw TCP killed before its dial: the dial is refused


class Connections:
    """The state of every live client and server connection, created on first use."""

    def __init__(self) -> None:
        self._clients: MutableMapping[connection.Client, ClientState] = weakref.WeakKeyDictionary()
        self._servers: MutableMapping[connection.Server, ServerState] = weakref.WeakKeyDictionary()

    def client(self, client: connection.Client) -> ClientState:
        state = self._clients.get(client)
        if state is None:
            state = self._clients[client] = ClientState()
        return state

    def server(self, server: connection.Server) -> ServerState:
        state = self._servers.get(server)
        if state is None:
            state = self._servers[server] = ServerState()
        return state
