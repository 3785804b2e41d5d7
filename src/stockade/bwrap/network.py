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

PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
NO_PROXY = "localhost,127.0.0.1,::1"


def proxy_environment() -> dict[str, str]:
    """What common tools read to find a proxy (README has the table)."""
    env = {name: PROXY_URL for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")}
    env.update(NO_PROXY=NO_PROXY, no_proxy=NO_PROXY)
    env.update(
        npm_config_proxy=PROXY_URL,  # npm, pnpm
        npm_config_https_proxy=PROXY_URL,
        YARN_HTTP_PROXY=PROXY_URL,  # yarn berry
        YARN_HTTPS_PROXY=PROXY_URL,
        CARGO_HTTP_PROXY=PROXY_URL,
        NODE_USE_ENV_PROXY="1",  # Node's built-in fetch (undici) honours *_PROXY only with this
        GIT_PROXY_COMMAND="",  # no ProxyCommand-style bypass from the host's git config
    )
    java = (
        f"-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={PROXY_PORT} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={PROXY_PORT} "
        "-Dhttp.nonProxyHosts=localhost|127.0.0.1"
    )
    env["JAVA_TOOL_OPTIONS"] = java
    return env


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
