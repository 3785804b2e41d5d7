"""Reaching this user's proxy daemon: find the one that answers, or start one.

On the hot path of every networked run (through `client`), so it imports
only C modules of the standard library (`_socket`, not `socket`, whose enums
cost a run milliseconds), and no json, pathlib, contextlib or typing.

Two ways in. `reach` is a Linux run's: a control connection at once, to the
running daemon or, when none answers, to a daemon it spawns with one end of
a socket pair as that daemon's first control connection, so the run starts
its command without waiting for the daemon to come up (bwrap/running/network.py).
`ensure_daemon` waits for the daemon's port (macOS, `stockade proxy`).

A new daemon is started under an fcntl lock that the daemon itself inherits
and lets go of once it serves its control socket, so concurrent runs start
one daemon, and a run that finds the lock taken waits for that daemon.
"""

from __future__ import annotations

import _socket
import fcntl
import os
import select
import sys
import time

from stockade.core.errors import SandboxSetupError
from stockade.proxy.control import MAX_LINE, PROTOCOL, START_TIMEOUT, DaemonFiles, decode, encode

TYPE_CHECKING = False  # typing's own flag costs every run its import (see core/errors.py)
if TYPE_CHECKING:
    from typing import Any

    from stockade.core.locations import Locations

IO_TIMEOUT = 10.0
LOCK_MARGIN = 5.0  # how much longer than START_TIMEOUT a run waits for the start lock
# A live daemon answers a ping or a registration in milliseconds; one that has not answered in
# this long is taken as hung (stopped, wedged) and replaced. A merely slow one loses nothing:
# a registration that timed out is retried with IO_TIMEOUT once a ping has found it alive.
HUNG_AFTER = 1.0
IDLE_ENV = "STOCKADE_PROXY_IDLE"  # seconds a daemon with no sessions and no connections lives on
TEST_RESOLVER_ENV = "STOCKADE_PROXY_TEST_RESOLVER"  # tests only: JSON name table (see proxy/filter/resolver.py)
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class ProxyDaemonError(SandboxSetupError, OSError):
    """The proxy daemon could not be started or reached, or refused a request."""


def daemon_files(locations: Locations) -> DaemonFiles:
    return DaemonFiles(runtime=str(locations.runtime), state=str(locations.state))


def reach(files: DaemonFiles, *, replacing: tuple[int, int] | None = None) -> tuple[_socket.socket, bool]:
    """(a control connection, whether this call started the daemon behind it), never waiting for a start.

    `replacing` is the control socket (device, inode) of a daemon that proved unusable (hung,
    exiting, an older protocol): a new daemon is started even though that one still accepts.
    """
    if replacing is None:
        try:
            return connect(files, IO_TIMEOUT), False
        except OSError:
            pass
    lock = start_lock(files)  # held by a daemon another run started until that daemon serves
    try:
        if replacing is None or socket_identity(files) != replacing:
            try:
                return connect(files, IO_TIMEOUT), False
            except OSError:
                pass
        return _start_with_channel(files, lock), True
    finally:
        os.close(lock)


def socket_identity(files: DaemonFiles) -> tuple[int, int] | None:
    """(device, inode) of the control socket now, which tells one daemon from its successor."""
    try:
        info = os.stat(files.socket)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def ensure_daemon(locations: Locations, *, idle_timeout: float | None = None, test_resolver: str | None = None) -> int:
    """The port of this user's proxy daemon on 127.0.0.1, starting the daemon if none answers.

    `idle_timeout` and `test_resolver` apply only to a daemon this call starts
    (defaults: $STOCKADE_PROXY_IDLE or 300 s; $STOCKADE_PROXY_TEST_RESOLVER or none).
    """
    files = daemon_files(locations)
    pinged = socket_identity(files)
    port, hung = _alive_or_hung(files)
    if port is not None:
        return port
    hung_socket = pinged if hung else None
    lock = start_lock(files)
    try:
        # Another run may have started one while we waited; a daemon that just failed to answer
        # in HUNG_AFTER is not asked again (its socket unchanged): a new one replaces it.
        if hung_socket is None or socket_identity(files) != hung_socket:
            port = _alive_port(files)
            if port is not None:
                return port
        return _start(files, idle_timeout, test_resolver)
    finally:
        os.close(lock)  # closing releases the lock


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


def connect(files: DaemonFiles, timeout: float = IO_TIMEOUT) -> _socket.socket:
    """A new connection to the daemon's control socket."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(files.socket)
    except OSError:
        conn.close()
        raise
    return conn


def exchange(conn: _socket.socket, message: dict[str, Any]) -> dict[str, Any]:
    """Send one request and wait for its reply."""
    conn.sendall(encode(message))
    return read_reply(conn)


def send_with_fds(conn: _socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    """One request with descriptors alongside (SCM_RIGHTS); what socket.send_fds does."""
    data = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)
    conn.sendmsg([encode(message)], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, data)])


def read_reply(conn: _socket.socket) -> dict[str, Any]:
    """One reply line, and not a byte of the next; ProxyDaemonError if it is oversized or not a JSON object."""
    data = b""
    while not data.endswith(b"\n"):
        ahead = conn.recv(65536, _socket.MSG_PEEK)
        if not ahead:
            raise ConnectionResetError("the proxy daemon closed the control connection")
        end = ahead.find(b"\n")
        data += conn.recv(end + 1 if end >= 0 else len(ahead))
        if len(data) > MAX_LINE:
            raise ProxyDaemonError("the proxy daemon sent an oversized reply")
    try:
        return decode(data)
    except ValueError as exc:
        raise ProxyDaemonError(f"the proxy daemon sent a malformed reply: {exc}") from exc


def last_log_line(files: DaemonFiles) -> str:
    """The last line of the daemon's log: why a daemon that never came up did not."""
    try:
        with open(files.log, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8192))
            text = handle.read().decode(errors="replace")
    except OSError:
        return "no log"
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "no output"


