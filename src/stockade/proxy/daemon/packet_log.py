"""The packets a sandbox sent that are not TCP nor DNS: refused in its namespace, recorded here (ESCAPES 94).

Only TCP goes through the filter. bwrap/parts/interception.py's rule refuses
every other packet not to the namespace's loopback at once (UDP, a ping,
UDP-Lite, any other protocol: the sender gets EPERM, so a QUIC client falls
back to TCP), and copies its first bytes to an NFLOG group. The socket of
that group is one of the session's interception sockets; this reads it, and
each distinct (protocol, address, port) becomes one audit record and one line
of the run's summary, by name when the address is one the sandbox's resolver
gave out. Repeats are counted at the end, as the resolver's are.

The rule copies at most LOG_RATE packets a second (past a burst) to this
socket, and its receive buffer bounds the rest: a flood costs the daemon
little. What the kernel could not queue is counted (ENOBUFS), and a second in
which the copies reached the rule's rate is said at the end: past it, packets
were refused unrecorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct
import time

from stockade.proxy.audit import AuditError, AuditRecord, now_iso
from stockade.proxy.control import REFUSED_COPY_RATE
from stockade.proxy.rules.decide import Decision
from stockade.proxy.rules.fake_names import is_fake
from stockade.proxy.summary import ONLY_TCP

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.proxy.filter.sessions import Session

logger = logging.getLogger(__name__)

NFULNL_MSG_PACKET = 4 << 8  # NFNL_SUBSYS_ULOG << 8 | NFULNL_MSG_PACKET (0)
NFULA_PAYLOAD = 9
NLMSG_HEADER, NFGEN_HEADER = 16, 4
UDP, UDPLITE, ICMP, ICMPV6 = 17, 136, 1, 58
IPV6_EXTENSIONS = {0: "hop-by-hop", 43: "routing", 60: "destination options", 44: "fragment", 51: "authentication"}
MAX_RECORDED = 1024  # distinct refused destinations one session writes one by one
LOG_RATE = REFUSED_COPY_RATE  # the rule copies at most this many refused packets a second (past a burst)
REFUSED = {
    "udp": f"UDP {ONLY_TCP} (a QUIC client falls back to it)",
    "udplite": f"UDP-Lite {ONLY_TCP}",
    "icmp": f"ping (ICMP echo) {ONLY_TCP}",
}


def refused_packets(message: bytes) -> list[tuple[str, str, int]]:
    """(kind, address, port) of each packet copied in one read of the NFLOG socket: the kind is "udp",
    "udplite", "icmp" or "ip N" for any other protocol N (port 0 where it has none, or where its
    header could not be read); what cannot be read as an IPv4 or IPv6 packet at all is skipped."""
    found = []
    offset = 0
    while offset + NLMSG_HEADER <= len(message):
        length, kind = struct.unpack_from("=IH", message, offset)
        if length < NLMSG_HEADER or offset + length > len(message):
            break
        if kind == NFULNL_MSG_PACKET:
            payload = _attribute(message[offset + NLMSG_HEADER + NFGEN_HEADER : offset + length], NFULA_PAYLOAD)
            packet = _destination(payload) if payload is not None else None
            if packet is not None:
                found.append(packet)
        offset += (length + 3) & ~3
    return found


def _attribute(attributes: bytes, wanted: int) -> bytes | None:
    offset = 0
    while offset + 4 <= len(attributes):
        size, kind = struct.unpack_from("=HH", attributes, offset)
        if size < 4:
            return None
        if kind & 0x3FFF == wanted:  # without NLA_F_NESTED and NLA_F_NET_BYTEORDER
            return attributes[offset + 4 : offset + size]
        offset += (size + 3) & ~3
    return None


def _destination(packet: bytes) -> tuple[str, str, int] | None:
    if len(packet) >= 20 and packet[0] >> 4 == 4:
        header = (packet[0] & 0x0F) * 4
        protocol, address = packet[9], str(ipaddress.IPv4Address(packet[16:20]))
        fragment = int.from_bytes(packet[6:8], "big") & 0x1FFF
    elif len(packet) >= 40 and packet[0] >> 4 == 6:
        address = str(ipaddress.IPv6Address(packet[24:40]))
        found = _past_extensions(packet)
        if found is None:  # a chain of extension headers past the copy: the address is known, the rest not
            return "ip 6", address, 0
        protocol, header, fragment = found
    else:
        return None
    kind = {UDP: "udp", UDPLITE: "udplite", ICMP: "icmp", ICMPV6: "icmp"}.get(protocol, f"ip {protocol}")
    if protocol in (UDP, UDPLITE) and not fragment and len(packet) >= header + 4:
        return kind, address, int.from_bytes(packet[header + 2 : header + 4], "big")
    return kind, address, 0


def _past_extensions(packet: bytes) -> tuple[int, int, int] | None:
    """(protocol, where its header starts, the fragment offset) past IPv6's extension headers."""
    protocol, offset, fragment = packet[6], 40, 0
    for _ in range(8):
        if protocol not in IPV6_EXTENSIONS:
            return protocol, offset, fragment
        if len(packet) < offset + 8:
            return None
        if protocol == 44:  # fragment: fixed size, its offset in the top 13 bits of bytes 2-3
            fragment = int.from_bytes(packet[offset + 2 : offset + 4], "big") >> 3
            size = 8
        elif protocol == 51:  # authentication: length in 4-byte units, less 2
            size = (packet[offset + 1] + 2) * 4
        else:
            size = (packet[offset + 1] + 1) * 8
        protocol, offset = packet[offset], offset + size
    return None


