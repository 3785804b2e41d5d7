"""The namespace's listener handed over SCM_RIGHTS: received whole, refused when the message is wrong."""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from stockade.bwrap.parts import netns


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        yield left, right


def listening() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    return listener


def send(channel: socket.socket, message: bytes, fds: list[int]) -> None:
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
    channel.sendmsg([message], ancillary)


def test_the_listener_arrives_and_still_accepts(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    with listening() as original:
        port = original.getsockname()[1]
        send(sender, b"L", [original.fileno()])
    with socket.socket(fileno=netns.receive_listeners(receiver, 1)[0][0].detach()) as received:
        assert received.getsockname() == ("127.0.0.1", port)
        received.settimeout(5)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            conn, _ = received.accept()
            with conn:
                client.sendall(b"hi")
                assert conn.recv(2) == b"hi"


def test_a_message_without_a_descriptor_is_an_oserror(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    send(sender, b"L", [])
    with pytest.raises(OSError, match="did not hand over its listeners"):
        netns.receive_listeners(receiver, 1)[0]


def test_a_closed_channel_is_an_oserror(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    sender.shutdown(socket.SHUT_WR)
    with pytest.raises(OSError):
        netns.receive_listeners(receiver, 1)[0]


def test_the_wrong_byte_is_refused_even_with_a_descriptor(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    with listening() as original:
        send(sender, b"X", [original.fileno()])
    with pytest.raises(OSError):
        netns.receive_listeners(receiver, 1)[0]


def test_enter_private_network_sends_a_listener_the_parent_receives(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    sender, receiver = pair
    written: list[tuple[str, str]] = []
    unshared: list[int] = []

    def unshare(flags: int) -> int:
        unshared.append(flags)
        return 0

    monkeypatch.delattr(netns.os, "unshare", raising=False)
    monkeypatch.setattr(netns, "_libc_function", lambda name, arguments="": (unshare, lambda: 0))
    monkeypatch.setattr(netns, "_write", lambda path, text: written.append((path, text)))
    monkeypatch.setattr(netns, "_loopback_up", lambda: None)
    monkeypatch.setattr(netns, "PROXY_PORT", 0)
    netns.enter_private_network(sender.fileno(), 1000, 1001)
    assert sender.fileno() != -1  # detached from, not closed
    assert unshared == [netns.CLONE_NEWUSER | netns.CLONE_NEWNET]
    assert written == [
        ("/proc/self/setgroups", "deny"),
        ("/proc/self/uid_map", "1000 1000 1\n"),
        ("/proc/self/gid_map", "1001 1001 1\n"),
    ]
    with closing(netns.receive_listeners(receiver, 1)[0][0]) as received:
        assert received.getsockname()[0] == "127.0.0.1"
        assert received.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1


def test_a_failed_unshare_raises_before_anything_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[Any] = []

    monkeypatch.delattr(netns.os, "unshare", raising=False)
    monkeypatch.setattr(netns, "_libc_function", lambda name, arguments="": (lambda flags: -1, lambda: 1))
    monkeypatch.setattr(netns, "_write", lambda path, text: written.append(path))
    with pytest.raises(OSError, match=r"unshare: Operation not permitted"):
        netns.enter_private_network(-1, 0, 0)
    assert written == []


def test_the_lean_libc_binding_calls_the_real_function_and_reads_errno() -> None:
    call, errno_of = netns._libc_function("getpid")
    assert call() == os.getpid()  # type: ignore[call-arg]
    close, errno_of = netns._libc_function("close")
    assert close(-1) == -1 and errno_of() == errno.EBADF


def test_without_the_lean_binding_ctypes_makes_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str, arguments: str = "") -> None:
        raise ImportError("no _ctypes here")

    monkeypatch.delattr(netns.os, "unshare", raising=False)
    monkeypatch.setattr(netns, "_libc_function", missing)
    with pytest.raises(OSError, match=r"unshare: Invalid argument"):
        netns.unshare(-1)  # every flag set: EINVAL from the real libc, through ctypes


def test_forwarded_ports_come_after_the_proxys_listener(pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch) -> None:
    sender, receiver = pair
    monkeypatch.setattr(netns, "unshare", lambda flags: None)
    monkeypatch.setattr(netns, "_write", lambda path, text: None)
    monkeypatch.setattr(netns, "_loopback_up", lambda: None)
    monkeypatch.setattr(netns, "PROXY_PORT", 0)
    netns.enter_private_network(sender.fileno(), 1000, 1001, [("127.0.0.1", 0), ("::1", 0)])
    received, intercepted, _diag = netns.receive_listeners(receiver, 3)
    assert not intercepted
    try:
        assert [each.family for each in received] == [socket.AF_INET, socket.AF_INET, socket.AF_INET6]
        assert received[2].getsockname()[0] == "::1"
    finally:
        for each in received:
            each.close()


def test_fewer_listeners_than_asked_for_is_an_oserror(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    with listening() as original:
        send(sender, b"L", [original.fileno()])
    with pytest.raises(OSError, match="did not hand over its listeners"):
        netns.receive_listeners(receiver, 2)


def test_the_lean_binding_passes_typed_arguments() -> None:
    """unsigned long and char * arguments as libc's prototype has them: mount(2)'s flags and paths."""
    call, _errno_of = netns._libc_function("strtoul", "zzi")
    assert call(b"4294967296", None, 10) == 0  # the int return keeps the low 32 bits: 2**32 -> 0
    call, _errno_of = netns._libc_function("strncmp", "zzL")
    assert call(b"abc", b"abd", 2) == 0 and call(b"abc", b"abd", 3) != 0


def test_an_intercepting_child_sends_its_sockets_more_and_says_so(pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch) -> None:
    sender, receiver = pair
    monkeypatch.setattr(netns, "unshare", lambda flags: None)
    monkeypatch.setattr(netns, "_write", lambda path, text: None)
    monkeypatch.setattr(netns, "_loopback_up", lambda: None)
    monkeypatch.setattr(netns, "PROXY_PORT", 0)
    extra = [socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(), socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)]
    netns.enter_private_network(sender.fileno(), 1000, 1001, [], intercept=lambda: extra)
    received, intercepted, _diag = netns.receive_listeners(receiver, 1, extras=(4, 7))
    try:
        assert intercepted == 4 and [each.type for each in received[1:]] == [
            socket.SOCK_STREAM,
            socket.SOCK_DGRAM,
            socket.SOCK_STREAM,
            socket.SOCK_RAW,
        ]
    finally:
        for each in received:
            each.close()


def test_a_child_that_could_not_intercept_sends_its_listeners_alone(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    with listening() as original:
        send(sender, b"L", [original.fileno()])
    received, intercepted, _diag = netns.receive_listeners(receiver, 1, extras=(4, 7))
    assert len(received) == 1 and not intercepted
    received[0].close()


def test_interception_the_parent_did_not_ask_for_is_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    with listening() as original:
        send(sender, b"T", [original.fileno()])
    with pytest.raises(OSError, match="did not hand over its listeners"):
        netns.receive_listeners(receiver, 1)


def test_a_missing_library_is_an_oserror_naming_it() -> None:
    with pytest.raises(OSError, match="libstockade-none"):
        netns.library_function("libstockade-none.so.1", "f")
    with pytest.raises(OSError, match="has no"):
        netns.library_function(None, "stockade_no_such_function")


def test_the_child_hands_over_its_namespace_s_socket_table_last() -> None:
    """A netlink socket of the namespace's socket table comes after the listeners, said by a "D"; a
    message that says one and sends none is refused like any other that does not add up."""
    sender, receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    diag = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, netns.NETLINK_SOCK_DIAG)
    sender.sendmsg([b"LD"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("2i", listener.fileno(), diag.fileno()))])
    received, intercepted, table = netns.receive_listeners(receiver, 1)
    assert len(received) == 1 and intercepted == 0 and table is not None and table.family == socket.AF_NETLINK
    for each in (*received, table, listener, diag):
        each.close()
    sender.sendmsg([b"LD"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("1i", receiver.fileno()))])
    with pytest.raises(OSError, match="did not hand over"):
        netns.receive_listeners(receiver, 1)
