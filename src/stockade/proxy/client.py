"""The `stockade run` side of the proxy daemon: start it on demand, register and end sessions.

On the hot path of every networked run, so it imports the standard library
only (no mitmproxy, Rich, psutil, not even subprocess).

A warm run costs two Unix-socket round trips (ping, register). A cold one
starts the daemon under an fcntl lock, so concurrent runs start one daemon,
and waits for the daemon's "ready" line on a pipe rather than polling.

A session lives while the registering process keeps its control connection
(held here until `end_session`): if `stockade run` dies, the daemon ends the
session itself. On Linux the sandbox's listener goes to the daemon on that
same connection (`attach_listener`), so only the registering run can give a
session its door.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stockade.core.errors import SandboxSetupError
from stockade.core.locations import Locations
from stockade.proxy.control import MAX_LINE, PROTOCOL, DaemonFiles, SessionSpec, decode, encode

if TYPE_CHECKING:
    from stockade.profiles.model import Policy  # a cached run's network session never loads the policy model

__all__ = [
    "ProxyDaemonError",
    "SessionSpec",
    "SessionTicket",
    "attach_listener",
    "daemon_files",
    "daemon_status",
    "describe_denial",
    "end_session",
    "ensure_daemon",
    "open_session",
    "open_session_with",
    "session_rules",
    "register_session",
]

START_TIMEOUT = 30.0  # first start creates mitmproxy's private CA; later starts take well under a second
IO_TIMEOUT = 10.0
# A live daemon answers a ping or a registration in milliseconds; one that has not answered in
# this long is taken as hung (stopped, wedged) and replaced. A merely slow one loses nothing:
# a registration that timed out is retried with IO_TIMEOUT once a ping has found it alive.
HUNG_AFTER = 1.0
IDLE_ENV = "STOCKADE_PROXY_IDLE"  # seconds a daemon with no sessions and no connections lives on
TEST_RESOLVER_ENV = "STOCKADE_PROXY_TEST_RESOLVER"  # tests only: JSON name table (see proxy/resolver.py)
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")

_held: dict[str, socket.socket] = {}  # session id -> the control connection that keeps it alive


class ProxyDaemonError(SandboxSetupError, OSError):
    """The proxy daemon could not be started or reached, or refused a request."""


@dataclass(frozen=True)
class SessionTicket:
    """The daemon's loopback port and the session's credential for it (macOS; Linux uses the door)."""

    port: int
    token: str = field(repr=False)
    session_id: str = ""


def daemon_files(locations: Locations) -> DaemonFiles:
    return DaemonFiles(runtime=locations.runtime, state=locations.state)


def ensure_daemon(locations: Locations, *, idle_timeout: float | None = None, test_resolver: str | None = None) -> int:
    """The port of this user's proxy daemon on 127.0.0.1, starting the daemon if none answers.

    `idle_timeout` and `test_resolver` apply only to a daemon this call starts
    (defaults: $STOCKADE_PROXY_IDLE or 300 s; $STOCKADE_PROXY_TEST_RESOLVER or none).
    """
    files = daemon_files(locations)
    pinged = _socket_identity(files)
    port, hung = _alive_or_hung(files)
    if port is not None:
        return port
    hung_socket = pinged if hung else None
    _private_dir(files.runtime)
    _private_dir(files.state)
    with _locked(files.lock):
        # Another run may have started one while we waited; a daemon that just failed to answer
        # in HUNG_AFTER is not asked again (its socket unchanged): a new one replaces it.
        if hung_socket is None or _socket_identity(files) != hung_socket:
            port = _alive_port(files)
            if port is not None:
                return port
        return _start(files, idle_timeout, test_resolver)


def register_session(locations: Locations, spec: SessionSpec) -> SessionTicket:
    """Register a session; the returned ticket carries the daemon port and the session's token."""
    files = daemon_files(locations)
    for attempt in (1, 2):
        try:
            conn = _connect(files, HUNG_AFTER if attempt == 1 else IO_TIMEOUT)
        except OSError:
            if attempt == 2:
                raise
            ensure_daemon(locations)
            continue
        try:
            reply = _exchange(conn, {"op": "register", "spec": spec.to_dict()})
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


def attach_listener(session_id: str, listener: socket.socket) -> None:
    """Give the daemon a session's listening socket (SCM_RIGHTS); it accepts there from now on.

    Sent on the session's own control connection. The caller closes its copy
    afterwards, so the daemon holds the only one and its death closes the door.
    """
    conn = _held.get(session_id)
    if conn is None:
        raise ProxyDaemonError(f"session {session_id} is not registered by this process")
    socket.send_fds(conn, [encode({"op": "listen", "session_id": session_id})], [listener.fileno()])
    reply = _reply(conn)
    if not reply.get("ok"):
        raise ProxyDaemonError(f"the proxy daemon did not take the sandbox's listener: {reply.get('error', 'no reason given')}")


