"""Every TCP connection and DNS query of the sandbox to the filter, whether or not its client reads HTTP_PROXY.

Node's `fetch` and `https`, Go and Rust programs with their own transports,
gRPC clients and database drivers ignore the proxy variables: inside, they
found no resolver and no route, and failed with EAI_AGAIN. So, in the
sandbox's own network namespace (netns.py), before bwrap starts:

- every address, IPv4 and IPv6, is local (a `local default` route on the
  loopback), so a connection to any address is made inside the namespace and
  nowhere else;
- an nftables rule of that namespace turns each TCP connection that is not
  to the loopback into one to TRANSPARENT_PORT, whose listener the daemon
  holds (proxy/daemon/door.py): it reads the address the client asked for
  (SO_ORIGINAL_DST) and serves the connection as a CONNECT to it, by name
  when the address is one the sandbox's resolver gave out, so it is judged,
  recorded and refused exactly as a proxied request is;
- another turns every DNS query (UDP or TCP port 53, to whatever server
  /etc/resolv.conf names) into one to the namespace's own port 53, which the
  daemon answers (proxy/daemon/inside_dns.py) without ever asking anyone: a name
  the policy could allow gets an address of its own (fake_names.FAKE_NETWORK)
  that maps back to it, anything else no answer;
- every other packet not to the loopback (UDP but DNS, ICMP, UDP-Lite, any
  protocol but TCP) is refused at once (the sender gets EPERM, so a QUIC
  client falls back to TCP at once), and a copy of its headers goes to an
  NFLOG group whose socket the daemon reads (proxy/daemon/packet_log.py):
  each is recorded and said in the run's summary like any refusal (at most
  LOG_RATE a second are copied). Only the redirected connections' and
  queries' own packets pass (`ct status dnat`): a reply to a socket bound to
  another address does not. ICMP other than an echo passes: nothing inside
  can send it (no raw sockets), so it is the kernel's own errors.

Nothing here reaches outside the run's namespaces, and nothing is setuid: the
child has CAP_NET_ADMIN in the user namespace it made, and loses it at exec.
The table is sent to the kernel as one netlink batch (nftables.py), with no
library; where the kernel refuses it (no nf_tables, or no NAT in it), the run
goes on as before (proxy-aware clients only) and `stockade doctor` says why.
"""

from __future__ import annotations

import _socket
import os
import struct

from stockade.bwrap.parts import nftables
from stockade.bwrap.parts.netns import CLONE_NEWNET, enter_user_namespace, in_child, listen
from stockade.proxy.control import REFUSED_COPY_BURST, REFUSED_COPY_RATE

TRANSPARENT_PORT = 3129  # inside the sandbox's own namespace, beside the proxy's 3128
DNS_PORT = 53
LOG_GROUP = 1  # the NFLOG group of refused packets: groups belong to a network namespace, so any number will do
LOG_RATE, LOG_BURST = REFUSED_COPY_RATE, REFUSED_COPY_BURST  # refused packets copied to the daemon (the rest are refused unseen)
LOG_BYTES = 128  # of each refused packet: its IP and transport headers
IPV4_SOCKETS = 4  # the transparent listener, DNS over UDP and TCP, the log; IPv6's three more follow (proxy/control.py)

# The table in nft's syntax: what table() sends (tests/bwrap/parts/test_nftables.py holds the two the same)
RULES = f"""table inet stockade {{
    chain out {{
        type nat hook output priority -100; policy accept;
        udp dport {DNS_PORT} redirect to :{DNS_PORT}
        tcp dport {DNS_PORT} redirect to :{DNS_PORT}
        ip daddr 127.0.0.0/8 accept
        ip6 daddr ::1 accept
        meta l4proto tcp redirect to :{TRANSPARENT_PORT}
    }}
    chain refuse {{
        type filter hook output priority 0; policy accept;
        ct status dnat accept
        ip daddr 127.0.0.0/8 accept
        ip6 daddr ::1 accept
        meta l4proto tcp accept
        icmp type != echo-request accept
        icmpv6 type != echo-request accept
        limit rate {LOG_RATE}/second burst {LOG_BURST} packets log group {LOG_GROUP}
        meta l4proto udp reject
        reject with icmpx type admin-prohibited
    }}
}}
""".encode()

