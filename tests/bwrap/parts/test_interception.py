"""Interception in a namespace of its own (bwrap/parts/interception.py): where each TCP connection and DNS query ends up.

Each test forks a child that makes a user and network namespace as a run's child
does, sets interception up there and reports through a pipe: nothing here
touches the host's own network.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Callable

import pytest

from stockade.bwrap.parts import interception, netns


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
        listener, _datagrams, _stream, *_others = made()
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
        listener, _datagrams, _stream, *_others = made()
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
        _listener, datagrams, _stream, *_others = made()
        datagrams.settimeout(5)
        client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        client.settimeout(5)
        client.sendto(b"query", ("10.9.9.9", 53))
        data, sender = datagrams.recvfrom(100)
        datagrams.sendto(b"answer", sender)
        answer, server = client.recvfrom(100)
        return [data.decode(), answer.decode(), list(server)]

    assert in_namespace(probe) == ["query", "answer", ["10.9.9.9", 53]]


def test_a_table_the_kernel_refuses_says_why_and_nothing_else_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: object) -> None:
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(interception.nftables.Batch, "send", refused)
    assert interception.redirect() == "Operation not supported (is nf_tables in this kernel?)"


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


def test_prepare_sets_everything_up_and_hands_over_ipv4s_sockets_the_log_and_ipv6s() -> None:
    def probe() -> object:
        return [each.type for each in interception.prepare()]

    family = [socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_STREAM]
    assert in_namespace(probe) == [*family, socket.SOCK_RAW, *family]


def test_udp_anywhere_but_the_loopback_is_refused_at_once_and_copied_to_the_log() -> None:
    """A QUIC client's first datagram fails with EPERM (so it falls back to TCP at once) and its
    destination reaches the daemon's log; the sandbox's own UDP over the loopback, and DNS, still work."""
    from stockade.proxy.daemon.packet_log import refused_packets

    def probe() -> object:
        assert interception.redirect() is None
        interception.route_every_address_here()
        interception.route_every_address_here(socket.AF_INET6)
        _listener, _datagrams, _stream, log, *_others = made()
        log.settimeout(5)
        outcomes = []
        for address, family in (("198.18.0.9", socket.AF_INET), ("2001:db8::7", socket.AF_INET6)):
            client = socket.socket(family, socket.SOCK_DGRAM)
            try:
                client.sendto(b"quic initial", (address, 443))
                outcomes.append("sent")
            except PermissionError:
                outcomes.append("EPERM")
        copied = refused_packets(log.recv(65536)) + refused_packets(log.recv(65536))
        own = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        own.bind(("127.0.0.1", 0))
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"own", own.getsockname())
        own.settimeout(5)
        return [outcomes, [list(each) for each in copied], own.recv(10).decode()]

    assert in_namespace(probe) == [["EPERM", "EPERM"], [["udp", "198.18.0.9", 443], ["udp", "2001:db8::7", 443]], "own"]


def test_a_ping_is_refused_at_once_and_copied_to_the_log_and_the_loopback_answers() -> None:
    from stockade.proxy.daemon.packet_log import refused_packets

    def probe() -> object:
        assert interception.redirect() is None
        interception.route_every_address_here()
        _listener, _datagrams, _stream, log, *_others = made()
        interception._let_ping_send()
        log.settimeout(5)
        echo = bytes([8, 0, 0, 0, 0, 1, 0, 1]) + b"ping"  # the kernel fills the checksum and the id of a ping socket
        pinger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
        pinger.settimeout(5)
        pinger.sendto(echo, ("127.0.0.1", 0))
        reply = pinger.recv(100)[0]  # type 0: an echo reply from the sandbox's own loopback
        try:
            pinger.sendto(echo, ("198.18.0.9", 0))
            outcome = "sent"
        except PermissionError:
            outcome = "EPERM"
        return [reply, outcome, [list(each) for each in refused_packets(log.recv(65536))]]

    assert in_namespace(probe) == [0, "EPERM", [["icmp", "198.18.0.9", 0]]]


def test_an_ipv6_connection_to_any_address_reaches_ipv6s_transparent_listener() -> None:
    def probe() -> object:
        assert interception.redirect() is None
        interception.route_every_address_here(socket.AF_INET6)
        sockets = made()
        listener = sockets[4]
        listener.settimeout(5)
        client = socket.create_connection(("2001:db8::5", 443), timeout=5)
        conn, _ = listener.accept()
        raw = conn.getsockopt(socket.IPPROTO_IPV6, 80, 28)
        found = [socket.inet_ntop(socket.AF_INET6, raw[8:24]), struct.unpack("!H", raw[2:4])[0]]
        client.close()
        conn.close()
        own = socket.create_server(("::1", 0), family=socket.AF_INET6)
        direct = socket.create_connection(own.getsockname()[:2], timeout=5)
        own.accept()[0].close()
        direct.close()
        return found

    assert in_namespace(probe) == ["2001:db8::5", 443]
