"""A run's session on the proxy daemon: register it, give it its door, end it; and the daemon's status.

On the hot path of every networked run (through `client`), so it imports the
standard library only. The requests and replies are in proxy/control.py.

A session lives while the registering process keeps its control connection
(held here until the session ends): if `stockade run` dies, the daemon ends
the session itself. On Linux the sandbox's listener goes to the daemon on
that same connection (`attach_listener`), so only the registering run can
give a session its door.
"""

from __future__ import annotations

import os

from stockade.proxy import summary
from stockade.proxy.client.launch import (
    HUNG_AFTER,
    IO_TIMEOUT,
    ProxyDaemonError,
    connect,
    daemon_files,
    ensure_daemon,
    exchange,
    ping,
    read_reply,
    send_with_fds,
)
from stockade.proxy.control import SessionSpec
from stockade.proxy.summary import SessionEnd

TYPE_CHECKING = False  # typing's own flag costs every run its import (see core/errors.py)
if TYPE_CHECKING:
    import _socket
    from typing import Any

    from stockade.core.locations import Locations
    from stockade.profiles.credentials import Resolved
    from stockade.profiles.model import Policy  # a cached run's network session never loads the policy model
    from stockade.proxy.export_settings import ExportSettings

_held: dict[str, _socket.socket] = {}  # session id -> the control connection that keeps it alive


class SessionTicket:
    """The daemon's loopback port and the session's credential for it (macOS; Linux uses the door)."""

    __slots__ = ("port", "token", "session_id")

    def __init__(self, port: int, token: str, session_id: str = "") -> None:
        self.port = port
        self.token = token
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"SessionTicket(port={self.port!r}, session_id={self.session_id!r})"  # never the token


def session_rules(policy: Policy, locations: Locations) -> dict[str, Any]:
    """What of a policy the daemon needs for a session, as plain data (a cached plan stores it):
    of each credential, where its value lives; the run reads it (proxy/client/credentials.py)."""
    from stockade.proxy.client.credentials import plan_entry

    push = dict(policy.network.push)
    return {
        "mode": policy.network.mode.value,
        "allow": list(policy.network.allow),
        "deny": list(policy.network.deny),
        "audit_path": policy.audit.log or str(locations.default_audit_log),
        "origin": policy.origin,
        "http": [[host, list(allow), list(deny), *([list(push[host])] if host in push else [])] for host, allow, deny in policy.network.http],
        "credentials": [plan_entry(c.name, c.source, c.where, c.hosts, c.header, c.query, c.origin) for c in policy.credentials],
        # the collector's URL alone: its headers are read when the run starts (export_for)
        **({"otlp": policy.audit.otlp} if policy.audit.otlp else {}),
        # the baseline's allow list: no host past it is approved while the command waits
        **({"ceiling": list(policy.network.ceiling)} if policy.network.ceiling is not None else {}),
    }


def open_session(
    locations: Locations, session_id: str, command: list[str], cwd: str, policy: Policy, credentials: list[Resolved] | None = None,
    approve: int = 0, who: tuple[str, str] = ("", ""),
) -> SessionTicket:  # fmt: skip
    """Start (or reuse) the daemon and register one run's network rules and its credentials, read
    (proxy/client/credentials.py), how long a refused request waits for an answer, and the agent session
    and tool call that started the run (`who`); fails closed with exit 125."""
    return open_session_with(locations, session_id, command, cwd, session_rules(policy, locations), credentials, approve, who)


def open_session_with(
    locations: Locations, session_id: str, command: list[str], cwd: str, rules: dict[str, Any], credentials: list[Resolved] | None = None,
    approve: int = 0, who: tuple[str, str] = ("", ""),
) -> SessionTicket:  # fmt: skip
    """open_session from `session_rules` already taken from the policy, with the run's credentials read."""
    from stockade.proxy.control import SessionCredential

    spec = SessionSpec(
        session_id=session_id,
        command=command,
        cwd=cwd,
        mode=str(rules["mode"]),
        allow=tuple(rules["allow"]),
        deny=tuple(rules["deny"]),
        audit_path=str(rules["audit_path"]),
        origin=str(rules["origin"]),
        http=tuple(rules.get("http", [])),
        credentials=tuple(SessionCredential(c.name, c.placeholder, c.value, tuple(c.hosts), c.header, c.query) for c in credentials or ()),
        approve=approve,
        export=export_for(rules),
        agent_session=who[0],
        tool_call=who[1],
        ceiling=tuple(rules["ceiling"]) if "ceiling" in rules else None,
    )
    try:
        ensure_daemon(locations)
        return register_session(locations, spec)
    except ProxyDaemonError:
        raise
    except OSError as exc:
        raise ProxyDaemonError(f"cannot reach the network proxy daemon: {exc}; the run has no network, so it was not started") from None


