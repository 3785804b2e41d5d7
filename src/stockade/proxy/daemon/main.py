"""The per-user proxy daemon: a mitmproxy Master running the filter addons, plus its control socket.

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
import sys
import time
from pathlib import Path
from typing import Any

from stockade.proxy.daemon.mitmparts import block, core, disable_h2c, next_layer, proxyserver, tlsconfig  # first: see mitmparts.py

from mitmproxy import ctx  # isort: skip
from mitmproxy.master import Master  # isort: skip
from mitmproxy.options import Options  # isort: skip

from stockade.proxy.control import START_TIMEOUT, TEST_UPSTREAM_CA_ENV, DaemonFiles, system_roots
from stockade.proxy.daemon import headlimit
from stockade.proxy.daemon.accepting import raise_descriptor_limit
from stockade.proxy.daemon.controlserver import ControlServer
from stockade.proxy.daemon.doorkeeper import Doors
from stockade.proxy.daemon.otlp import Exports
from stockade.proxy.filter.approvals import Approvals
from stockade.proxy.filter.auth import SessionAuth
from stockade.proxy.filter.backstop import Backstop
from stockade.proxy.filter.lookup import Lookup
from stockade.proxy.filter.metering import Metering
from stockade.proxy.filter.requests import Decisions
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.splicing import SpliceOffers
from stockade.proxy.filter.state import Connections
from stockade.proxy.filter.swapping import Swapping
from stockade.proxy.filter.tunnels import Tunnels

logger = logging.getLogger(__name__)

DEFAULT_IDLE = 300


class Filter:
    """The enforcing addons, one job each, sharing one `Connections`.

    mitmproxy calls every hook on the addons in list order, awaiting each, and
    the order is part of the enforcement (`chain`): a later addon acts on what
    an earlier one decided, read from the flow and the connection's state.
    """

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry if registry is not None else Registry(exports=Exports())
        self.connections = Connections()
        self.lookup = Lookup()
        self.auth = SessionAuth(self.registry, self.connections)
        self.approvals = Approvals()  # refused requests held for the user's answer; the control server answers them
        self.decisions = Decisions(self.connections, self.lookup, self.approvals)
        self.tunnels = Tunnels(self.connections)
        self.metering = Metering(self.connections)
        self.swapping = Swapping()
        self.splicing = SpliceOffers(self.connections)
        self.backstop = Backstop(self.connections, self.lookup)

    def chain(self) -> list[Any]:
        return [
            self.lookup,  # hooks only options: the resolver Decisions and Backstop share
            # First on every request: the session decides everything after it. A flow it
            # answered (407/403) carries no admitted session, and the rest leave it alone.
            self.auth,
            # Judges the admitted request and writes its start record; must run before
            # Metering, which counts only flows recorded as allowed.
            self.decisions,
            self.tunnels,  # TLS, TCP inside tunnels: reads the tunnel Decisions allowed
            # Wraps the tunnel in its Meter (next_layer) and counts bodies: after Decisions,
            # before SpliceOffers, which hands over that very Meter and counted body.
            self.metering,
            # Wraps Metering's counters: watches request bodies for placeholders and masks
            # swapped credentials in answers (proxy/filter/placeholders.py).
            self.swapping,
            self.splicing,
            # server_connect: judges again below everything; reads the session Auth bound
            # and the lookup Decisions checked, and refusals Tunnels left for it.
            self.backstop,
        ]


class Daemon:
    """Addon for the daemon's life cycle: ready signal, port file, idle exit, clean-up.

    It assembles the rest: the control server (`controlserver.py`) that
    registers sessions, and the doors (`doorkeeper.py`) their sandboxes connect through.
    """

    def __init__(
        self, files: DaemonFiles, filt: Filter, ready_fd: int | None = None, control_fd: int | None = None, lock_fd: int | None = None
    ) -> None:
        self.files = files
        self.filter = filt
        self.ready_fd = ready_fd
        self.control_fd = control_fd  # the starting run's control connection (launch.reach), served once ready
        self.lock_fd = lock_fd  # the start lock the starting run handed on: let go of once the socket serves
        self.port = 0
        self.clients = 0
        self.last_activity = time.monotonic()
        self.exiting = False
        self.doors = Doors(filt.auth.bind)
        self.control = ControlServer(self, filt.registry, self.doors, filt.splicing, filt.approvals)
        self._idle_task: asyncio.Task[None] | None = None

    def load(self, loader: Any) -> None:
        loader.add_option(
            "stockade_idle_timeout",
            int,
            DEFAULT_IDLE,
            "Seconds the daemon keeps running with no session registered and no client connected.",
        )

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def client_connected(self, client: Any) -> None:
        self.clients += 1
        self.touch()

    def client_disconnected(self, client: Any) -> None:
        self.clients -= 1
        self.touch()

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
            self._let_go_of_lock()
            ctx.master.shutdown()

    async def _start_serving(self) -> None:
        proxyserver = ctx.master.addons.get("proxyserver")
        self.port = int(proxyserver.listen_addrs()[0][1])
        self.control.start(Path(self.files.socket))
        temporary = Path(self.files.runtime) / "proxy.port.tmp"
        temporary.write_text(json.dumps({"port": self.port, "pid": os.getpid()}))
        os.replace(temporary, self.files.port_file)
        logger.info("stockade proxy daemon %d ready on 127.0.0.1:%d", os.getpid(), self.port)
        self._let_go_of_lock()
        if self.control_fd is not None:
            self.control.serve_descriptor(self.control_fd)
            self.control_fd = None
        if self.ready_fd is not None:
            os.write(self.ready_fd, f"{self.port}\n".encode())
            os.close(self.ready_fd)
            self.ready_fd = None
        self._idle_task = asyncio.create_task(self._idle_watch())

    def _let_go_of_lock(self) -> None:
        """Runs waiting to start a daemon go on: they find this one (or, after a failure, none)."""
        if self.lock_fd is not None:
            signal.alarm(0)  # serving (or stopping): no longer a start that may hang
            os.close(self.lock_fd)
            self.lock_fd = None

    async def done(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
        self.control.close()
        self.doors.close_all()
        self._remove_files()
        self.filter.registry.close_exports()  # what waits for a collector, for a moment (proxy/daemon/otlp.py)

    # -- idle exit -------------------------------------------------------------

    def busy(self) -> bool:
        return len(self.filter.registry) > 0 or self.clients > 0

    async def _idle_watch(self) -> None:
        while True:
            idle = max(1, ctx.options.stockade_idle_timeout)
            await asyncio.sleep(min(5.0, idle / 5))
            if self._superseded():
                return
            if self.busy():
                self.last_activity = time.monotonic()
            elif time.monotonic() - self.last_activity >= idle and self._leave():
                return

    def _superseded(self) -> bool:
        """A newer daemon took over the control socket (this one was hung, and a run replaced it),
        or the socket was removed: no run can reach this daemon again. It takes no new session
        and exits once its last one ends (True when it is exiting)."""
        if self.control.still_ours():
            return False
        if not self.exiting:
            logger.info("the control socket is no longer ours (replaced or removed): no new sessions, exiting when idle")
            self.exiting = True
        if self.busy():
            return False
        logger.info("superseded and idle: exiting")
        ctx.master.shutdown()
        return True

    def _leave(self) -> bool:
        """Stop taking sessions and remove our files, under the start lock; False if a run holds it."""
        try:
            fd = os.open(self.files.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            # The runtime folder is gone (its HOME was removed): no run can find this daemon
            # again, and an exception here would end the idle watch and keep it alive for ever.
            self.exiting = True
            logger.info("idle for %ss, runtime folder unusable (%s): exiting", ctx.options.stockade_idle_timeout, exc.strerror)
            ctx.master.shutdown()
            return True
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
            if json.loads(Path(self.files.port_file).read_text()).get("pid") != os.getpid():
                return
        except (OSError, ValueError):
            return
        for path in (self.files.port_file, self.files.socket):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def proxy_addons() -> list[Any]:
    """The mitmproxy addons a filter needs, and no more.

    Not DumpMaster's thirty: every hook of every request walks the whole
    chain, and the rest (onboarding pages, replay, header rewriting, DNS
    resolving, saving flows) is either unused or would act on traffic behind
    the filter's back.
    """
    return [
        core.Core(),  # option checks
        block.Block(),  # clients from outside loopback are refused (defence in depth: we listen on loopback)
        proxyserver.Proxyserver(),
        next_layer.NextLayer(),  # which protocol layer a connection gets
        tlsconfig.TlsConfig(),  # TLS settings; the filter refuses interception on top of it
        disable_h2c.DisableH2C(),  # strips h2c upgrades mitmproxy cannot follow
    ]


def build_master(
    files: DaemonFiles,
    *,
    idle_timeout: int,
    test_resolver: str,
    ready_fd: int | None,
    splice: bool = True,
    control_fd: int | None = None,
    lock_fd: int | None = None,
) -> Master:
    """mitmproxy configured as a filter: no interception, lazy connects, streamed bodies."""
    if not os.path.isdir(files.state):
        raise SystemExit(f"stockade proxy daemon: {files.state} is gone (its HOME was removed?): not starting")
    headlimit.install()
    options = Options(
        listen_host="127.0.0.1",
        listen_port=0,
        mode=["regular"],
        confdir=str(files.confdir),  # mitmproxy's own CA lands here, never in ~/.mitmproxy
    )
    master = Master(options)
    filt = Filter()
    # mitmproxy's own addons first: NextLayer must have chosen a layer before Metering wraps it.
    master.addons.add(*proxy_addons(), *filt.chain(), Daemon(files, filt, ready_fd, control_fd, lock_fd))
    # A host with HTTP rules has its TLS terminated here; the origin is then verified as a client
    # would: against the system's roots (mitmproxy's own default is certifi's copy), or in tests
    # against the test origins' CA only.
    trusted = os.environ.get(TEST_UPSTREAM_CA_ENV) or system_roots()
    if trusted:
        options.update(ssl_verify_upstream_trusted_ca=trusted)
    options.update(
        connection_strategy="lazy",  # nothing is dialed before the ClientHello was checked
        stream_large_bodies="1m",
        websocket=False,  # upgrades become counted TCP, not message lists kept in memory
        stockade_idle_timeout=idle_timeout,
        stockade_test_resolver=test_resolver,
        stockade_splice=splice,
    )
    return master


async def serve(files: DaemonFiles, **settings: Any) -> None:
    """Run the daemon until it exits; `settings` are build_master's."""
    master = build_master(files, **settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, master.shutdown)
    await master.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stockade.proxy.daemon", description="stockade's network filter daemon")
    parser.add_argument("--runtime-dir", required=True, help="0700 directory for the control socket and port file")
    parser.add_argument("--state-dir", required=True, help="directory for the daemon's private mitmproxy files")
    parser.add_argument("--idle-timeout", type=int, default=DEFAULT_IDLE, help="seconds without sessions or connections before exiting")
    parser.add_argument("--test-resolver", default="", help="tests only: JSON file answering every name lookup")
    parser.add_argument("--ready-fd", type=int, default=None, help="write the port and a newline here once ready")
    parser.add_argument("--control-fd", type=int, default=None, help="a connected socket to serve as a control connection once ready")
    parser.add_argument("--lock-fd", type=int, default=None, help="the start lock, held until the control socket serves")
    parser.add_argument("--debug", action="store_true", help="log every decision step")
    parser.add_argument(
        "--no-splice", action="store_true", help="keep checked TLS tunnels and plain-HTTP bodies on mitmproxy's path (for comparison)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("mitmproxy").setLevel(logging.WARNING)
    os.umask(0o077)
    files = DaemonFiles(runtime=os.path.abspath(args.runtime_dir), state=os.path.abspath(args.state_dir))
    os.chdir("/")  # hold no directory of the run that started us
    raise_descriptor_limit()
    # The run that starts a daemon makes both folders first (launch._private_dir) and does not wait for
    # it: one that finds them gone was started for a HOME removed since, and must not make it again.
    if not os.path.isdir(files.runtime) or not os.path.isdir(files.state):
        print(f"stockade proxy daemon: {files.runtime} or {files.state} is gone (its HOME was removed?): not starting", file=sys.stderr)
        return 1
    if os.stat(files.runtime).st_uid != os.getuid():
        parser.error(f"{files.runtime} belongs to another user")
    os.chmod(files.runtime, 0o700)  # the control socket's only fence besides SO_PEERCRED
    if args.lock_fd is not None:
        # Holding the start lock, every other run of this user waits for us: a start that hangs
        # (a stalled disk) must end, and the lock with it. The kernel kills us, however stuck.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(START_TIMEOUT))
    asyncio.run(
        serve(
            files,
            idle_timeout=args.idle_timeout,
            test_resolver=args.test_resolver,
            ready_fd=args.ready_fd,
            splice=not args.no_splice,
            control_fd=args.control_fd,
            lock_fd=args.lock_fd,
        )  # fmt: skip
    )
    return 0