# rtnetlink (rtnetlink(7)): one RTM_NEWROUTE, "local 0.0.0.0/0 dev lo" (or "local ::/0")
NETLINK_ROUTE = 0
RTM_NEWROUTE = 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_HOST, RTN_LOCAL = 254, 4, 254, 2
RTA_OIF = 4

# nfnetlink_log (libnetfilter_log's protocol): bind one group, copy packets, send each at once
NETLINK_NETFILTER = 12
NFNL_SUBSYS_ULOG, NFULNL_MSG_CONFIG = 4, 1
NFULA_CFG_CMD, NFULA_CFG_MODE, NFULA_CFG_QTHRESH = 1, 2, 5
NFULNL_CFG_CMD_BIND, NFULNL_CFG_CMD_PF_BIND, NFULNL_CFG_CMD_PF_UNBIND = 1, 3, 4
NFULNL_COPY_PACKET = 2


def _netlink_request(link: _socket.socket, kind: int, body: bytes, what: str) -> None:
    """Send one request and read its acknowledgement; OSError with the kernel's reason when refused."""
    header = struct.pack("=IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, 1, 0)
    link.send(header + body)
    answer = link.recv(4096)
    error = struct.unpack_from("=i", answer, 16)[0] if len(answer) >= 20 else -1
    if error != 0:
        raise OSError(-error, f"{what}: {os.strerror(-error)}")


def route_every_address_here(family: int = _socket.AF_INET) -> None:
    """Make every address of `family` local to the namespace's loopback (`ip route add local default dev lo`)."""
    route = struct.pack("=BBBBBBBBI", family, 0, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_HOST, RTN_LOCAL, 0)
    attribute = struct.pack("=HHi", 8, RTA_OIF, _socket.if_nametoindex("lo"))
    link = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, NETLINK_ROUTE)
    try:
        _netlink_request(link, RTM_NEWROUTE, route + attribute, "the sandbox's route to every address")
    finally:
        link.close()


def _attribute(kind: int, data: bytes) -> bytes:
    size = 4 + len(data)
    return struct.pack("=HH", size, kind) + data + b"\0" * (-size % 4)


def packet_log() -> _socket.socket:
    """The NFLOG socket the rule's refused packets are copied to (LOG_GROUP), bound while this child
    may (CAP_NET_ADMIN in its namespace); the daemon only reads it."""
    link = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        link.bind((0, 0))
        kind = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG

        def configure(family: int, group: int, *attributes: bytes) -> None:
            body = struct.pack("=BBH", family, 0, _socket.htons(group)) + b"".join(attributes)
            _netlink_request(link, kind, body, "the log of refused packets")

        for family in (_socket.AF_INET, _socket.AF_INET6):  # this namespace's logger for each family is NFLOG
            configure(family, 0, _attribute(NFULA_CFG_CMD, bytes([NFULNL_CFG_CMD_PF_UNBIND])))
            configure(family, 0, _attribute(NFULA_CFG_CMD, bytes([NFULNL_CFG_CMD_PF_BIND])))
        configure(_socket.AF_UNSPEC, LOG_GROUP, _attribute(NFULA_CFG_CMD, bytes([NFULNL_CFG_CMD_BIND])))
        configure(
            _socket.AF_UNSPEC,
            LOG_GROUP,
            _attribute(NFULA_CFG_MODE, struct.pack(">IBx", LOG_BYTES, NFULNL_COPY_PACKET)),
            _attribute(NFULA_CFG_QTHRESH, struct.pack(">I", 1)),  # each packet at once, not batched for a second
        )
    except OSError:
        link.close()
        raise
    return link


