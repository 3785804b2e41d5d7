"""Which addresses a run reaches only when its policy lists them: loopback, private, link-local,
multicast, cloud metadata and the other reserved blocks, whichever spelling an address comes in.

The proxy refuses them for an allowed name that resolves there (proxy/rules/decide.py `check_resolved`);
`stockade learn` and the narrowing of a project's policy under an open network use the same
judgement (profiles/learning.py, profiles/narrow.py), so it lives here, below both.
"""

from __future__ import annotations

import ipaddress

from stockade.profiles.domains import IPAddress, IPNetwork

# IPv6 blocks whose last 32 bits are an IPv4 address that some hosts reach: NAT64's well-known prefix
# (RFC 6052), IPv4-compatible (deprecated, RFC 4291) and SIIT's IPv4-translated (RFC 2765) addresses.
# Mapped (::ffff:0:0/96) and 6to4 are read by ipaddress itself; NAT64's local-use block is reserved whole.
_EMBEDDING = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "::/96", "::ffff:0:0:0/96"))

# Checked in this order; the first match names the refusal. Metadata first so
# 169.254.169.254 reads "cloud metadata" rather than "link-local".
_FORBIDDEN: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = tuple(
    (kind, tuple(ipaddress.ip_network(n) for n in nets))
    for kind, nets in (
        # AWS, GCP and Azure IMDS; AWS over IPv6; Alibaba; Azure's wire server (platform DNS and agent)
        ("cloud metadata", ("169.254.169.254/32", "fd00:ec2::254/128", "100.100.100.200/32", "168.63.129.16/32")),
        ("unspecified", ("0.0.0.0/8", "::/128")),
        ("loopback", ("127.0.0.0/8", "::1/128")),
        ("link-local", ("169.254.0.0/16", "fe80::/10")),
        ("private", ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")),
        ("multicast", ("224.0.0.0/4", "ff00::/8")),
        # IETF protocol assignments (its anycast too). Not here: the documentation and benchmarking
        # ranges, which labs and CI mirrors use for real services (a PyPI mirror at 203.0.113.80).
        ("reserved", ("240.0.0.0/4", "192.0.0.0/24", "64:ff9b:1::/48")),
    )
)


def canonical_address(address: IPAddress) -> IPAddress:
    """One spelling per address: IPv4-mapped IPv6 becomes IPv4, scope ids are dropped."""
    if address.version == 6:
        mapped = address.ipv4_mapped
        if mapped is not None:
            return mapped
        if address.scope_id:
            return ipaddress.IPv6Address(str(address).split("%", 1)[0])
    return address


def network_kind(network: IPNetwork) -> str | None:
    """Why a block of addresses holds some that are off limits by default, or None when all are public."""
    for kind, networks in _FORBIDDEN:
        if any(network.version == n.version and network.overlaps(n) for n in networks):
            return kind
    if network.version == 6 and network.prefixlen < 96:  # wide enough to hold mapped, 6to4 or NAT64 forms of any IPv4
        return "reserved"
    return address_kind(network.network_address)


def address_kind(address: IPAddress) -> str | None:
    """Why an address is off limits by default ("loopback", ...), or None for a public one.

    Addresses that embed an IPv4 (mapped, 6to4, NAT64, IPv4-compatible, IPv4-translated) are
    judged by it too: on hosts with such routes they reach that IPv4.
    """
    candidates = [canonical_address(address)]
    if address.version == 6:
        v6 = ipaddress.IPv6Address(int(address))
        if v6.sixtofour is not None:
            candidates.append(v6.sixtofour)
        if any(v6 in block for block in _EMBEDDING) and int(v6) > 1:  # ::1 and :: keep their own names
            candidates.append(ipaddress.IPv4Address(int(v6) & 0xFFFFFFFF))
    for kind, networks in _FORBIDDEN:
        for candidate in candidates:
            if any(candidate.version == n.version and candidate in n for n in networks):
                return kind
    return None
