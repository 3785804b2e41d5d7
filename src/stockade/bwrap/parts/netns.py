"""The sandbox's network namespace, made by stockade so the proxy's door can be kept outside.

Between fork and exec of bwrap, the child makes a user and network namespace,
brings up its loopback, listens on 127.0.0.1:PROXY_PORT there and hands that
listening socket to the supervisor over a socketpair (SCM_RIGHTS). bwrap then
runs without --unshare-net and so inherits this namespace: the only way out
is that socket, which the supervisor hands on to the proxy daemon (proxy/daemon/door.py).

On every networked run's path: `_socket` rather than `socket` (whose enums
cost milliseconds to import), and ctypes only in the child, where it makes
the one call Python 3.11's os module lacks (os.unshare is 3.12's).
"""

from __future__ import annotations

import _socket
import fcntl
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

PROXY_PORT = 3128  # inside the sandbox's own namespace: nothing else can hold it
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFF_RUNNING = 0x40


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _loopback_up() -> None:
    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(probe.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP | IFF_RUNNING))
    finally:
        probe.close()


def unshare(flags: int) -> None:
    """unshare(2): os.unshare on Python 3.12 and later, else libc's through `_ctypes`.

    `_ctypes` is the C core that ctypes wraps; binding one function with it is what
    `ctypes.CDLL(None).unshare` does, without the 2 ms ctypes takes to import, which
    this child would spend before bwrap can start. Anything unexpected there falls
    back to ctypes itself.
    """
    own = getattr(os, "unshare", None)
    if own is not None:
        own(flags)
        return
    libc_call("unshare", "i", flags)


def _libc_function(name: str, arguments: str = "") -> tuple[Callable[..., int], Callable[[], int]]:
    """(libc's `name` returning a C int, errno after it): ctypes' own recipe, on `_ctypes`.
    `arguments` spells the C types of its arguments as ctypes' codes ("z" char *, "L" unsigned
    long, "P" void *); without them each Python int goes as a C int, bytes as a char *."""
    import _ctypes

    return library_function(None, name, arguments), _ctypes.get_errno


def library_function(library: str | None, name: str, arguments: str = "", returns: str = "i") -> Callable[..., Any]:
    """`name` of a shared library (None: the running program and the libc it links), typed by
    ctypes' codes: `arguments` one per argument, `returns` the result ("" for void). Raises
    OSError when the library or the name is missing."""
    import _ctypes

    class Function(_ctypes.CFuncPtr):  # what CDLL(..., use_errno=True) makes for each name
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = type(f"C{returns}", (_ctypes._SimpleCData,), {"_type_": returns}) if returns else None

    class Library:  # what CDLL keeps: the dlopen handle
        _handle = _ctypes.dlopen(library)  # type: ignore[arg-type]  # None is dlopen(NULL), as CDLL(None) passes it

    try:
        function = Function((name, Library()))  # type: ignore[arg-type]  # any object with _handle, as CDLL
    except AttributeError as missing:
        raise OSError(f"{library or 'libc'} has no {name}") from missing
    if arguments:
        function.argtypes = tuple(type(f"C{code}", (_ctypes._SimpleCData,), {"_type_": code}) for code in arguments)
    return function


