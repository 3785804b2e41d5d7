"""Move an allowed TLS tunnel's bytes with splice(2), outside mitmproxy's event loop.

Why: once a tunnel has been judged (CONNECT host, SNI, resolved address),
nothing in it is looked at again, yet every chunk would still cross
mitmproxy's layers and Python buffers; that halves loopback throughput. Here
both sockets are handed to two threads that move bytes kernel-side, counting
them into the tunnel's audit record, and give the sockets back to mitmproxy
(closed) at the end, so its normal teardown writes the record.

Taking over is opportunistic: it happens only when mitmproxy has nothing
buffered either way (so no byte can be reordered), on Linux, with the
asyncio transports mitmproxy uses; otherwise the tunnel stays on
mitmproxy's path, which is slower but equally correct. Decisions are never
made here: the tunnel was fully checked before.

`pump` is the one loop that moves bytes, here and for plain-HTTP bodies
(proxy/filter/splice_body.py): non-blocking splices with poll(2) between them, so
the sockets' flags, which asyncio shares, are never touched (measured: as
fast as blocking splices).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import select
import socket
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from stockade.proxy.filter.tracking import Tracked

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
PIPE_SIZE = 1 << 20  # the default fs.pipe-max-size; a larger pipe is refused to non-root
WATCH_INTERVAL = 0.5  # seconds between checks that the session may still move bytes
_F_SETPIPE_SZ = 1031
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
AVAILABLE = hasattr(os, "splice")


def pump(source: int, sink: int, count: Callable[[int], None], limit: int | None = None) -> int:
    """Splice bytes from one socket to another until EOF, or until `limit` bytes; returns how many moved.

    `count` hears every chunk once it reached the sink. OSError (a reset,
    a closed sink) propagates with `moved` set on it.
    """
    read_end, write_end = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    moved = 0
    try:
        with contextlib.suppress(OSError):
            fcntl.fcntl(write_end, _F_SETPIPE_SZ, PIPE_SIZE)
        readable, writable = select.poll(), select.poll()
        readable.register(source, select.POLLIN)
        writable.register(sink, select.POLLOUT)
        while limit is None or moved < limit:
            try:
                got = os.splice(source, write_end, CHUNK if limit is None else min(CHUNK, limit - moved), flags=_FLAGS)
            except BlockingIOError:
                readable.poll()
                continue
            if got == 0:
                break
            pending = got
            while pending:
                try:
                    pending -= os.splice(read_end, sink, pending, flags=_FLAGS)
                except BlockingIOError:
                    writable.poll()
            moved += got
            count(got)
        return moved
    except OSError as exc:
        exc.moved = moved  # type: ignore[attr-defined]
        raise
    finally:
        os.close(read_end)
        os.close(write_end)


class Splicer:
    def __init__(self, handler: Any, client: Any, server: Any, tracked: Tracked) -> None:
        self.handler = handler  # mitmproxy's ConnectionHandler for this client connection
        self.client = client
        self.server = server
        self.tracked = tracked
        self.error: str | None = None
        self._fds: list[int] = []
        self._threads: list[threading.Thread] = []
        self._running = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._disarmed: AbstractContextManager[None] | None = None
        self._watch: asyncio.TimerHandle | None = None

    def start(self) -> bool:
        """Take both sockets over if nothing is in flight; False leaves the tunnel to mitmproxy."""
        if not AVAILABLE:
            return False
        client_io = self.handler.transports.get(self.client)
        server_io = self.handler.transports.get(self.server)
        if client_io is None or server_io is None:
            return False
        readers = (client_io.reader, server_io.reader)
        writers = (client_io.writer, server_io.writer)
        if not all(isinstance(r, asyncio.StreamReader) for r in readers) or not all(isinstance(w, asyncio.StreamWriter) for w in writers):
            return False
        transports = [w.transport for w in writers]
        if any(t.is_closing() or t.get_write_buffer_size() for t in transports):
            return False
        for transport in transports:
            transport.pause_reading()
        # Bytes asyncio has read but mitmproxy has not processed yet would be
        # overtaken by the threads: give up if there are any.
        if any(len(getattr(r, "_buffer", b"x")) or r.at_eof() for r in readers):
            for transport in transports:
                transport.resume_reading()
            return False
        try:
            self._fds = [os.dup(w.get_extra_info("socket").fileno()) for w in writers]
        except (OSError, AttributeError):
            for fd in self._fds:
                os.close(fd)
            for transport in transports:
                transport.resume_reading()
            return False
        self._loop = asyncio.get_running_loop()
        self._disarmed = self.handler.timeout_watchdog.disarm()  # mitmproxy sees no activity from here on
        self._disarmed.__enter__()
        client_fd, server_fd = self._fds
        self._running = 2
        self._threads = [
            threading.Thread(target=self._pump, args=(client_fd, server_fd, "bytes_up"), name="stockade-splice-up", daemon=True),
            threading.Thread(target=self._pump, args=(server_fd, client_fd, "bytes_down"), name="stockade-splice-down", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        self._watch = self._loop.call_later(WATCH_INTERVAL, self._check)
        return True

    def _pump(self, source: int, sink: int, counter: str) -> None:
        """One direction until EOF or error; then half-close the sink like a TCP relay should."""
        record = self.tracked.record

        def count(moved: int) -> None:
            setattr(record, counter, getattr(record, counter) + moved)

        try:
            pump(source, sink, count)
        except OSError as exc:
            self.error = self.error or str(exc)
            shutdown(source, socket.SHUT_RD)
        finally:
            shutdown(sink, socket.SHUT_WR)
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last and self._loop is not None:
                self._loop.call_soon_threadsafe(self._finish)

    def _check(self) -> None:
        """Cut the tunnel when its session ends or its audit log breaks (the meter no longer sees it)."""
        if self._running and self.tracked.must_close:
            for fd in self._fds:
                shutdown(fd, socket.SHUT_RDWR)
        elif self._running and self._loop is not None:
            self._watch = self._loop.call_later(WATCH_INTERVAL, self._check)

    def _finish(self) -> None:
        """Both directions are done: close our descriptors and let mitmproxy tear the connection down."""
        if self._watch is not None:
            self._watch.cancel()
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        if self.error and not self.tracked.record.error:
            self.tracked.record.error = self.error
        if self._disarmed is not None:
            self._disarmed.__exit__(None, None, None)
            self._disarmed = None
        for connection in (self.server, self.client):
            io = self.handler.transports.get(connection)
            if io is not None and io.writer is not None:
                io.writer.close()


def shutdown(fd: int, how: int) -> None:
    """shutdown(2) on a descriptor we hold only as a number; errors mean it is gone already."""
    try:
        probe = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        probe.shutdown(how)
    except OSError:
        pass
    finally:
        probe.close()
