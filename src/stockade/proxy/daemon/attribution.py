"""Which process inside a sandbox opened a connection, read from /proc while it waits for its answer.

A connection reaches the daemon through its session's door, a listener in the
sandbox's network namespace. The client's end is a socket of a process in
that sandbox: its address is the connection's peer, the namespace's own TCP
table (`/proc/PID/net/tcp`, read through the sandbox's first process) maps
that address to the socket's inode, and the one process of the sandbox's tree
holding `socket:[INODE]` among its descriptors is the one that connected. The
client is waiting for the proxy's answer, so it is still there to be read.

What a record gets: the process's pid as the sandbox sees it, its executable,
its arguments (at most ARGS words and ARG_CHARS characters, credentials that
look like one redacted), and its parents up to the sandbox's first process.
Only the user's own processes are read (the daemon is theirs), and nothing
here can fail a connection: where /proc does not tell, there is no `process`.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

from stockade.proxy.processes import PARENTS, describe, parent_entry

TREE_LIMIT = 4096  # processes of one sandbox looked at, at most


TREE_FRESH = 1.0  # seconds a sandbox's process tree is used again before it is read anew (a miss reads it anew at once)
BUDGET = 2048  # /proc entries one lookup may read: a sandbox of many processes and descriptors gets no process, not the daemon's time


class _Spent(Exception):
    """The lookup read its BUDGET of /proc entries."""


class Attributor:
    """One sandbox's lookups: its socket table asked through `diag` (the namespace's NETLINK_SOCK_DIAG
    socket, bwrap/parts/netns.py), else read from /proc; its process tree kept a moment, since
    connections come in bursts."""

    def __init__(self, root: int, diag: socket.socket | None = None) -> None:
        import threading

        self.root = root
        self.diag = diag
        self._lock = threading.Lock()  # lookups run on the daemon's worker threads (door.py): one at a time per sandbox
        self._tree: dict[int, int] = {}
        self._read_at = 0.0
        self._sequence = 0
        self._last = 0  # the process the last lookup found, and the descriptor its socket had
        self._last_fd = -1
        if diag is not None:
            diag.settimeout(0.2)

    def close(self) -> None:
        with self._lock:
            if self.diag is not None:
                self.diag.close()
                self.diag = None

    def who(self, peer: tuple[Any, ...], local: tuple[Any, ...] | None = None) -> dict[str, Any] | None:
        """The process of the sandbox holding the client socket at `peer` (address, port) connected to
        `local` (the address it asked for: the door's, or a redirected connection's first destination),
        described; None where the kernel does not say, or where saying it would read more than BUDGET
        entries of /proc (a sandbox of thousands of processes or descriptors)."""
        if not self._lock.acquire(blocking=False):
            return None  # this sandbox's last lookup still runs: no queue of them for the daemon's threads to wait out
        try:
            return self._who(peer, local)
        finally:
            self._lock.release()

    def _who(self, peer: tuple[Any, ...], local: tuple[Any, ...] | None) -> dict[str, Any] | None:
        budget = [BUDGET]
        try:
            inode = self._exact(peer, local) if self.diag is not None and local is not None else None
            if inode is None:
                inode = _inode(self.root, str(peer[0]), int(peer[1]))
            if inode is None:
                return None
            target = f"socket:[{inode}]".encode("ascii")
            fresh = time.monotonic() - self._read_at < TREE_FRESH
            for attempt in (0, 1):
                if attempt or not fresh:
                    self._tree, self._read_at = _tree(self.root, budget), time.monotonic()
                # the process that opened the last connection first (a client opens many), then the newest
                order = sorted(self._tree, key=lambda pid: (pid == self._last, pid), reverse=True)
                for pid in order:
                    fd = _holds(pid, target, self._last_fd if pid == self._last else -1, budget)
                    if fd >= 0:
                        self._last, self._last_fd = pid, fd
                        return _describe(pid, self._tree, self.root)
                if not fresh:
                    break  # the tree was just read: a second look finds nothing more
        except (OSError, ValueError, _Spent):
            return None
        return None

    def _exact(self, peer: tuple[Any, ...], local: tuple[Any, ...]) -> int | None:
        """The inode of the socket (peer -> local) by one exact sock_diag lookup (SOCK_DIAG_BY_FAMILY without
        NLM_F_DUMP: the kernel finds it in its hash table); None where it says nothing."""
        assert self.diag is not None
        family = socket.AF_INET6 if ":" in str(peer[0]) else socket.AF_INET

        def address(text: str) -> bytes:
            return socket.inet_pton(family, text.split("%")[0]).ljust(16, b"\0")  # the kernel's four 32-bit words

        ports = struct.pack("!HH", int(peer[1]), int(local[1]))
        sockid = ports + address(str(peer[0])) + address(str(local[0])) + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE)
        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, ALL_STATES) + sockid
        self._sequence = (self._sequence + 1) & 0xFFFFFFFF
        self.diag.send(struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, self._sequence, 0) + request)
        for _attempt in range(4):
            data = self.diag.recv(8192)
            if len(data) < 16:
                return None
            _length, kind, _flags, sequence, _port = struct.unpack_from("=IHHII", data)
            if sequence != self._sequence:
                continue  # an answer to a lookup that timed out
            if kind == NLMSG_ERROR or len(data) < 16 + INODE_AT + 4:
                return None
            return int(struct.unpack_from("=I", data, 16 + INODE_AT)[0])
        return None


def _spend(budget: list[int], cost: int = 1) -> None:
    budget[0] -= cost
    if budget[0] < 0:
        raise _Spent


SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NO_COOKIE = 0xFFFFFFFF  # INET_DIAG_NOCOOKIE: any socket with these addresses
ALL_STATES = 0xFFFFFFFF
INODE_AT = 4 + 48 + 16  # in struct inet_diag_msg: family..retrans, the socket id, expires/rqueue/wqueue/uid, then the inode


def _inode(root: int, address: str, port: int) -> int | None:
    """The inode of the socket whose local end is address:port in the namespace of `root` (or its first child)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    wanted = b": " + _hex_endpoint(family, address, port) + b" "  # the local address column: after the slot number
    for pid in (root, *_children(root)[:1]):
        for table in ("tcp6", "tcp") if family == socket.AF_INET6 else ("tcp", "tcp6"):
            try:
                with open(f"/proc/{pid}/net/{table}", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            at = data.find(wanted)
            if at < 0:
                continue
            line = data[at : data.find(b"\n", at)]
            try:
                return int(line.split()[9])
            except (IndexError, ValueError):
                return None
    return None


def _hex_endpoint(family: int, address: str, port: int) -> bytes:
    """An address and port as /proc/net/tcp writes them (the address in host byte order, 32 bits at a time)."""
    raw = socket.inet_pton(family, address.split("%")[0])
    words = [raw[index : index + 4][::-1] for index in range(0, len(raw), 4)]
    return (b"".join(words).hex().upper() + f":{port:04X}").encode("ascii")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found += [int(word) for word in handle.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _tree(root: int, budget: list[int] | None = None) -> dict[int, int]:
    """pid -> parent pid for `root` and everything below it."""
    tree = {root: 0}
    queue = [root]
    while queue and len(tree) < TREE_LIMIT:
        parent = queue.pop()
        if budget is not None:
            _spend(budget)
        for child in _children(parent):
            if child not in tree:
                tree[child] = parent
                queue.append(child)
    return tree


def _holds(pid: int, target: bytes, near: int = -1, budget: list[int] | None = None) -> int:
    """The descriptor of `pid` that is `target` (socket:[INODE]), or -1. `near`: the one its last socket had;
    a client opening connections one after another gets the next free numbers, looked at first."""
    folder = f"/proc/{pid}/fd/".encode("ascii")
    if near >= 0:
        for fd in (near + 1, near + 2, near, near - 1, near + 3):
            try:
                if fd >= 0 and os.readlink(folder + str(fd).encode("ascii")) == target:
                    return fd
            except OSError:
                continue
    try:
        names = os.listdir(folder)
    except OSError:
        return -1
    for name in sorted(names, key=lambda n: (len(n), n), reverse=True):  # a new socket: a high number, most likely
        if budget is not None:
            _spend(budget)
        try:
            if os.readlink(folder + name) == target:
                return int(name)
        except (OSError, ValueError):
            continue
    return -1


def _describe(pid: int, tree: dict[int, int], root: int) -> dict[str, Any]:
    parents: list[dict[str, Any]] = []
    parent = tree.get(pid, 0)
    while parent and parent != root and len(parents) < PARENTS:
        parents.append(parent_entry(parent))
        parent = tree.get(parent, 0)
    return describe(pid, parents)