def libc_call(name: str, arguments: str, *values: object) -> None:
    """Call libc's `name` (see _libc_function); a non-zero return raises OSError with errno's words."""
    try:
        call, errno_of = _libc_function(name, arguments)
    except (ImportError, AttributeError, OSError, TypeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        call, errno_of = getattr(libc, name), ctypes.get_errno
        codes = {"z": ctypes.c_char_p, "L": ctypes.c_ulong, "i": ctypes.c_int}
        call.argtypes = [codes[code] for code in arguments]
    if call(*values) != 0:
        err = errno_of()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def enter_user_namespace(flags: int, uid: int, gid: int) -> None:
    """unshare(CLONE_NEWUSER | flags), mapping the user to itself (root to root): the new
    namespaces are the child's own, and exec drops the powers it had in them."""
    unshare(CLONE_NEWUSER | flags)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")


CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 1 << 18


def enter_private_mounts(uid: int, gid: int, *, in_own_user_namespace: bool) -> None:
    """In the child, before exec: a mount namespace of its own whose mounts receive nothing from
    the host's (ESCAPES 96). bwrap makes its sandbox's mounts slaves of the namespace it starts
    in, so a mount the host added while the sandbox ran (an automounted binfmt_misc, a USB stick,
    an admin's debugfs) appeared inside, writable: its read-only binds cover only what existed
    when they were made. Made private here, the namespace bwrap starts in has nothing to pass on."""
    if in_own_user_namespace:
        unshare(CLONE_NEWNS)
    else:
        enter_user_namespace(CLONE_NEWNS, uid, gid)
    libc_call("mount", "zzzLz", b"none", b"/", None, MS_REC | MS_PRIVATE, None)


def enter_private_network(
    channel_fd: int, uid: int, gid: int, forwards: Sequence[tuple[str, int]] = (), intercept: Callable[[], list[_socket.socket]] | None = None
) -> None:
    """Runs in the child before exec: new namespaces, loopback up, listeners sent to the parent:
    the proxy's, then one at each (address, port) of `forwards` (bwrap/parts/forwards.py), then what
    `intercept` made (bwrap/parts/interception.py `prepare`): the message says whether it made any
    ("T" with them, "L" without).

    Any failure but interception's raises; the supervisor reports it to the parent as the spawn error.
    """
    enter_user_namespace(CLONE_NEWNET, uid, gid)
    _loopback_up()
    listeners = [listen("127.0.0.1", PROXY_PORT, 512), *(listen(address, port, 128) for address, port in forwards)]
    extra = intercept() if intercept is not None else []
    diag = _socket_diag()
    channel = _socket.socket(fileno=channel_fd)
    sent = [*listeners, *extra, *([diag] if diag is not None else [])]
    fds = struct.pack(f"{len(sent)}i", *(each.fileno() for each in sent))
    message = (b"T" if extra else b"L") + (b"D" if diag is not None else b"")
    channel.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    channel.detach()
    for each in sent:
        each.close()


def _socket_diag() -> _socket.socket | None:
    """A netlink socket of the namespace's socket table (NETLINK_SOCK_DIAG): the daemon asks it which
    socket a connection came from (proxy/daemon/attribution.py), one exact lookup, where reading
    /proc/net/tcp walks every bucket of the table. None where the kernel has none to give."""
    try:
        return _socket.socket(_socket.AF_NETLINK, _socket.SOCK_DGRAM | _socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
    except OSError:
        return None


NETLINK_SOCK_DIAG = 4


def listen(address: str, port: int, backlog: int) -> _socket.socket:
    listener = _socket.socket(_socket.AF_INET6 if ":" in address else _socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    if ":" in address:
        listener.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
    listener.bind((address, port))
    listener.listen(backlog)
    return listener


def receive_listeners(channel: _socket.socket, count: int, extras: tuple[int, ...] = ()) -> tuple[list[_socket.socket], int, _socket.socket | None]:
    """The parent's side: the `count` listening sockets that live in the sandbox's namespace, and,
    when the child says it intercepts, as many more as one of `extras` (how many: the second value);
    then the namespace's socket-table netlink socket, where the child made one (`_socket_diag`)."""
    fds: list[int] = []
    message, ancillary, _flags, _addr = channel.recvmsg(2, _socket.CMSG_SPACE((count + max(extras, default=0) + 1) * struct.calcsize("i")))
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4])
    diag = message[1:] == b"D"
    extra = len(fds) - count - diag
    if message[1:] not in (b"", b"D") or not ((message[:1] == b"L" and extra == 0) or (message[:1] == b"T" and extra in extras)):
        for fd in fds:
            os.close(fd)
        raise OSError("the sandbox's network namespace did not hand over its listeners")
    sockets = [_socket.socket(fileno=fd) for fd in fds]
    return (sockets[:-1], extra, sockets[-1]) if diag else (sockets, extra, None)


def in_child(attempt: Callable[[], str | None]) -> str | None:
    """What `attempt` returns (or raises) in a forked child: a probe of what a run's child does
    (`stockade doctor`), whose namespaces and mounts go with the child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.close(read)
            os.write(write, (attempt() or "").encode())
        except BaseException as error:  # noqa: BLE001 - anything at all is the answer
            os.write(write, (str(error) or type(error).__name__).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as said:
        answer = said.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return answer or None
