"""Accepting connections when descriptors run out, and as many descriptors as the system allows.

A sandbox can open connections until the daemon that every sandbox of the user
shares runs out of descriptors (EMFILE). An accept loop that ended on that
error left other sessions without a network for the rest of their runs; it
now waits a moment and accepts again, once descriptors are free.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket

logger = logging.getLogger(__name__)

# Errors that pass: out of descriptors or memory, or a peer that left before we accepted
PASSING = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPROTO})
PAUSE = 0.05  # seconds before accepting again after running out


async def accept(listener: socket.socket, what: str) -> socket.socket | None:
    """The next connection, or None once the listener is closed; shortages are waited out."""
    loop = asyncio.get_running_loop()
    warned = False
    while True:
        try:
            conn, _ = await loop.sock_accept(listener)
            return conn
        except OSError as exc:
            if exc.errno not in PASSING:
                logger.info("%s: no longer accepting: %s", what, exc)
                return None
            if not warned:
                logger.warning("%s: cannot accept now (%s); trying again", what, exc.strerror)
                warned = True
            await asyncio.sleep(PAUSE)


def raise_descriptor_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard one (the common soft 1024 is 127 spliced tunnels); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            return hard
        except (ValueError, OSError):
            return soft
    return soft
