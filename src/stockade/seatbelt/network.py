"""A networked macOS run: register a proxy session, run, report what the proxy denied.

Linux relays through its own bridge (bwrap/network.py); on macOS the profile
lets the sandbox reach only the daemon's loopback port, and the credential
travels in the proxy URL.
"""

from __future__ import annotations

import os

from stockade.core.backend import RunRequest
from stockade.profiles.model import NetworkMode
from stockade.profiles.text import say
from stockade.seatbelt.backend import SeatbeltBackend


def run(request: RunRequest) -> int:
    """Build and run on macOS; with network, inside a registered proxy session."""
    if request.policy.network.mode is NetworkMode.NONE:
        backend = SeatbeltBackend()
        return backend.run(backend.build(request))
    from stockade.proxy import client

    session = request.session_id or os.urandom(6).hex()
    policy = request.policy
    ticket = client.open_session(request.locations, session, list(request.command), str(request.cwd), policy)
    try:
        backend = SeatbeltBackend(proxy_port=ticket.port, session_id=session, proxy_token=ticket.token)
        return backend.run(backend.build(request))
    finally:
        ended = client.close_session(request.locations, session)
        if ended.trouble:
            request.troubles.append(ended.trouble)
        if not request.quiet:
            for denial in ended.denials:
                say(f"stockade: {client.describe_denial(denial, policy.origin)}")
            for line in (ended.refused, ended.trouble):
                if line:
                    say(f"stockade: {line}")