@dataclass(frozen=True)
class SessionEnd:
    denials: list[dict[str, Any]]  # dicts with host, port, rule, hint, count, origin
    audit_error: str | None  # why the session's audit log could not be written, if it could not
    trouble: str = ""  # one line: why this run's network record is incomplete ("" when it is whole)
    refused: str = ""  # one line: connections the session's budget refused ("" when none)


def end_session(locations: Locations, session_id: str) -> list[dict[str, Any]]:
    """End a session; returns what it was denied: dicts with host, port, rule, hint, count, origin."""
    return finish_session(locations, session_id).denials


def close_session(locations: Locations, session_id: str) -> SessionEnd:
    """End a session at the end of a run, never raising: a daemon that died under the run,
    or an audit log it could not write, becomes the `trouble` line the run reports."""
    try:
        ended = finish_session(locations, session_id)
    except (OSError, ProxyDaemonError) as error:
        return SessionEnd([], None, (
            f"the proxy daemon was gone when the run ended ({error}): the run's network connections ended with it, "
            "and the audit log holds their start records only (`stockade audit` marks them incomplete)"
        ))
    if ended.audit_error:
        return SessionEnd(ended.denials, ended.audit_error,
                          f"the audit log could not be written ({ended.audit_error}): every request after that was refused", ended.refused)
    return ended


def finish_session(locations: Locations, session_id: str) -> SessionEnd:
    """End a session; what it was denied, and whether its audit log failed."""
    conn = _held.pop(session_id, None)
    try:
        if conn is None:
            conn = _connect(daemon_files(locations))
        reply = _exchange(conn, {"op": "end", "session_id": session_id})
    finally:
        if conn is not None:
            conn.close()
    if not reply.get("ok"):
        raise ProxyDaemonError(f"the proxy daemon could not end session {session_id}: {reply.get('error')}")
    audit_error = reply.get("audit_error")
    return SessionEnd(
        list(reply.get("denials", [])), audit_error if isinstance(audit_error, str) else None, refused=_refused_line(reply.get("refused"))
    )


def _refused_line(refused: object) -> str:
    if not isinstance(refused, dict) or not isinstance(refused.get("count"), int) or refused["count"] <= 0:
        return ""
    count = refused["count"]
    return f"network: {count} connection{'s' * (count != 1)} refused with a 503: {refused.get('why')}"


def session_rules(policy: Policy, locations: Locations) -> dict[str, Any]:
    """What of a policy the daemon needs for a session, as plain data (a cached plan stores it)."""
    return {
        "mode": policy.network.mode.value,
        "allow": list(policy.network.allow),
        "deny": list(policy.network.deny),
        "audit_path": policy.audit.log or str(locations.default_audit_log),
        "origin": policy.origin,
    }


def open_session(locations: Locations, session_id: str, command: list[str], cwd: str, policy: Policy) -> SessionTicket:
    """Start (or reuse) the daemon and register one run's network rules; fails closed with exit 125."""
    return open_session_with(locations, session_id, command, cwd, session_rules(policy, locations))


def open_session_with(locations: Locations, session_id: str, command: list[str], cwd: str, rules: dict[str, Any]) -> SessionTicket:
    """open_session from `session_rules` already taken from the policy."""
    spec = SessionSpec(
        session_id=session_id,
        command=command,
        cwd=cwd,
        mode=str(rules["mode"]),
        allow=tuple(rules["allow"]),
        deny=tuple(rules["deny"]),
        audit_path=str(rules["audit_path"]),
        origin=str(rules["origin"]),
    )
    try:
        ensure_daemon(locations)
        return register_session(locations, spec)
    except ProxyDaemonError:
        raise
    except OSError as exc:
        raise ProxyDaemonError(f"cannot reach the network proxy daemon: {exc}; the run has no network, so it was not started") from None


def describe_denial(denial: dict[str, Any], origin: str) -> str:
    """One summary line for a session's denial, with the policy line that would allow it, for every backend."""
    count = int(str(denial.get("count") or 1))
    where = f"network: denied {denial.get('host')}:{denial.get('port')}" + (f" ({count} times)" if count > 1 else "")
    if not denial.get("hint"):
        return f"{where} ({denial.get('rule')}); no policy change allows this"
    from stockade.profiles.hints import allow_command

    command = allow_command(str(denial.get("hint")), origin)
    if command:
        return f"{where}; to allow it, run: {command}"
    return f"{where}; to allow it, add {denial.get('hint')} under [network] in {origin}"


def daemon_status(locations: Locations) -> dict[str, Any] | None:
    """The running daemon's ping reply (port, pid, sessions, clients, spliced), or None."""
    return _ping(daemon_files(locations))


# -- internals -----------------------------------------------------------------


def _alive_port(files: DaemonFiles) -> int | None:
    """The daemon's port if its port file exists and it answers a ping on the control socket."""
    return _alive_or_hung(files)[0]