def table() -> nftables.Batch:
    """RULES, as the netlink batch the kernel takes (nftables.py; tests/bwrap/parts/test_nftables.py holds
    the two to the same ruleset)."""
    batch = nftables.Batch("stockade")
    batch.chain("out", "nat", -100)
    batch.chain("refuse", "filter", 0)
    loopback = [nftables.to_loopback(nftables.NFPROTO_IPV4), nftables.to_loopback(nftables.NFPROTO_IPV6)]
    for protocol in (nftables.UDP, nftables.TCP):
        batch.rule("out", nftables.is_protocol(protocol), nftables.to_port(DNS_PORT), nftables.redirect_to(DNS_PORT))
    for each in loopback:
        batch.rule("out", each, nftables.accept())
    batch.rule("out", nftables.is_protocol(nftables.TCP), nftables.redirect_to(TRANSPARENT_PORT))
    batch.rule("refuse", nftables.ct_status_dnat(), nftables.accept())
    for each in loopback:
        batch.rule("refuse", each, nftables.accept())
    batch.rule("refuse", nftables.is_protocol(nftables.TCP), nftables.accept())
    for family in (nftables.NFPROTO_IPV4, nftables.NFPROTO_IPV6):  # the kernel's own errors: only ping sends ICMP inside
        batch.rule("refuse", nftables.icmp_but_echo(family), nftables.accept())
    batch.rule("refuse", nftables.limit(LOG_RATE, LOG_BURST), nftables.log(LOG_GROUP))
    batch.rule("refuse", nftables.is_protocol(nftables.UDP), nftables.reject(2, 1))  # ICMPX port unreachable
    batch.rule("refuse", nftables.reject(2, 3))  # ICMPX admin prohibited
    return batch


def redirect() -> str | None:
    """Load the table into the namespace: None once done, else why not (a kernel without nf_tables, a refusal)."""
    try:
        table().send()
    except OSError as error:
        return f"{error.strerror or error} (is nf_tables in this kernel?)"
    return None


def _family_sockets(loopback: str) -> list[_socket.socket]:
    """One address family's ends: the transparent listener, then DNS over UDP and over TCP."""
    made: list[_socket.socket] = []
    try:
        made.append(listen(loopback, TRANSPARENT_PORT, 512))
        datagrams = _socket.socket(_socket.AF_INET6 if ":" in loopback else _socket.AF_INET, _socket.SOCK_DGRAM)
        made.append(datagrams)
        datagrams.bind((loopback, DNS_PORT))
        made.append(listen(loopback, DNS_PORT, 64))
    except OSError:
        for each in made:
            each.close()
        raise
    return made


def sockets() -> list[_socket.socket]:
    """The namespace's ends of interception, in the order proxy/control.py names: IPv4's three, the log
    of refused packets, then IPv6's three where the namespace has IPv6 (a kernel or a sysctl may have
    turned it off: then IPv6 has no route, as before)."""
    made = _family_sockets("127.0.0.1")
    try:
        made.append(packet_log())
    except OSError:
        for each in made:
            each.close()
        raise
    try:
        made += _family_sockets("::1")
    except OSError:
        pass
    return made


def prepare() -> list[_socket.socket]:
    """In the child, once its namespace is up: interception's sockets once its rule and route are in
    place; none where either was refused (the run goes on with proxy-aware clients only, as before).
    The sockets come first, so that a port taken inside leaves the namespace as it was."""
    try:
        made = sockets()
    except OSError:
        return []
    if redirect() is not None:
        for each in made:
            each.close()
        return []
    families = (_socket.AF_INET, _socket.AF_INET6) if len(made) > IPV4_SOCKETS else (_socket.AF_INET,)
    for family in families:
        try:
            route_every_address_here(family)
        except OSError:  # the rule sends connections to the door; without the route they find none, as before
            pass
    _let_ping_send()
    return made


def _let_ping_send() -> None:
    """A new namespace lets no group open ICMP datagram sockets, so ping failed before it sent
    anything ("socket: Operation not permitted"); now it sends, the rule refuses its echo at once
    ("Packet filtered"), and the run's summary says why. The range may name only the group this
    namespace maps: the user's own."""
    gid = os.getgid()
    try:
        with open("/proc/sys/net/ipv4/ping_group_range", "w") as range_file:
            range_file.write(f"{gid} {gid}\n")
    except OSError:
        pass


def probe() -> str | None:
    """Whether a run's namespace can intercept (`stockade doctor`): None when it can, else why not.
    Tried as a run's child does it, in a child of its own."""

    def attempt() -> str | None:
        enter_user_namespace(CLONE_NEWNET, os.getuid(), os.getgid())
        why = redirect()
        if why is None:
            route_every_address_here()
            packet_log().close()
        return why

    return in_child(attempt)
