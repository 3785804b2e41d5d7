"""Refused packets (proxy/daemon/packet_log.py): read from NFLOG messages, recorded once each, said in the summary.

The kernel's side (the rule that refuses and copies them) is tested in a real
namespace in tests/bwrap/parts/test_interception.py and whole in
tests/e2e/test_interception.py; here the messages are built as the kernel
writes them.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Callable

import pytest

from stockade.proxy.control import SessionSpec
from stockade.proxy.daemon import packet_log
from stockade.proxy.daemon.packet_log import PacketLog, refused_packets
from stockade.proxy.filter.sessions import Registry, Session


def _attribute(kind: int, data: bytes) -> bytes:
    size = 4 + len(data)
    return struct.pack("=HH", size, kind) + data + b"\0" * (-size % 4)


def nflog(*packets: bytes, kind: int = packet_log.NFULNL_MSG_PACKET) -> bytes:
    """One read of an NFLOG socket: a message per packet, each with a prefix attribute before its payload."""
    messages = b""
    for packet in packets:
        body = struct.pack("=BBH", socket.AF_INET, 0, 0) + _attribute(10, b"prefix\0") + _attribute(packet_log.NFULA_PAYLOAD, packet)
        messages += struct.pack("=IHHII", 16 + len(body), kind, 0, 0, 0) + body
    return messages


def ipv4(protocol: int, destination: str, transport: bytes) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(transport), 0, 0, 64, protocol, 0, bytes(4), ipaddress.IPv4Address(destination).packed)
    return header + transport


def ipv6(protocol: int, destination: str, transport: bytes) -> bytes:
    header = struct.pack("!IHBB16s16s", 6 << 28, len(transport), protocol, 64, bytes(16), ipaddress.IPv6Address(destination).packed)
    return header + transport


def udp(port: int) -> bytes:
    return struct.pack("!HHHH", 40000, port, 12, 0) + b"quic"


ECHO = bytes([8, 0, 0, 0, 0, 1, 0, 1])
UDP_PROTOCOL = 17


def test_each_packet_of_a_read_gives_its_protocol_address_and_port() -> None:
    read = nflog(ipv4(17, "198.18.0.3", udp(443)), ipv6(17, "2001:db8::7", udp(4500)), ipv4(1, "192.0.2.1", ECHO), ipv6(58, "2001:db8::1", ECHO))
    assert refused_packets(read) == [("udp", "198.18.0.3", 443), ("udp", "2001:db8::7", 4500), ("icmp", "192.0.2.1", 0), ("icmp", "2001:db8::1", 0)]


@pytest.mark.parametrize(
    "read",
    [
        b"",
        b"\x01\x02\x03",
        nflog(b"\x45\x00"),  # too short for an IP header
        nflog(b"\x55" + bytes(30)),  # neither IPv4 nor IPv6
        nflog(ipv4(17, "192.0.2.1", udp(443)), kind=0),  # not a packet message
        struct.pack("=IHHII", 4, packet_log.NFULNL_MSG_PACKET, 0, 0, 0),  # a length shorter than its own header
        struct.pack("=IHHII", 4096, packet_log.NFULNL_MSG_PACKET, 0, 0, 0),  # a length past the read
    ],
)
def test_what_is_not_a_refused_packet_is_skipped(read: bytes) -> None:
    assert refused_packets(read) == []


@pytest.fixture
def session(make_spec: Callable[..., SessionSpec]) -> Session:
    _token, made = Registry().register(make_spec(intercept=4))
    return made


def test_each_destination_is_recorded_once_by_name_with_its_repeats_and_said_once(
    session: Session, audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    address = session.names.address("allowed.test")
    assert address is not None
    log = PacketLog(session, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    for protocol, host, port in [("udp", address, 443), ("udp", address, 443), ("udp", "192.0.2.9", 53000), ("icmp", "192.0.2.9", 0)]:
        log._refused(protocol, host, port)
    log.close()
    lines = [(r["scheme"], r["host"], r["port"], r.get("repeats")) for r in audit_lines()]
    assert lines == [
        ("udp", "allowed.test", 443, 0),
        ("udp", "192.0.2.9", 53000, 0),
        ("icmp", "192.0.2.9", 0, 0),
        ("udp", "allowed.test", 443, 1),
    ]
    denials = {(d.host, d.port): d.rule for d in session.denials.values()}
    assert denials[("allowed.test", 443)].startswith("UDP does not leave the sandbox") and denials[("192.0.2.9", 0)].startswith("ping ")


def test_an_address_of_the_resolvers_block_it_never_gave_is_shown_as_it_is(
    session: Session, audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    log = PacketLog(session, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    log._refused("udp", "198.18.200.1", 443)
    log.close()
    assert [r["host"] for r in audit_lines()] == ["198.18.200.1"]


def test_past_its_bound_a_session_counts_destinations_instead_of_recording_each(
    session: Session, audit_lines: Callable[[], list[dict[str, object]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packet_log, "MAX_RECORDED", 2)
    log = PacketLog(session, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    for port in range(1, 6):
        log._refused("udp", "192.0.2.9", port)
    log.close()
    lines = audit_lines()
    assert [r["port"] for r in lines[:2]] == [1, 2] and len(lines) == 3
    assert "3 more refused packets past the first 2 destinations" in str(lines[2]["rule"])


def test_ipv6_extension_headers_are_walked_to_the_port() -> None:
    """Hostile review 16: a routing header (no capability needed) hid the UDP header behind it."""
    routing = bytes([UDP_PROTOCOL, 2, 4, 2, 0, 0, 0, 0]) + bytes(16)  # next header UDP, 24 bytes
    hop_by_hop = bytes([43, 0]) + bytes(6)  # next header routing, 8 bytes
    packet = ipv6(0, "2001:db8::1", hop_by_hop + routing + udp(4444))
    assert refused_packets(nflog(packet)) == [("udp", "2001:db8::1", 4444)]
    endless = ipv6(0, "2001:db8::2", bytes([0, 0]) + bytes(6))  # hop-by-hop after hop-by-hop, past the copy
    assert refused_packets(nflog(endless)) == [("ip 6", "2001:db8::2", 0)]  # recorded by its address all the same


def test_other_protocols_and_later_fragments_are_kept_by_their_address() -> None:
    later_fragment = bytearray(ipv4(17, "192.0.2.1", udp(443)))
    later_fragment[6:8] = (185).to_bytes(2, "big")  # fragment offset 185: no UDP header in it
    read = nflog(ipv4(136, "192.0.2.1", udp(9)), ipv4(132, "192.0.2.2", bytes(12)), bytes(later_fragment), ipv4(17, "192.0.2.3", b"\x00"))
    assert refused_packets(read) == [("udplite", "192.0.2.1", 9), ("ip 132", "192.0.2.2", 0), ("udp", "192.0.2.1", 0), ("udp", "192.0.2.3", 0)]


def test_a_flood_at_the_rules_rate_is_said_to_have_hidden_some(
    session: Session, audit_lines: Callable[[], list[dict[str, object]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile review 16: past the rule's rate, a destination could be refused unrecorded; the end says so."""
    log = PacketLog(session, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    monkeypatch.setattr(packet_log.time, "monotonic", lambda: 1000.5)
    log._count(packet_log.LOG_RATE)
    log._refused("ip 132", "192.0.2.2", 0)
    log.close()
    rules = [str(r["rule"]) for r in audit_lines()]
    assert rules[0] == "IP protocol 132 does not leave the sandbox: only TCP goes through the filter"
    assert any("refused unrecorded" in rule for rule in rules), rules
    quiet = PacketLog(session, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    quiet._count(3)
    assert not quiet.limited  # control


async def test_the_log_is_read_as_it_comes_and_closing_twice_does_nothing(
    session: Session, audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    """A socket pair stands in for the NFLOG socket: the daemon only reads it."""
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    log = PacketLog(session, ours)
    log.open()
    kernel.send(nflog(ipv4(17, "192.0.2.9", udp(443))))
    log.close()  # reads what is left first
    log.close()
    kernel.close()
    assert [(r["scheme"], r["host"], r["port"]) for r in audit_lines()] == [("udp", "192.0.2.9", 443)]
