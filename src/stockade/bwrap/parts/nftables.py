"""The sandbox namespace's one nftables table, sent to the kernel as one netlink batch.

interception.py's table is fixed: the same chains and rules for every run.
libnftables would parse its text, ask the kernel for its cache and then send
this very batch; it costs a run about 2 ms (its dlopen alone is 0.9 ms), and
a second library on the path of every networked run. So the batch is built
here, from the rules as nftables' own virtual machine sees them (`nft
--debug=netlink` prints them the same way), and interception.py's `RULES`
says in nft's syntax what they are. tests/bwrap/parts/test_nftables.py loads both in
namespaces of their own and holds `nft list ruleset` of each to be the same,
so the two cannot drift apart.

The encoding is nf_tables' netlink API (linux/netfilter/nf_tables.h), which
the kernel keeps stable: a batch begins and ends with nfnetlink's batch
messages, and each table, chain and rule is a message with its attributes;
each expression of a rule is a nested attribute with its name and its data.
"""

from __future__ import annotations

import _socket
import os
import struct

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END = 0x10, 0x11
NFT_MSG_NEWTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE = 0, 3, 6
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE, NLM_F_APPEND = 0x1, 0x4, 0x200, 0x400, 0x800
NLA_F_NESTED = 0x8000
NFPROTO_INET, NFPROTO_IPV4, NFPROTO_IPV6 = 1, 2, 10
NF_INET_LOCAL_OUT = 3
NF_ACCEPT = 1
REG_VERDICT, REG_1 = 0, 1
TCP, UDP, ICMP, ICMPV6 = 6, 17, 1, 58

Expression = tuple[str, bytes]


def _attribute(kind: int, data: bytes) -> bytes:
    size = 4 + len(data)
    return struct.pack("=HH", size, kind) + data + b"\0" * (-size % 4)


def _nested(kind: int, *attributes: bytes) -> bytes:
    return _attribute(kind | NLA_F_NESTED, b"".join(attributes))


def _u32(kind: int, value: int) -> bytes:
    return _attribute(kind, struct.pack(">I", value))


def _string(kind: int, text: str) -> bytes:
    return _attribute(kind, text.encode() + b"\0")


def _data(kind: int, value: bytes) -> bytes:
    return _nested(kind, _attribute(1, value))  # NFTA_DATA_VALUE


# -- expressions, as `nft --debug=netlink` prints them -------------------------------------------


def meta(key: str) -> Expression:
    """[ meta load KEY => reg 1 ]"""
    return "meta", _u32(1, REG_1) + _u32(2, {"nfproto": 15, "l4proto": 16}[key])


def cmp(value: bytes, equal: bool = True) -> Expression:
    """[ cmp eq|neq reg 1 VALUE ]"""
    return "cmp", _u32(1, REG_1) + _u32(2, 0 if equal else 1) + _data(3, value)


def payload(base: str, offset: int, length: int) -> Expression:
    """[ payload load LENGTHb @ network|transport header + OFFSET => reg 1 ]"""
    return "payload", _u32(1, REG_1) + _u32(2, {"network": 1, "transport": 2}[base]) + _u32(3, offset) + _u32(4, length)


def accept() -> Expression:
    """[ immediate reg 0 accept ]"""
    return "immediate", _u32(1, REG_VERDICT) + _nested(2, _nested(2, _u32(1, NF_ACCEPT)))  # NFTA_DATA_VERDICT, NFTA_VERDICT_CODE


def redirect_to(port: int) -> list[Expression]:
    """[ immediate reg 1 PORT ] [ redir proto_min reg 1 flags 0x2 ]: the namespace's own address, at PORT."""
    return [("immediate", _u32(1, REG_1) + _data(2, struct.pack(">H", port))), ("redir", _u32(1, REG_1) + _u32(3, 0x2))]


def ct_status_dnat() -> list[Expression]:
    """[ ct load status => reg 1 ] [ bitwise reg 1 = (reg 1 & 0x20) ^ 0 ] [ cmp neq reg 1 0 ]: a redirected flow's packets."""
    mask, zero = struct.pack("=I", 0x20), struct.pack("=I", 0)  # IPS_DST_NAT; conntrack's status bits are in host order
    bitwise = _u32(1, REG_1) + _u32(2, REG_1) + _u32(3, 4) + _data(4, mask) + _data(5, zero)
    return [("ct", _u32(1, REG_1) + _u32(2, 2)), ("bitwise", bitwise), cmp(zero, equal=False)]  # NFT_CT_STATUS


def limit(rate: int, burst: int) -> Expression:
    """[ limit rate RATE/second burst BURST type packets flags 0x0 ]"""
    per_second = _attribute(1, struct.pack(">Q", rate)) + _attribute(2, struct.pack(">Q", 1))  # NFTA_LIMIT_RATE, NFTA_LIMIT_UNIT
    return "limit", per_second + _u32(3, burst) + _u32(4, 0) + _u32(5, 0)  # burst, type packets, flags


