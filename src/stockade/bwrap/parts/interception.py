"""Every TCP connection and DNS query of the sandbox to the filter, whether or not its client reads HTTP_PROXY.

Node's `fetch` and `https`, Go and Rust programs with their own transports,
gRPC clients and database drivers ignore the proxy variables: inside, they
found no resolver and no route, and failed with EAI_AGAIN. So, in the
sandbox's own network namespace (netns.py), before bwrap starts:

- every IPv4 address is local (a `local default` route on the loopback), so
  a connection to any address is made inside the namespace and nowhere else;
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
  that maps back to it, anything else no answer.

Nothing here reaches outside the run's namespaces, and nothing is setuid: the
child has CAP_NET_ADMIN in the user namespace it made, and loses it at exec.
The rule is made through libnftables (Debian's libnftables1, which the
`nftables` package brings); where it is missing or refuses, the run goes on as
before (proxy-aware clients only) and `stockade doctor` says why.
"""

from __future__ import annotations

import _socket
import os
import struct

from stockade.bwrap.parts.netns import CLONE_NEWNET, enter_user_namespace, in_child, library_function, listen

TRANSPARENT_PORT = 3129  # inside the sandbox's own namespace, beside the proxy's 3128
DNS_PORT = 53

RULES = f"""table ip stockade {{
    chain out {{
        type nat hook output priority -100; policy accept;
        udp dport {DNS_PORT} redirect to :{DNS_PORT}
        tcp dport {DNS_PORT} redirect to :{DNS_PORT}
        ip daddr 127.0.0.0/8 accept
        meta l4proto tcp redirect to :{TRANSPARENT_PORT}
    }}
}}
""".encode()
LIBRARY = "libnftables.so.1"

# rtnetlink (rtnetlink(7)): one RTM_NEWROUTE, "local 0.0.0.0/0 dev lo"
NETLINK_ROUTE = 0
RTM_NEWROUTE = 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_HOST, RTN_LOCAL = 254, 4, 254, 2
RTA_OIF = 4


def route_every_address_here() -> None:
    """Make every IPv4 address local to the namespace's loopback (`ip route add local default dev lo`)."""
    route = struct.pack("=BBBBBBBBI", _socket.AF_INET, 0, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_HOST, RTN_LOCAL, 0)
    attribute = struct.pack("=HHi", 8, RTA_OIF, _socket.if_nametoindex("lo"))
    body = route + attribute
    header = struct.pack("=IHHII", 16 + len(body), RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, 1, 0)
    link = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, NETLINK_ROUTE)
    try:
        link.send(header + body)
        answer = link.recv(4096)
    finally:
        link.close()
    error = struct.unpack_from("=i", answer, 16)[0] if len(answer) >= 20 else -1
    if error != 0:
        raise OSError(-error, f"the sandbox's route to every address: {os.strerror(-error)}")


def redirect() -> str | None:
    """Load RULES into the namespace's nftables: None once done, else why not (no library, a refusal)."""
    try:
        new = library_function(LIBRARY, "nft_ctx_new", "i", returns="P")
        buffer_errors = library_function(LIBRARY, "nft_ctx_buffer_error", "P")
        run = library_function(LIBRARY, "nft_run_cmd_from_buffer", "Pz")
        free = library_function(LIBRARY, "nft_ctx_free", "P", returns="")
    except OSError as error:
        return f"{LIBRARY} could not be loaded ({error}): install nftables"
    context = new(0)
    if not context:
        return "libnftables could not make a context"
    try:
        buffer_errors(context)  # its words stay in the library, not on the run's terminal
        if run(context, RULES) != 0:
            return "nftables refused the sandbox's rule (is nf_tables in this kernel?)"
    finally:
        free(context)
    return None


def sockets() -> list[_socket.socket]:
    """The namespace's ends of interception: the transparent listener, then DNS over UDP and over TCP."""
    made: list[_socket.socket] = []
    try:
        made.append(listen("127.0.0.1", TRANSPARENT_PORT, 512))
        datagrams = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        made.append(datagrams)
        datagrams.bind(("127.0.0.1", DNS_PORT))
        made.append(listen("127.0.0.1", DNS_PORT, 64))
    except OSError:
        for each in made:
            each.close()
        raise
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
    try:
        route_every_address_here()
    except OSError:  # the rule sends connections to the door; without the route they find none, as before
        pass
    return made


def probe() -> str | None:
    """Whether a run's namespace can intercept (`stockade doctor`): None when it can, else why not.
    Tried as a run's child does it, in a child of its own."""

    def attempt() -> str | None:
        enter_user_namespace(CLONE_NEWNET, os.getuid(), os.getgid())
        why = redirect()
        if why is None:
            route_every_address_here()
        return why

    return in_child(attempt)
