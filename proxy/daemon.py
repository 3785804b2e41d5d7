"""The per-user proxy daemon: mitmproxy's DumpMaster running StockadeFilter, plus its control socket.

Run as `python -m stockade.proxy.daemon --runtime-dir DIR --state-dir DIR`
(`client.ensure_daemon` does this). It listens on 127.0.0.1 (a free port),
serves the control socket `DIR/proxy.sock` to processes of its own uid
only (SO_PEERCRED), writes `DIR/proxy.port` once it is ready, and exits
after `--idle-timeout` seconds without sessions or connections, removing
its files under the start lock so a starting run never sees a half-dead
daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from mitmproxy import ctx
from mitmproxy.options import Options
from mitmproxy.tools.dump import DumpMaster

from stockade.proxy.audit import AuditError
from stockade.proxy.control import MAX_LINE, DaemonFiles, SessionSpec, decode, encode
from stockade.proxy.stockadefilter import StockadeFilter

logger = logging.getLogger(__name__)

DEFAULT_IDLE = 300


class Daemon:
    """Addon for the daemon's lifecycle: ready signal, control socket, idle exit, clean-up."""

    def __init__(self, files: DaemonFiles, filt: StockadeFilter, ready_fd: int | None = None) -> None:
        self.files = files
        self.filter = filt
        self.ready_fd = ready_fd
        self.port = 0
        self.clients = 0
        self.last_activity = time.monotonic()
        self.exiting = False
        self._server: asyncio.AbstractServer | None = None
        self._idle_task: asyncio.Task[None] | None = None

    def load(self, loader: Any) -> None:
        loader.add_option(
            "stockade_idle_timeout",
            int,
            DEFAULT_IDLE,
            "Seconds the daemon keeps running with no session registered and no client connected.",
        )

    def client_connected(self, client: Any) -> None:
        self.clients += 1
        self.last_activity = time.monotonic()

    def client_disconnected(self, client: Any) -> None:
        self.clients -= 1
        self.last_activity = time.monotonic()

    async def running(self) -> None:
        try:
            await self._start_serving()
        except Exception:
            # mitmproxy would log this and carry on serving nobody: stop instead, so the
            # starting run sees the ready pipe close and reports the log's last line.
            logger.exception("cannot start the control socket")
            if self.ready_fd is not None:
                os.close(self.ready_fd)
                self.ready_fd = None
            ctx.master.shutdown()

    async def _start_serving(self) -> None:
        proxyserver = ctx.master.addons.get("proxyserver")
        self.port = int(proxyserver.listen_addrs()[0][1])
        if self.files.socket.exists():
            self.files.socket.unlink()  # left by a daemon that died; the start lock is held by our starter
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.files.socket), limit=MAX_LINE)
        os.chmod(self.files.socket, 0o600)
        temporary = self.files.port_file.with_suffix(".tmp")
        temporary.write_text(json.dumps({"port": self.port, "pid": os.getpid()}))
        os.replace(temporary, self.files.port_file)
        logger.info("stockade proxy daemon %d ready on 127.0.0.1:%d", os.getpid(), self.port)
        if self.ready_fd is not None:
            os.write(self.ready_fd, f"{self.port}\n".encode())
            os.close(self.ready_fd)
            self.ready_fd = None
        self._idle_task = asyncio.create_task(self._idle_watch())

    async def done(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
        if self._server is not None:
            self._server.close()
        self._remove_files()

    # -- control socket --------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        owned: set[str] = set()  # sessions registered on this connection end with it
        try:
            uid = peer_uid(writer.get_extra_info("socket"))
            if uid != os.getuid():
                logger.warning("control connection from uid %s refused", uid)
                writer.write(encode({"ok": False, "error": "only the daemon's own user may use it"}))
                await writer.drain()
                return
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # longer than MAX_LINE
                    writer.write(encode({"ok": False, "error": "control message too long"}))
                    return
                if not line:
                    return
                try:
                    reply = self.handle(decode(line), owned)
                except Exception as exc:  # a bad request gets an answer, never a dead daemon
                    logger.info("control request failed: %s", exc)
                    reply = {"ok": False, "error": str(exc)}
                writer.write(encode(reply))
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:  # the daemon is shutting down
            pass
        finally:
            for session_id in owned:
                if self.filter.registry.end(session_id) is not None:
                    logger.info("session %s ended with its control connection", session_id)
            self.last_activity = time.monotonic()
            writer.close()

    def handle(self, message: dict[str, Any], owned: set[str]) -> dict[str, Any]:
        """Answer one control request (see proxy/control.py for the protocol)."""
        op = message.get("op")
        if op == "ping":
            return {
                "ok": True,
                "port": self.port,
                "pid": os.getpid(),
                "exiting": self.exiting,
                "sessions": len(self.filter.registry),
                "clients": self.clients,
                "spliced": self.filter.spliced_total,
            }
        if op == "register":
            if self.exiting:
                return {"ok": False, "error": "the proxy daemon is exiting", "retry": True}
            spec = SessionSpec.from_dict(message.get("spec"))
            try:
                token, session = self.filter.registry.register(spec)
            except (ValueError, AuditError) as exc:
                return {"ok": False, "error": str(exc)}
            owned.add(spec.session_id)
            self.last_activity = time.monotonic()
            logger.info("session %s registered (%s, %d allow, %d deny)", spec.session_id, spec.mode, len(spec.allow), len(spec.deny))
            return {"ok": True, "port": self.port, "token": token, "session_id": session.spec.session_id}
        if op == "end":
            session_id = str(message.get("session_id", ""))
            session = self.filter.registry.end(session_id)
            owned.discard(session_id)
            self.last_activity = time.monotonic()
            if session is None:
                return {"ok": False, "error": f"unknown session {session_id!r}"}
            return {"ok": True, "denials": session.denial_summary()}
        return {"ok": False, "error": f"unknown op {op!r}"}

    # -- idle exit -------------------------------------------------------------

    def busy(self) -> bool:
        return len(self.filter.registry) > 0 or self.clients > 0

    async def _idle_watch(self) -> None:
        while True:
            idle = max(1, ctx.options.stockade_idle_timeout)
            await asyncio.sleep(min(5.0, idle / 5))
            if self.busy():
                self.last_activity = time.monotonic()
            elif time.monotonic() - self.last_activity >= idle and self._leave():
                return

    def _leave(self) -> bool:
        """Stop taking sessions and remove our files, under the start lock; False if a run holds it."""
        fd = os.open(self.files.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            if self.busy():
                return False
            self.exiting = True
            self._remove_files()
        finally:
            os.close(fd)
        logger.info("idle for %ss: exiting", ctx.options.stockade_idle_timeout)
        ctx.master.shutdown()
        return True

    def _remove_files(self) -> None:
        """Remove the port file and socket if they are still ours (a newer daemon may own them)."""
        try:
            if json.loads(self.files.port_file.read_text()).get("pid") != os.getpid():
                return
        except (OSError, ValueError):
            return
        for path in (self.files.port_file, self.files.socket):
            try:
                path.unlink()
            except FileNotFoundError:
                pass


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


def build_master(files: DaemonFiles, *, idle_timeout: int, test_resolver: str, ready_fd: int | None, splice: bool = True) -> DumpMaster:
    """mitmproxy configured as a filter: no interception, lazy connects, streamed bodies."""
    files.state.mkdir(mode=0o700, parents=True, exist_ok=True)
    options = Options(
        listen_host="127.0.0.1",
        listen_port=0,
        mode=["regular"],
        confdir=str(files.confdir),  # mitmproxy's own CA lands here, never in ~/.mitmproxy
    )
    master = DumpMaster(options, with_termlog=False, with_dumper=False)
    filt = StockadeFilter()
    master.addons.add(filt, Daemon(files, filt, ready_fd))
    options.update(
        connection_strategy="lazy",  # nothing is dialed before the ClientHello was checked
        stream_large_bodies="1m",
        websocket=False,  # upgrades become counted TCP, not message lists kept in memory
        onboarding=False,
        stockade_idle_timeout=idle_timeout,
        stockade_test_resolver=test_resolver,
        stockade_splice=splice,
    )
    return master


async def serve(files: DaemonFiles, *, idle_timeout: int, test_resolver: str, ready_fd: int | None, splice: bool = True) -> None:
    master = build_master(files, idle_timeout=idle_timeout, test_resolver=test_resolver, ready_fd=ready_fd, splice=splice)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, master.shutdown)
    await master.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stockade.proxy.daemon", description="stockade's network filter daemon")
    parser.add_argument("--runtime-dir", required=True, type=Path, help="0700 directory for the control socket and port file")
    parser.add_argument("--state-dir", required=True, type=Path, help="directory for the daemon's private mitmproxy files")
    parser.add_argument("--idle-timeout", type=int, default=DEFAULT_IDLE, help="seconds without sessions or connections before exiting")
    parser.add_argument("--test-resolver", default="", help="tests only: JSON file answering every name lookup")
    parser.add_argument("--ready-fd", type=int, default=None, help="write the port and a newline here once ready")
    parser.add_argument("--debug", action="store_true", help="log every decision step")
    parser.add_argument("--no-splice", action="store_true", help="keep checked TLS tunnels on mitmproxy's path (for comparison)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("mitmproxy").setLevel(logging.WARNING)
    os.umask(0o077)
    os.chdir("/")  # hold no directory of the run that started us
    files = DaemonFiles(runtime=args.runtime_dir, state=args.state_dir)
    files.runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    if files.runtime.stat().st_uid != os.getuid():
        parser.error(f"{files.runtime} belongs to another user")
    os.chmod(files.runtime, 0o700)  # the control socket's only fence besides SO_PEERCRED
    asyncio.run(
        serve(files, idle_timeout=args.idle_timeout, test_resolver=args.test_resolver, ready_fd=args.ready_fd, splice=not args.no_splice)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
