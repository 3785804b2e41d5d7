"""The packets a sandbox sent that are not TCP nor DNS: refused in its namespace, recorded here (ESCAPES 94).

Only TCP goes through the filter. bwrap/parts/interception.py's rule refuses
every other UDP datagram and every ICMP echo not to the namespace's loopback
at once (the sender gets EPERM: a QUIC client falls back to TCP, ping says
"Packet filtered"), and copies its first bytes to an NFLOG group. The socket
of that group is one of the session's interception sockets; this reads it,
and each distinct (protocol, address, port) becomes one audit record and one
line of the run's summary, by name when the address is one the sandbox's
resolver gave out. Repeats are counted at the end, as the resolver's are.

The rule copies at most LOG_RATE packets a second to this socket, and its
receive buffer bounds the rest: a flood costs the daemon little, and what
the kernel could not queue is counted (ENOBUFS) instead of recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct

from stockade.proxy.audit import AuditError, AuditRecord, now_iso
from stockade.proxy.rules.decide import Decision
from stockade.proxy.rules.fake_names import is_fake

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.proxy.filter.sessions import Session

logger = logging.getLogger(__name__)

NFULNL_MSG_PACKET = 4 << 8  # NFNL_SUBSYS_ULOG << 8 | NFULNL_MSG_PACKET (0)
NFULA_PAYLOAD = 9
NLMSG_HEADER, NFGEN_HEADER = 16, 4
UDP, ICMP, ICMPV6 = 17, 1, 58
MAX_RECORDED = 1024  # distinct refused destinations one session writes one by one
REFUSED = {
    "udp": "UDP does not leave the sandbox: only TCP goes through the filter (a QUIC client falls back to it)",
    "icmp": "ping (ICMP echo) does not leave the sandbox: only TCP goes through the filter",
}


def refused_packets(message: bytes) -> list[tuple[str, str, int]]:
    """(protocol, address, port) of each packet copied in one read of the NFLOG socket; what cannot be
    read as an IPv4 or IPv6 packet of UDP or ICMP echo is skipped."""
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
    elif len(packet) >= 40 and packet[0] >> 4 == 6:
        header, protocol, address = 40, packet[6], str(ipaddress.IPv6Address(packet[24:40]))
    else:
        return None
    if protocol == UDP and len(packet) >= header + 4:
        return "udp", address, int.from_bytes(packet[header + 2 : header + 4], "big")
    if protocol in (ICMP, ICMPV6):
        return "icmp", address, 0
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
                for protocol, address, port in refused_packets(message):
                    self._refused(protocol, address, port)
            except Exception:  # a fault of ours: the packet stays refused, the daemon's log says why
                logger.exception("session %s: a refused packet could not be read", self.session.spec.session_id)

    def _refused(self, protocol: str, address: str, port: int) -> None:
        host = (self.session.names.name(address) or address) if is_fake(address) else address
        key = (protocol, host, port)
        if key in self.counts:
            self.counts[key] += 1
            return
        if len(self.counts) >= MAX_RECORDED:
            self.unrecorded += 1
            return
        self.counts[key] = 0
        rule = REFUSED[protocol]
        spec = self.session.spec
        record = AuditRecord(session=spec.session_id, command=spec.command, scheme=protocol, host=host, port=port, decision="deny", rule=rule)
        self.first[key] = record
        self._write(record)
        self.session.note_denial(host, port, Decision(False, rule, "", host))

    def _write_repeats(self) -> None:
        ended = now_iso()
        for key, more in self.counts.items():
            if more:
                first = self.first[key]
                self._write(AuditRecord(
                    session=first.session, command=first.command, scheme=first.scheme, host=first.host, port=first.port,
                    decision="deny", rule=first.rule, time=first.time, repeats=more, last_time=ended,
                ))  # fmt: skip
        spec = self.session.spec
        if self.unrecorded or self.lost:
            self._write(AuditRecord(
                session=spec.session_id, command=spec.command, scheme="udp", host="*", port=0, decision="deny",
                rule=f"{self.unrecorded} more refused packets past the first {MAX_RECORDED} destinations, and {self.lost} "
                f"reads of them the kernel could not queue (not recorded one by one)",
            ))  # fmt: skip

    def _write(self, record: AuditRecord) -> None:
        with contextlib.suppress(AuditError):  # a broken writer: the run's end says the audit failed
            self.session.writer.write(record)
