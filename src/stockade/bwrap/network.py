"""Network for one run: the proxy variables inside, and the door to the proxy daemon outside.

The sandbox's listener (made in its own network namespace, bwrap/netns.py)
goes straight to the daemon, which accepts there itself (proxy/door.py): no
relay in this process, no credential on the sandbox's connections.

With `mode = "none"` none of this runs: bwrap's own --unshare-net leaves only a
loopback with nothing on it, and no daemon is started.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from stockade.bwrap.netns import PROXY_PORT, receive_listener

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.core.locations import Locations

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")  # servers the command starts inside stay reachable directly


def proxy_environment() -> dict[str, str]:
    """The proxy variables inside a Linux sandbox (proxy/environment.py)."""
    from stockade.proxy.environment import proxy_environment as variables

    return variables(PROXY_PORT, no_proxy=LOOPBACK_NAMES)


@dataclass
class Bridge:
    """The daemon session of one run, and the sandbox's listener handed to it."""

    session_id: str
    rules: dict[str, object]  # proxy.client.session_rules of the policy
    locations: Locations
    command: tuple[str, ...]
    cwd: str
    channel: socket.socket | None = None  # parent's end of the socketpair
    child_channel_fd: int = -1
    denials: list[dict[str, object]] = field(default_factory=list)
    trouble: str = ""  # why the run's network record may be incomplete (the audit log failed, the daemon died)
    refused: str = ""  # connections the daemon refused over the session's budget, as one line

    def open(self) -> None:
        """Start (or reuse) the daemon and register this session: before bwrap starts."""
        from stockade.proxy import client

        client.open_session_with(self.locations, self.session_id, list(self.command), self.cwd, self.rules)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.channel = parent
        self.child_channel_fd = child.detach()

    def attach(self) -> None:
        """After bwrap started: take the sandbox's listener and give it to the daemon (our copy closes)."""
        from stockade.proxy import client

        assert self.channel is not None
        os.close(self.child_channel_fd)
        self.channel.settimeout(10)
        listener = receive_listener(self.channel)
        self.channel.close()
        with listener:
            client.attach_listener(self.session_id, listener)

    def close(self) -> None:
        from stockade.proxy import client

        ended = client.close_session(self.locations, self.session_id)
        self.denials, self.trouble, self.refused = ended.denials, ended.trouble, ended.refused