def _alive_or_hung(files: DaemonFiles) -> tuple[int | None, bool]:
    """_alive_port, and whether the daemon there is hung (accepts, never answers)."""
    try:
        recorded = json.loads(files.port_file.read_text())
    except (OSError, ValueError):
        return None, False
    reply, hung = _ping_or_hung(files)
    if reply and not reply.get("exiting") and reply.get("port") == recorded.get("port") and reply.get("protocol", 1) >= PROTOCOL:
        return int(reply["port"]), False
    return None, hung  # none, dying, hung, or an older stockade's daemon: a new one takes over the files


def _socket_identity(files: DaemonFiles) -> tuple[int, int] | None:
    try:
        info = os.stat(files.socket)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _ping(files: DaemonFiles) -> dict[str, Any] | None:
    return _ping_or_hung(files)[0]


def _ping_or_hung(files: DaemonFiles) -> tuple[dict[str, Any] | None, bool]:
    """The daemon's ping reply (None if none answered), and whether one accepted and never answered."""
    try:
        conn = _connect(files, HUNG_AFTER)
    except OSError:
        return None, False
    try:
        reply = _exchange(conn, {"op": "ping"})
    except TimeoutError:
        return None, True
    except OSError:
        return None, False
    finally:
        conn.close()
    return (reply if reply.get("ok") else None), False


def _connect(files: DaemonFiles, timeout: float = IO_TIMEOUT) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(str(files.socket))
    except OSError:
        conn.close()
        raise
    return conn


def _exchange(conn: socket.socket, message: dict[str, Any]) -> dict[str, Any]:
    conn.sendall(encode(message))
    return _reply(conn)


def _reply(conn: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionResetError("the proxy daemon closed the control connection")
        data += chunk
        if len(data) > MAX_LINE:
            raise ProxyDaemonError("the proxy daemon sent an oversized reply")
    try:
        return decode(data)
    except ValueError as exc:
        raise ProxyDaemonError(f"the proxy daemon sent a malformed reply: {exc}") from exc


def _private_dir(path: Path) -> None:
    """Create `path` 0700 (parents too); refuse one that another user owns."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise ProxyDaemonError(f"{path} belongs to another user; stockade keeps its proxy files in a private directory")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ProxyDaemonError(f"timed out waiting for {path} (another stockade is starting the proxy daemon)") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _start(files: DaemonFiles, idle_timeout: float | None, test_resolver: str | None) -> int:
    """Spawn the daemon in its own session and wait for the port on its ready pipe."""
    idle = idle_timeout if idle_timeout is not None else os.environ.get(IDLE_ENV)
    resolver = test_resolver if test_resolver is not None else os.environ.get(TEST_RESOLVER_ENV)
    read_end, write_end = os.pipe()
    argv = [
        sys.executable, "-m", "stockade.proxy.daemon",
        "--runtime-dir", str(files.runtime),
        "--state-dir", str(files.state),
        "--ready-fd", str(write_end),
    ]  # fmt: skip
    if idle is not None and idle != "":
        argv += ["--idle-timeout", str(int(float(idle)))]
    if resolver:
        argv += ["--test-resolver", str(resolver)]
    env = {k: v for k, v in os.environ.items() if k.lower() not in _PROXY_VARS and k != TEST_RESOLVER_ENV}
    log = os.open(files.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.set_inheritable(write_end, True)  # the only descriptor the daemon inherits besides stdio
        # posix_spawn rather than subprocess: nothing to import on the hot path, and no
        # Popen object complaining about a child that is meant to outlive this run.
        os.posix_spawn(
            sys.executable,
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log, 1),
                (os.POSIX_SPAWN_DUP2, log, 2),
                # Whatever else this process would pass on (bwrap's info pipe, the caller's
                # descriptors) must not live on in the daemon: a pipe it held would never see EOF.
                *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited(keep=write_end)),
            ],
            setsid=True,  # its own session: survives ^C and the end of this run
        )
    except OSError as exc:
        os.close(read_end)
        raise ProxyDaemonError(f"cannot start the proxy daemon: {exc}") from exc
    finally:
        os.close(write_end)
        os.close(log)
    try:
        line = _read_ready(read_end)
    finally:
        os.close(read_end)
    try:
        return int(line)
    except ValueError:
        raise ProxyDaemonError(f"the proxy daemon did not start: {_last_log_line(files.log)} (log: {files.log})") from None


def _inherited(keep: int) -> list[int]:
    """Descriptors above stdio, other than `keep`, that a spawned process would inherit."""
    try:
        names = os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")
    except OSError:
        return []
    found = []
    for name in names:
        fd = int(name)
        if fd <= 2 or fd == keep:
            continue
        try:
            if os.get_inheritable(fd):
                found.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return found


def _read_ready(fd: int) -> bytes:
    """The daemon's ready line (its port), or b"" if it exited or timed out first."""
    deadline = time.monotonic() + START_TIMEOUT
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return b""
        chunk = os.read(fd, 64)
        if not chunk:
            return b""
        data += chunk
    return data.strip()


def _last_log_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][-300:] if lines else "no output"
