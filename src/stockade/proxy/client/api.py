"""The `stockade run` side of the proxy daemon, as one import.

`launch` finds or starts the daemon, `sessionclient` registers and ends a
run's session on it, `summary` words what a person reads at the run's end.
Backends import them through here, so this module stays as light as they
are: on the hot path of every networked run it may import the standard
library only (no mitmproxy, Rich, psutil, subprocess or typing).
"""

from __future__ import annotations

from stockade.proxy.client.launch import ProxyDaemonError, daemon_files, ensure_daemon
from stockade.proxy.client.sessionclient import (
    SessionEnd,
    SessionTicket,
    attach_listener,
    close_session,
    daemon_status,
    end_session,
    finish_session,
    open_session,
    open_session_with,
    register_session,
    session_rules,
)
from stockade.proxy.control import SessionSpec
from stockade.proxy.summary import describe_denial

__all__ = [
    "ProxyDaemonError",
    "SessionEnd",
    "SessionSpec",
    "SessionTicket",
    "attach_listener",
    "close_session",
    "daemon_files",
    "daemon_status",
    "describe_denial",
    "end_session",
    "ensure_daemon",
    "finish_session",
    "open_session",
    "open_session_with",
    "register_session",
    "session_rules",
]
