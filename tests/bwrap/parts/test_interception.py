"""Interception in a namespace of its own (bwrap/parts/interception.py): where each TCP connection and DNS query ends up.

Each test forks a child that makes a user and network namespace as a run's child
does, sets interception up there and reports through a pipe: nothing here
touches the host's own network.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import socket
import struct
from collections.abc import Callable

import pytest

from stockade.bwrap.parts import interception, netns

pytestmark = pytest.mark.skipif(ctypes.util.find_library("nftables") is None, reason="libnftables is not installed (Debian: nftables)")


def made() -> list[socket.socket]:
    """Interception's sockets as the socket module's (the child makes them with `_socket`, which has no accept())."""
    return [socket.socket(fileno=each.detach()) for each in interception.sockets()]


def in_namespace(probe: Callable[[], object]) -> object:
    """`probe()`'s result (JSON), run in a child inside a fresh user and network namespace."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.close(read)
            netns.enter_user_namespace(netns.CLONE_NEWNET, os.getuid(), os.getgid())
            netns._loopback_up()
            os.write(write, json.dumps({"ok": probe()}).encode())
        except BaseException as error:  # noqa: BLE001 - reported, whatever it is
            os.write(write, json.dumps({"error": repr(error)}).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as said:
        answer = json.loads(said.read() or '{"error": "nothing said"}')
    os.waitpid(pid, 0)
    assert "error" not in answer, answer
    return answer["ok"]


def test_a_connection_to_any_address_reaches_the_transparent_listener_with_where_it_was_going() -> None:
    def probe() -> object:
        assert interception.redirect() is None
        interception.route_every_address_here()
        listener, _datagrams, _stream = made()
        listener.settimeout(5)
        found = []
        for address in ("198.18.0.9", "203.0.113.5"):
            client = socket.create_connection((address, 443), timeout=5)
            conn, _ = listener.accept()
            raw = conn.getsockopt(socket.SOL_IP, 80, 16)
            found.append([socket.inet_ntoa(raw[4:8]), struct.unpack("!H", raw[2:4])[0]])
            client.close()
            conn.close()
        return found

    assert in_namespace(probe) == [["198.18.0.9", 443], ["203.0.113.5", 443]]


def test_the_loopback_stays_the_sandboxs_own() -> None:
    """A server the command starts inside is reached directly; the proxy's own port is not redirected."""

    def probe() -> object:
        assert interception.redirect() is None
        interception.route_every_address_here()
        listener, _datagrams, _stream = made()
        own = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(own.getsockname(), timeout=5)
        conn, _ = own.accept()
        listener.setblocking(False)
        try:
            listener.accept()
            redirected = True
        except BlockingIOError:
            redirected = False
        client.close()
        conn.close()
        return redirected

    assert in_namespace(probe) is False


def test_a_dns_query_to_any_server_reaches_the_resolver_and_its_answer_comes_back_from_that_server() -> None:
    def probe() -> object:
        assert interception.redirect() is None
        interception.route_every_address_here()
        _listener, datagrams, _stream = made()
        datagrams.settimeout(5)
        client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        client.settimeout(5)
        client.sendto(b"query", ("10.9.9.9", 53))
        data, sender = datagrams.recvfrom(100)
        datagrams.sendto(b"answer", sender)
        answer, server = client.recvfrom(100)
        return [data.decode(), answer.decode(), list(server)]

    assert in_namespace(probe) == ["query", "answer", ["10.9.9.9", 53]]


def test_without_the_library_interception_says_why_and_nothing_else_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interception, "LIBRARY", "libstockade-no-nftables.so.1")
    assert "install nftables" in (interception.redirect() or "")


def test_the_doctors_probe_says_interception_works_here() -> None:
    assert interception.probe() is None


def test_a_port_taken_inside_leaves_the_namespace_as_it_was() -> None:
    """Hostile review: with 127.0.0.1:3129 taken first, the rule used to be loaded anyway and sent every
    connection to whatever held the port; now nothing is set up and a direct connection finds no route."""

    def probe() -> object:
        taken = socket.create_server(("127.0.0.1", interception.TRANSPARENT_PORT))
        made = interception.prepare()
        try:
            socket.create_connection(("198.18.0.9", 443), timeout=2)
            outcome = "connected"
        except OSError as error:
            outcome = type(error).__name__
        taken.close()
        return [len(made), outcome]

    assert in_namespace(probe) == [0, "OSError"]  # ENETUNREACH: no route, no rule


def test_prepare_sets_everything_up_and_hands_over_three_sockets() -> None:
    def probe() -> object:
        return [each.type for each in interception.prepare()]

    assert in_namespace(probe) == [socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_STREAM]