def log(group: int) -> Expression:
    """[ log group GROUP snaplen 0 qthreshold 0 ]"""
    return "log", _attribute(1, struct.pack(">H", group))


def reject(kind: int, code: int) -> Expression:
    """[ reject type KIND code CODE ]"""
    return "reject", _u32(1, kind) + _attribute(2, bytes([code]))


def is_family(protocol: int) -> list[Expression]:
    return [meta("nfproto"), cmp(bytes([protocol]))]


def is_protocol(protocol: int) -> list[Expression]:
    return [meta("l4proto"), cmp(bytes([protocol]))]


def to_loopback(family: int) -> list[Expression]:
    """IPv4's daddr 127.0.0.0/8, IPv6's ::1."""
    if family == NFPROTO_IPV4:
        return [*is_family(NFPROTO_IPV4), payload("network", 16, 1), cmp(b"\x7f")]
    return [*is_family(NFPROTO_IPV6), payload("network", 24, 16), cmp(bytes(15) + b"\x01")]


def icmp_but_echo(family: int) -> list[Expression]:
    """`icmp type != echo-request` (or ICMPv6's): what only the kernel sends inside."""
    protocol, echo = (ICMP, 8) if family == NFPROTO_IPV4 else (ICMPV6, 128)
    return [*is_family(family), *is_protocol(protocol), payload("transport", 0, 1), cmp(bytes([echo]), equal=False)]


def to_port(port: int) -> list[Expression]:
    return [payload("transport", 2, 2), cmp(struct.pack(">H", port))]


# -- messages ------------------------------------------------------------------------------------


class Batch:
    """One nf_tables batch: a table, its chains and their rules, in order."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.messages: list[tuple[int, int, bytes]] = [(NFT_MSG_NEWTABLE, NLM_F_CREATE, _string(1, table) + _u32(2, 0))]

    def chain(self, name: str, kind: str, priority: int) -> None:
        """A base chain on the output hook (policy accept)."""
        hook = _nested(4, _u32(1, NF_INET_LOCAL_OUT), _attribute(2, struct.pack(">i", priority)))
        body = _string(1, self.table) + _string(3, name) + hook + _u32(5, NF_ACCEPT) + _string(7, kind)
        self.messages.append((NFT_MSG_NEWCHAIN, NLM_F_CREATE, body))

    def rule(self, chain: str, *expressions: Expression | list[Expression]) -> None:
        flat: list[Expression] = []
        for each in expressions:
            flat += each if isinstance(each, list) else [each]
        elements = [_nested(1, _string(1, name), _nested(2, data)) for name, data in flat]  # NFTA_LIST_ELEM: NFTA_EXPR_NAME, _DATA
        body = _string(1, self.table) + _string(2, chain) + _nested(4, *elements)
        self.messages.append((NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, body))

    def encoded(self) -> bytes:
        """The batch's bytes: begin, each message asking for its acknowledgement, end."""
        parts = [_message(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, _socket.AF_UNSPEC, NFNL_SUBSYS_NFTABLES)]
        for sequence, (kind, flags, body) in enumerate(self.messages, start=1):
            parts.append(_message((NFNL_SUBSYS_NFTABLES << 8) | kind, NLM_F_REQUEST | NLM_F_ACK | flags, sequence, NFPROTO_INET, 0, body))
        parts.append(_message(NFNL_MSG_BATCH_END, NLM_F_REQUEST, len(self.messages) + 1, _socket.AF_UNSPEC, NFNL_SUBSYS_NFTABLES))
        return b"".join(parts)

    def send(self) -> None:
        """Load the batch into the calling process's network namespace; OSError with the kernel's reason."""
        link = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            link.bind((0, 0))
            link.send(self.encoded())
            _acknowledged(link, len(self.messages))
        finally:
            link.close()


def _message(kind: int, flags: int, sequence: int, family: int, resource: int, body: bytes = b"") -> bytes:
    header = struct.pack("=IHHII", 16 + 4 + len(body), kind, flags, sequence, 0)
    return header + struct.pack("=BBH", family, 0, _socket.htons(resource)) + body


def _acknowledged(link: _socket.socket, count: int) -> None:
    """Read an acknowledgement for each of `count` messages; the first error the kernel sends raises."""
    seen = 0
    while seen < count:
        answer = link.recv(65536)
        offset = 0
        while offset + 20 <= len(answer):
            length, kind = struct.unpack_from("=IH", answer, offset)
            if kind == 2:  # NLMSG_ERROR: an error, or 0 for an acknowledgement
                error = struct.unpack_from("=i", answer, offset + 16)[0]
                if error != 0:
                    raise OSError(-error, f"nftables refused the sandbox's table: {os.strerror(-error)}")
                seen += 1
            if length < 16:
                break
            offset += (length + 3) & ~3