# -- internals -----------------------------------------------------------------


def _alive_port(files: DaemonFiles) -> int | None:
    """The daemon's port if its port file exists and it answers a ping on the control socket."""
    return _alive_or_hung(files)[0]


def _alive_or_hung(files: DaemonFiles) -> tuple[int | None, bool]:
    """_alive_port, and whether the daemon there is hung (accepts, never answers)."""
    try:
        with open(files.port_file, "rb") as handle:
            recorded = decode(handle.read())
    except (OSError, ValueError):
        return None, False
    reply, hung = ping_or_hung(files)
    if reply and not reply.get("exiting") and reply.get("port") == recorded.get("port") and reply.get("protocol", 1) >= PROTOCOL:
        return int(reply["port"]), False
    return None, hung  # none, dying, hung, or an older stockade's daemon: a new one takes over the files


def start_lock(files: DaemonFiles) -> int:
    """The daemon's folders made (0700, this user's own), then its start lock taken: a descriptor
    to close when done. Whoever starts a daemon, or makes what a daemon would make, holds it."""
    _private_dir(files.runtime)
    _private_dir(files.state)
    return _lock(files.lock)


def _private_dir(path: str) -> None:
    """Create `path` 0700 (parents too); refuse one that another user owns."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.stat(path)
    if info.st_uid != os.getuid():
        raise ProxyDaemonError(f"{path} belongs to another user; stockade keeps its proxy files in a private directory")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def _lock(path: str) -> int:
    """The start lock's descriptor, locked (closing it lets go); waits for whoever holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + START_TIMEOUT + LOCK_MARGIN  # a daemon holding it gives up on itself at START_TIMEOUT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise ProxyDaemonError(f"timed out waiting for {path} (another stockade is starting the proxy daemon)") from None
            time.sleep(0.005)


def _start(files: DaemonFiles, idle_timeout: float | None, test_resolver: str | None) -> int:
    """Spawn the daemon and wait for the port on its ready pipe."""
    read_end, write_end = os.pipe()
    try:
        _spawn(files, ["--ready-fd", str(write_end)], [write_end], idle_timeout, test_resolver)
    except OSError:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    try:
        line = _read_ready(read_end)
    finally:
        os.close(read_end)
    try:
        return int(line)
    except ValueError:
        raise ProxyDaemonError(f"the proxy daemon did not start: {last_log_line(files)} (log: {files.log})") from None


def _start_with_channel(files: DaemonFiles, lock: int) -> _socket.socket:
    """Spawn the daemon with one end of a socket pair as its first control connection; the other
    end comes back at once. The daemon inherits the start lock and lets go of it once it serves."""
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        channel = theirs.detach()
        try:
            _spawn(files, ["--control-fd", str(channel), "--lock-fd", str(lock)], [channel, lock], None, None)
        finally:
            os.close(channel)
    except OSError:
        ours.close()
        raise
    ours.settimeout(IO_TIMEOUT)
    return ours


def _spawn(files: DaemonFiles, extra: list[str], passed: list[int], idle_timeout: float | None, test_resolver: str | None) -> None:
    """Start `python -m stockade.proxy.daemon` in its own session, with only `passed` beside stdio."""
    idle = idle_timeout if idle_timeout is not None else os.environ.get(IDLE_ENV)
    resolver = test_resolver if test_resolver is not None else os.environ.get(TEST_RESOLVER_ENV)
    argv = [sys.executable, "-m", "stockade.proxy.daemon", "--runtime-dir", files.runtime, "--state-dir", files.state, *extra]
    if idle is not None and idle != "":
        argv += ["--idle-timeout", str(int(float(idle)))]
    if resolver:
        argv += ["--test-resolver", str(resolver)]
    # OTEL_*: each run passes its own export settings (proxy/export_settings.py); the daemon, shared by every
    # run, must not send with the first run's
    env = {k: v for k, v in os.environ.items() if k.lower() not in _PROXY_VARS and k != TEST_RESOLVER_ENV and not k.startswith("OTEL_")}
    log = os.open(files.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        for fd in passed:
            os.set_inheritable(fd, True)  # the only descriptors the daemon inherits besides stdio
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
                *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited(keep=passed)),
            ],
            setsid=True,  # its own session: survives ^C and the end of this run
        )
    except OSError as exc:
        raise ProxyDaemonError(f"cannot start the proxy daemon: {exc}") from exc
    finally:
        for fd in passed:
            os.set_inheritable(fd, False)
        os.close(log)


def _inherited(keep: list[int]) -> list[int]:
    """Descriptors above stdio, other than `keep`, that a spawned process would inherit."""
    try:
        names = os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")
    except OSError:
        return []
    found = []
    for name in names:
        fd = int(name)
        if fd <= 2 or fd in keep:
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
