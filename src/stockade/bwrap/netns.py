"""The sandbox's network namespace, made by stockade so the proxy's door can be kept outside.

Between fork and exec of bwrap, the child makes a user and network namespace,
brings up its loopback, listens on 127.0.0.1:PROXY_PORT there and hands that
listening socket to the supervisor over a socketpair (SCM_RIGHTS). bwrap then
runs without --unshare-net and so inherits this namespace: the only way out
is that socket, which the supervisor hands on to the proxy daemon (proxy/door.py).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

PROXY_PORT = 3128  # inside the sandbox's own namespace: nothing else can hold it
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFF_RUNNING = 0x40

_libc = ctypes.CDLL(None, use_errno=True)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP | IFF_RUNNING))


def enter_private_network(channel_fd: int, uid: int, gid: int) -> None:
    """Runs in the child before exec: new namespaces, loopback up, listener sent to the parent.

    Any failure raises; subprocess reports it to the parent as the spawn error.
    """
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(user, net): {os.strerror(err)}")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _loopback_up()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PROXY_PORT))
    listener.listen(512)
    channel = socket.socket(fileno=channel_fd)
    channel.sendmsg([b"L"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", listener.fileno()))])
    channel.detach()
    listener.close()


def receive_listener(channel: socket.socket) -> socket.socket:
    """The parent's side: the listening socket that lives in the sandbox's namespace."""
    fds: list[int] = []
    message, ancillary, _flags, _addr = channel.recvmsg(1, socket.CMSG_SPACE(struct.calcsize("i")))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4])
    if message != b"L" or len(fds) != 1:
        raise OSError("the sandbox's network namespace did not hand over its listener")
    return socket.socket(fileno=fds[0])