class PacketLog:
    """One session's refused packets, read from its namespace's NFLOG socket."""

    def __init__(self, session: Session, log: socket.socket) -> None:
        self.session = session
        self.log = log
        self.counts: dict[tuple[str, str, int], int] = {}
        self.first: dict[tuple[str, str, int], AuditRecord] = {}
        self.unrecorded = 0  # refused packets past MAX_RECORDED distinct destinations
        self.lost = 0  # reads the kernel could not queue for us (ENOBUFS)
        self.limited = False  # a second's copies reached the rule's rate: more may have been refused unseen
        self._second, self._in_second = 0, 0
        self._open = False

    def open(self) -> None:
        self.log.setblocking(False)
        asyncio.get_running_loop().add_reader(self.log.fileno(), self._read)
        self._open = True

    def close(self) -> None:
        """Read what is left, stop, and write how often each refusal came again. Twice does nothing."""
        if self.log.fileno() == -1:
            return
        if self._open:
            asyncio.get_running_loop().remove_reader(self.log.fileno())
        self.log.setblocking(False)
        self._read()  # what came after the last read, or before the session was ever served
        self.log.close()
        self._write_repeats()

    def _read(self) -> None:
        for _ in range(64):  # a burst at a time: the loop serves the others between
            try:
                message = self.log.recv(65536)
            except BlockingIOError:
                return
            except OSError as error:
                if error.errno == 105:  # ENOBUFS: the kernel dropped some; reading goes on
                    self.lost += 1
                    continue
                return
            try:
                packets = refused_packets(message)
                self._count(len(packets))
                for kind, address, port in packets:
                    self._refused(kind, address, port)
            except Exception:  # a fault of ours: the packet stays refused, the daemon's log says why
                logger.exception("session %s: a refused packet could not be read", self.session.spec.session_id)

    def _count(self, copies: int) -> None:
        second = int(time.monotonic())
        if second != self._second:
            self._second, self._in_second = second, 0
        self._in_second += copies
        if self._in_second >= LOG_RATE:
            self.limited = True

    def _refused(self, kind: str, address: str, port: int) -> None:
        host = (self.session.names.name(address) or address) if is_fake(address) else address
        key = (kind, host, port)
        if key in self.counts:
            self.counts[key] += 1
            return
        if len(self.counts) >= MAX_RECORDED:
            self.unrecorded += 1
            return
        self.counts[key] = 0
        rule = REFUSED.get(kind) or f"IP protocol {kind.removeprefix('ip ')} {ONLY_TCP}"
        scheme = kind if kind in REFUSED else "ip"
        spec = self.session.spec
        record = AuditRecord(**spec.who(), scheme=scheme, host=host, port=port, decision="deny", rule=rule)
        self.first[key] = record
        self._write(record)
        self.session.note_denial(host, port, Decision(False, rule, "", host))

    def _write_repeats(self) -> None:
        ended = now_iso()
        for key, more in self.counts.items():
            if more:
                first = self.first[key]
                self._write(AuditRecord(
                    **first.who(), scheme=first.scheme, host=first.host, port=first.port,
                    decision="deny", rule=first.rule, time=first.time, repeats=more, last_time=ended,
                ))  # fmt: skip
        spec = self.session.spec
        if self.unrecorded or self.lost:
            self._write(AuditRecord(
                **spec.who(), scheme="ip", host="*", port=0, decision="deny",
                rule=f"{self.unrecorded} more refused packets past the first {MAX_RECORDED} destinations, and {self.lost} "
                f"reads of them the kernel could not queue (not recorded one by one)",
            ))  # fmt: skip
        if self.limited:
            self._write(AuditRecord(
                **spec.who(), scheme="ip", host="*", port=0, decision="deny",
                rule=f"refused packets came at {LOG_RATE} a second or more: past that rate they were refused unrecorded",
            ))  # fmt: skip

    def _write(self, record: AuditRecord) -> None:
        with contextlib.suppress(AuditError):  # a broken writer: the run's end says the audit failed
            self.session.writer.write(record)
