"""The daemon's side of the control socket: who may connect, how a request is read, what each op answers.

Why a module of its own: this is the daemon's only door for its own user's
processes, so its fences sit together and apart from the life cycle: only
peers of the daemon's own uid (SO_PEERCRED, `peer_uid`), no line longer than
`control.MAX_LINE`, a bad request answered rather than fatal, and every
session registered on a connection ended when that connection closes (a
run that dies cannot leave its session open). The protocol itself is
`control.py`; the doors a "listen" opens are `doorkeeper.py`.

Raw sockets rather than asyncio streams: a stream's recv() would drop the
descriptor that comes with "listen" (SCM_RIGHTS needs recvmsg).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

from stockade.proxy.audit import AuditError
from stockade.proxy.control import INTERCEPTION_SOCKETS, MAX_FORWARDS, MAX_LINE, PROTOCOL, SessionSpec, decode, encode
from stockade.proxy.daemon.accepting import accept
from stockade.proxy.daemon.door import readable
from stockade.proxy.daemon.doorkeeper import Doors
from stockade.proxy.filter.approvals import Approvals
from stockade.proxy.filter.sessions import Registry, Session
from stockade.proxy.filter.splicing import SpliceOffers

logger = logging.getLogger(__name__)


class Host(Protocol):
    """What the control server reads of the daemon that runs it (daemon.Daemon)."""

    port: int  # the proxy's loopback port
    exiting: bool  # no new session is taken
    clients: int  # proxy connections open now

    def touch(self) -> None:
        """Something happened: the idle timer starts again."""


class ControlServer:
    """Accepts on the control socket and answers each connection's requests, one line each."""

    def __init__(self, host: Host, registry: Registry, doors: Doors, splicing: SpliceOffers, approvals: Approvals | None = None) -> None:
        self.host = host
        self.registry = registry
        self.doors = doors
        self.splicing = splicing
        self.approvals = approvals if approvals is not None else Approvals()  # refused requests held for an answer
        self._server: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._bound: tuple[int, int] | None = None  # our control socket's (device, inode)
        self._path: Path | None = None

    def start(self, path: Path) -> None:
        """Bind the control socket at `path` (0600) and accept on it."""
        if path.exists():
            path.unlink()  # left by a daemon that died; the start lock is held by our starter
        self._path = path
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        os.chmod(path, 0o600)
        self._bound = socket_identity(path)
        self._server.listen(64)
        self._server.setblocking(False)
        self._keep(self._accept_loop(self._server))

    def serve_descriptor(self, fd: int) -> None:
        """Serve an already connected socket as one more control connection (a starting run's, launch.reach)."""
        self._keep(self._serve(socket.socket(fileno=fd)))

    def still_ours(self) -> bool:
        """False once the socket at our path was replaced (a newer daemon) or removed: no run can reach us."""
        return self._bound is None or self._path is None or socket_identity(self._path) == self._bound

    def close(self) -> None:
        """Stop accepting and end every connection (each ends the sessions it registered)."""
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            self._server.close()

    def _keep(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept_loop(self, server: socket.socket) -> None:
        while True:
            conn = await accept(server, "the control socket")
            if conn is None:
                return
            self._keep(self._serve(conn))

    async def _serve(self, conn: socket.socket) -> None:
        owned: set[str] = set()  # sessions registered on this connection end with it
        loop = asyncio.get_running_loop()
        lines = ControlReader(conn)
        try:
            conn.setblocking(False)
            uid = peer_uid(conn)
            if uid != os.getuid():
                logger.warning("control connection from uid %s refused", uid)
                await loop.sock_sendall(conn, encode({"ok": False, "error": "only the daemon's own user may use it"}))
                return
            while True:
                try:
                    line, fds = await lines.readline()
                except ValueError:  # longer than MAX_LINE
                    await loop.sock_sendall(conn, encode({"ok": False, "error": "control message too long"}))
                    return
                if not line:
                    return
                afterwards: list[Callable[[], None]] = []
                try:
                    message = decode(line)
                    if message.get("op") == "questions":  # waits for news: the one request answered asynchronously
                        reply = await self._questions(message)
                    else:
                        reply = self.handle(message, owned, fds, afterwards)
                except Exception as exc:  # a bad request gets an answer, never a dead daemon
                    logger.info("control request failed: %s", exc)
                    reply = {"ok": False, "error": str(exc)}
                    afterwards.clear()
                finally:
                    _close_all(fds)  # whatever a request did not keep
                await loop.sock_sendall(conn, encode(reply))
                for step in afterwards:  # a door opens only once its answer is on its way
                    step()
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:  # the daemon is shutting down
            pass
        finally:
            _close_all(lines.fds)
            for session_id in owned:
                self._end(session_id)
                logger.info("session %s ended with its control connection", session_id)
            self.host.touch()
            conn.close()

    def handle(
        self, message: dict[str, Any], owned: set[str], fds: list[int] | None = None, afterwards: list[Callable[[], None]] | None = None
    ) -> dict[str, Any]:
        """Answer one control request (see proxy/control.py for the protocol).

        A request that keeps one of `fds` removes it from the list; the caller closes the rest.
        What must wait until the reply was sent goes in `afterwards` (run at once when it is None).
        """
        op = message.get("op")
        if op == "ping":
            return {
                "ok": True,
                "port": self.host.port,
                "pid": os.getpid(),
                "protocol": PROTOCOL,
                "exiting": self.host.exiting,
                "sessions": len(self.registry),
                "clients": self.host.clients,
                "spliced": self.splicing.spliced_total,
                "bodies": self.splicing.bodies_spliced,
            }
        if op == "register":
            return self._register(message, owned)
        if op == "open":
            return self._open(message, owned, fds if fds is not None else [], afterwards)
        if op == "listen":
            return self._listen(str(message.get("session_id", "")), owned, fds if fds is not None else [])
        if op == "answer":
            why = self.approvals.answer(str(message.get("id", "")), str(message.get("answer", "")))
            return {"ok": True} if why is None else {"ok": False, "error": why}
        if op == "end":
            session_id = str(message.get("session_id", ""))
            ended = self._end(session_id)
            owned.discard(session_id)
            self.host.touch()
            if ended is None:
                return {"ok": False, "error": f"unknown session {session_id!r}"}
            refused = self.doors.refused(session_id)
            reply = {"ok": True, "denials": ended.denial_summary(), "audit_error": ended.writer.broken, "refused": refused, "always": ended.always}
            if ended.export is not None:
                reply["export_trouble"] = ended.export_trouble()
            if ended.spec.intercept:  # what the sandbox's resolver answered and refused (inside_dns.py)
                reply["names"] = {"answered": len(ended.names.by_name), "refused": ended.refused_names}
            return reply
        return {"ok": False, "error": f"unknown op {op!r}"}

    async def _questions(self, message: dict[str, Any]) -> dict[str, Any]:
        known = message.get("known", [])
        wait = message.get("wait", 0)
        if not isinstance(known, list) or not isinstance(wait, int | float) or isinstance(wait, bool):
            return {"ok": False, "error": "questions needs a list of known ids and a number of seconds to wait"}
        found = await self.approvals.wait(str(message.get("session_id", "")), [str(item) for item in known], float(wait))
        return {"ok": True, "questions": found}

    def _register(self, message: dict[str, Any], owned: set[str]) -> dict[str, Any]:
        if self.host.exiting:
            return {"ok": False, "error": "the proxy daemon is exiting", "retry": True}
        spec = SessionSpec.from_dict(message.get("spec"))
        try:
            token, session = self.registry.register(spec)
        except (ValueError, AuditError) as exc:
            return {"ok": False, "error": str(exc)}
        owned.add(spec.session_id)
        self.host.touch()
        logger.info("session %s registered (%s, %d allow, %d deny)", spec.session_id, spec.mode, len(spec.allow), len(spec.deny))
        return {"ok": True, "port": self.host.port, "token": token, "session_id": session.spec.session_id}

    def _open(self, message: dict[str, Any], owned: set[str], fds: list[int], afterwards: list[Callable[[], None]] | None) -> dict[str, Any]:
        """ "register" and "listen" at once. The door accepts only after the reply is sent: a run
        that has no reply yet may take it that no connection of its sandbox was served."""
        given = message.get("spec")
        spec: dict[str, Any] = given if isinstance(given, dict) else {}
        forwards = spec.get("forwards")
        intercept = spec.get("intercept", 0)
        extra = intercept if intercept in INTERCEPTION_SOCKETS and not isinstance(intercept, bool) else 0
        extra += spec.get("diag") is True  # the namespace's socket table, last
        if len(fds) != 1 + (len(forwards) if isinstance(forwards, list) else 0) + extra:
            return {"ok": False, "error": "open needs one listening socket, one more for each of the spec's forwards, and those interception names"}
        registered = self._register(message, owned)
        if not registered.get("ok"):
            return registered
        session_id = str(registered["session_id"])
        listened = self._listen(session_id, owned, fds, opening=afterwards)
        if not listened.get("ok"):
            self._end(session_id)
            owned.discard(session_id)
            return listened
        return {"ok": True, "protocol": PROTOCOL, "session_id": session_id}

    def _listen(self, session_id: str, owned: set[str], fds: list[int], opening: list[Callable[[], None]] | None = None) -> dict[str, Any]:
        """Serve a sandbox's listening socket as the door of a session registered on this very connection."""
        session = self.registry.get(session_id)
        if session is None or session_id not in owned:
            return {"ok": False, "error": f"session {session_id!r} was not registered on this connection"}
        refusal = self.doors.listen(session_id, session, fds, opening)
        if refusal is not None:
            return {"ok": False, "error": refusal}
        return {"ok": True}

    def _end(self, session_id: str) -> Session | None:
        """The door closes (its refusals recorded) before the session ends and its audit log closes."""
        self.doors.close(session_id)
        session = self.registry.get(session_id)
        if session is not None:
            self.approvals.end_session(session)
        return self.registry.end(session_id)


class ControlReader:
    """Lines from a non-blocking control connection, with the descriptors that came along (SCM_RIGHTS)."""

    MAX_FDS = 2 + 2 * MAX_FORWARDS + max(INTERCEPTION_SOCKETS)  # the proxy's listener, each forward's (localhost: two), interception's, a spare

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffer = b""
        self.fds: list[int] = []

    async def readline(self) -> tuple[bytes, list[int]]:
        """(line with its newline, descriptors received while reading it); b"" at EOF; ValueError if too long."""
        loop = asyncio.get_running_loop()
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise ValueError("control message too long")
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.conn, 65536, self.MAX_FDS, socket.MSG_CMSG_CLOEXEC)
            except BlockingIOError:
                await readable(loop, self.conn)
                continue
            self.fds += fds
            if not data:
                return b"", []
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        fds, self.fds = self.fds, []
        return line + b"\n", fds


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`; None if there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _close_all(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux and macOS)."""
    if hasattr(socket, "SO_PEERCRED"):
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        return int(uid)
    if sys.platform == "darwin":
        sol_local, local_peercred = 0, 1  # <sys/un.h>: struct xucred {u_int version; uid_t uid; ...}
        raw = sock.getsockopt(sol_local, local_peercred, 76)
        return int(struct.unpack_from("I", raw, 4)[0])
    return None
