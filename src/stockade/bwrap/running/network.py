"""Network for one run: the proxy variables inside, and the door to the proxy daemon outside.

The sandbox's listener (made in its own network namespace, bwrap/parts/netns.py)
goes straight to the daemon, which accepts there itself (proxy/daemon/door.py): no
relay in this process, no credential on the sandbox's connections.

With `mode = "none"` none of this runs: bwrap's own --unshare-net leaves only a
loopback with nothing on it, and no daemon is started.
"""

from __future__ import annotations

import _socket
import os

from stockade.bwrap.parts.netns import PROXY_PORT, receive_listeners
from stockade.proxy.control import INTERCEPTION_SOCKETS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.profiles.credentials import Resolved
    from stockade.proxy.client.handover import Handover

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")  # servers the command starts inside stay reachable directly


def proxy_environment() -> dict[str, str]:
    """The proxy variables inside a Linux sandbox (core/proxy_env.py)."""
    from stockade.core.proxy_env import proxy_environment as variables

    return variables(PROXY_PORT, no_proxy=LOOPBACK_NAMES)


class Bridge:
    """The daemon session of one run, and the sandbox's listener handed to it (proxy/client/handover.py).

    A plain class over strings: a dataclass, pathlib or `socket` here would cost every
    networked run more than its whole network set-up.
    """

    __slots__ = (
        "session_id", "rules", "runtime", "state", "command", "cwd", "channel", "child_channel_fd", "handover", "denials", "trouble", "refused",
        "credentials", "file_secrets", "approve", "always", "intercepted", "names", "exported", "agent_session", "tool_call",
    )  # fmt: skip

    def __init__(self, session_id: str, rules: dict[str, object], runtime: str, state: str, command: tuple[str, ...], cwd: str) -> None:
        self.session_id = session_id
        self.rules = rules  # proxy.client.sessionclient.session_rules of the policy
        self.runtime = runtime  # the daemon's folders (core.locations)
        self.state = state
        self.command = command
        self.cwd = cwd
        self.channel: _socket.socket | None = None  # parent's end of the socketpair the child sends the listener on
        self.child_channel_fd = -1
        self.handover: Handover | None = None
        self.denials: list[dict[str, object]] = []
        self.trouble = ""  # why the run's network record may be incomplete (the audit log failed, the daemon died)
        self.refused = ""  # connections the daemon refused over the session's budget, as one line
        self.credentials: list[Resolved] = []  # read by the run (proxy/client/credentials.py); the sandbox gets their placeholders
        self.file_secrets: list[Resolved] = []  # the secrets of the user's tool configuration (profiles/toolconfig.py)
        self.approve = 0  # seconds a refused request waits for the user's answer (proxy/filter/approvals.py)
        self.always: list[dict[str, object]] = []  # hosts answered "always": written into the policy after the run
        self.intercepted = False  # the namespace sends every connection and DNS query to the filter (bwrap/parts/interception.py)
        self.names: tuple[int, int] | None = None  # names the sandbox's resolver answered and refused (proxy/summary.py)
        self.exported = ""  # records the collector did not get ([audit] otlp), as a line
        self.agent_session = ""  # the agent session and tool call that started the run (cli/hook.py): in every audit record
        self.tool_call = ""

    def open(self) -> None:
        """Before bwrap starts: a connection to the daemon (a starting one will do), and the child's channel."""
        from stockade.proxy.client.handover import Handover, spec_message
        from stockade.proxy.control import DaemonFiles

        spec = spec_message(self.session_id, list(self.command), self.cwd, self.rules, [*self.credentials, *self.file_secrets], self.approve)
        spec["forwards"] = [entry for entry, _address, _port in self.listens()]  # the door of each listener after the proxy's
        if self.agent_session or self.tool_call:
            spec.update(agent_session=self.agent_session, tool_call=self.tool_call)
        self.handover = Handover(DaemonFiles(self.runtime, self.state), spec)
        self.handover.reach()
        parent, child = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.channel = parent
        self.child_channel_fd = child.detach()

    def listens(self) -> list[tuple[str, str, int]]:
        """(the allow entry, address, port) of each host loopback port the sandbox's namespace forwards (forwards.py)."""
        found: list[tuple[str, int, list[str]]] = self.rules.get("forwards") or []  # type: ignore[assignment]
        return [(str(entry), str(address), int(port)) for entry, port, addresses in found for address in addresses]

    def attach(self, pid: int = 0) -> None:
        """After bwrap started (`pid`, its process: the daemon reads which process inside opened each
        connection below it, proxy/daemon/attribution.py): take the sandbox's listeners and send them to
        the daemon (no waiting)."""
        assert self.channel is not None and self.handover is not None
        os.close(self.child_channel_fd)
        self.channel.settimeout(10)
        try:
            listeners, intercepted, diag = receive_listeners(self.channel, 1 + len(self.listens()), extras=INTERCEPTION_SOCKETS)
        finally:
            self.channel.close()
        if intercepted:  # the last ones: the transparent listeners, DNS's, the packet log (bwrap/parts/interception.py)
            self.handover.spec["intercept"] = intercepted
            self.intercepted = True
        if pid:
            self.handover.spec["sandbox_pid"] = pid
        if diag is not None:  # the last socket sent: the namespace's socket table, for the daemon's attribution
            self.handover.spec["diag"] = True
            listeners.append(diag)
        self.handover.send(listeners)  # the handover keeps them (a replaced daemon is sent them again), and closes them

    def close(self) -> None:
        """After the command: end the session (or leave an unused one to end itself)."""
        if self.handover is None:
            return
        ended = self.handover.end()
        self.handover = None
        self.denials, self.trouble, self.refused, self.always = ended.denials, ended.trouble, ended.refused, ended.always
        self.names = ended.names
        self.exported = ended.exported
