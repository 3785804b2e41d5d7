"""Reaching this user's proxy daemon: find the one that answers, or start one.

On the hot path of every networked run (through `client`), so it imports the
standard library only (no mitmproxy, Rich, psutil, not even subprocess or typing).

A warm run costs one ping on the control socket. A cold one starts the
daemon under an fcntl lock, so concurrent runs start one daemon, and waits
for the daemon's "ready" line on a pipe rather than polling.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import socket
import sys
import time
from contextlib import contextmanager

from stockade.core.errors import SandboxSetupError
from stockade.proxy.control import MAX_LINE, PROTOCOL, DaemonFiles, decode, encode

TYPE_CHECKING = False  # typing's own flag costs every run its import (see core/errors.py)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

    from stockade.core.locations import Locations

START_TIMEOUT = 30.0  # first start creates mitmproxy's private CA; later starts take well under a second
IO_TIMEOUT = 10.0
# A live daemon answers a ping or a registration in milliseconds; one that has not answered in
# this long is taken as hung (stopped, wedged) and replaced. A merely slow one loses nothing:
# a registration that timed out is retried with IO_TIMEOUT once a ping has found it alive.
HUNG_AFTER = 1.0
IDLE_ENV = "STOCKADE_PROXY_IDLE"  # seconds a daemon with no sessions and no connections lives on
TEST_RESOLVER_ENV = "STOCKADE_PROXY_TEST_RESOLVER"  # tests only: JSON name table (see proxy/resolver.py)
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class ProxyDaemonError(SandboxSetupError, OSError):
    """The proxy daemon could not be started or reached, or refused a request."""


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


def ping(files: DaemonFiles) -> dict[str, Any] | None:
    """The daemon's ping reply, or None if none answered."""
    return ping_or_hung(files)[0]


def ping_or_hung(files: DaemonFiles) -> tuple[dict[str, Any] | None, bool]:
    """The daemon's ping reply (None if none answered), and whether one accepted and never answered."""
    try:
        conn = connect(files, HUNG_AFTER)
    except OSError:
        return None, False
    try:
        reply = exchange(conn, {"op": "ping"})
    except TimeoutError:
        return None, True
    except OSError:
        return None, False
    finally:
        conn.close()
    return (reply if reply.get("ok") else None), False


def connect(files: DaemonFiles, timeout: float = IO_TIMEOUT) -> socket.socket:
    """A new connection to the daemon's control socket."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(str(files.socket))
    except OSError:
        conn.close()
        raise
    return conn


def exchange(conn: socket.socket, message: dict[str, Any]) -> dict[str, Any]:
    """Send one request and wait for its reply."""
    conn.sendall(encode(message))
    return read_reply(conn)


def read_reply(conn: socket.socket) -> dict[str, Any]:
    """One reply line; ProxyDaemonError if it is oversized or not a JSON object."""
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
    reply, hung = ping_or_hung(files)
    if reply and not reply.get("exiting") and reply.get("port") == recorded.get("port") and reply.get("protocol", 1) >= PROTOCOL:
        return int(reply["port"]), False
    return None, hung  # none, dying, hung, or an older stockade's daemon: a new one takes over the files


def _socket_identity(files: DaemonFiles) -> tuple[int, int] | None:
    try:
        info = os.stat(files.socket)
    except OSError:
        return None
    return info.st_dev, info.st_ino


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