def export_for(rules: dict[str, Any]) -> ExportSettings | None:
    """The run's export settings: the policy's collector, with this process's own OTEL variables
    (the environment the user started `stockade run` from: proxy/export_settings.py)."""
    if not rules.get("otlp"):
        return None
    from stockade.proxy.export_settings import settings_for

    return settings_for(str(rules["otlp"]), os.environ)


def register_session(locations: Locations, spec: SessionSpec) -> SessionTicket:
    """Register a session; the returned ticket carries the daemon port and the session's token."""
    files = daemon_files(locations)
    for attempt in (1, 2):
        try:
            conn = connect(files, HUNG_AFTER if attempt == 1 else IO_TIMEOUT)
        except OSError:
            if attempt == 2:
                raise
            ensure_daemon(locations)
            continue
        try:
            reply = exchange(conn, {"op": "register", "spec": spec.to_dict()})
        except OSError:
            conn.close()
            if attempt == 2:
                raise
            ensure_daemon(locations)
            continue
        conn.settimeout(IO_TIMEOUT)
        if reply.get("ok"):
            previous = _held.pop(spec.session_id, None)
            if previous is not None:
                previous.close()
            _held[spec.session_id] = conn
            return SessionTicket(port=int(reply["port"]), token=str(reply["token"]), session_id=str(reply["session_id"]))
        conn.close()
        if reply.get("retry") and attempt == 1:  # the daemon was exiting: start a new one
            ensure_daemon(locations)
            continue
        raise ProxyDaemonError(f"the proxy daemon refused the session: {reply.get('error', 'no reason given')}")
    raise ProxyDaemonError("the proxy daemon did not accept the session")  # pragma: no cover


def attach_listener(session_id: str, listener: _socket.socket) -> None:
    """Give the daemon a session's listening socket (SCM_RIGHTS); it accepts there from now on.

    Sent on the session's own control connection. The caller closes its copy
    afterwards, so the daemon holds the only one and its death closes the door.
    """
    conn = _held.get(session_id)
    if conn is None:
        raise ProxyDaemonError(f"session {session_id} is not registered by this process")
    send_with_fds(conn, {"op": "listen", "session_id": session_id}, [listener.fileno()])
    reply = read_reply(conn)
    if not reply.get("ok"):
        raise ProxyDaemonError(f"the proxy daemon did not take the sandbox's listener: {reply.get('error', 'no reason given')}")


def end_session(locations: Locations, session_id: str) -> list[dict[str, Any]]:
    """End a session; returns what it was denied: dicts with host, port, rule, hint, count, origin."""
    return finish_session(locations, session_id).denials


def close_session(locations: Locations, session_id: str) -> SessionEnd:
    """End a session at the end of a run, never raising: a daemon that died under the run,
    or an audit log it could not write, becomes the `trouble` line the run reports."""
    try:
        ended = finish_session(locations, session_id)
    except (OSError, ProxyDaemonError) as error:
        return SessionEnd([], None, summary.daemon_gone(error))
    if ended.audit_error:
        return SessionEnd(ended.denials, ended.audit_error, summary.audit_failed(ended.audit_error), ended.refused, ended.exported)
    return ended


def finish_session(locations: Locations, session_id: str) -> SessionEnd:
    """End a session; what it was denied, and whether its audit log failed."""
    conn = _held.pop(session_id, None)
    try:
        if conn is None:
            conn = connect(daemon_files(locations))
        reply = exchange(conn, {"op": "end", "session_id": session_id})
    finally:
        if conn is not None:
            conn.close()
    if not reply.get("ok"):
        raise ProxyDaemonError(f"the proxy daemon could not end session {session_id}: {reply.get('error')}")
    audit_error = reply.get("audit_error")
    exported = reply.get("export_trouble")
    return SessionEnd(
        list(reply.get("denials", [])),
        audit_error if isinstance(audit_error, str) else None,
        refused=summary.refused_line(reply.get("refused")),
        exported=exported if isinstance(exported, str) else "",
    )


def daemon_status(locations: Locations) -> dict[str, Any] | None:
    """The running daemon's ping reply (port, pid, sessions, clients, spliced), or None."""
    return ping(daemon_files(locations))
