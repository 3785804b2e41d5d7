"""The namespace's listener handed over SCM_RIGHTS: received whole, refused when the message is wrong."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from stockade.bwrap import netns


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
    with netns.receive_listener(receiver) as received:
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
    with pytest.raises(OSError, match="did not hand over its listener"):
        netns.receive_listener(receiver)


def test_a_closed_channel_is_an_oserror(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    sender.shutdown(socket.SHUT_WR)
    with pytest.raises(OSError):
        netns.receive_listener(receiver)


def test_the_wrong_byte_is_refused_even_with_a_descriptor(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    with listening() as original:
        send(sender, b"X", [original.fileno()])
    with pytest.raises(OSError):
        netns.receive_listener(receiver)


def test_enter_private_network_sends_a_listener_the_parent_receives(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    sender, receiver = pair
    written: list[tuple[str, str]] = []
    unshared: list[int] = []

    class FakeLibc:
        def unshare(self, flags: int) -> int:
            unshared.append(flags)
            return 0

    monkeypatch.setattr(netns, "_libc", FakeLibc())
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
    with netns.receive_listener(receiver) as received:
        assert received.getsockname()[0] == "127.0.0.1"
        assert received.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1


def test_a_failed_unshare_raises_before_anything_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[Any] = []

    class RefusingLibc:
        def unshare(self, flags: int) -> int:
            return -1

    monkeypatch.setattr(netns, "_libc", RefusingLibc())
    monkeypatch.setattr(netns.ctypes, "get_errno", lambda: 1)
    monkeypatch.setattr(netns, "_write", lambda path, text: written.append(path))
    with pytest.raises(OSError, match=r"unshare\(user, net\)"):
        netns.enter_private_network(-1, 0, 0)
    assert written == []
