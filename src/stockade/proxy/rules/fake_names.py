"""The addresses the sandbox's resolver gives out: one per name a session may reach, each mapping back to it.

The resolver inside (proxy/daemon/inside_dns.py) answers an allowed name with an
address of FAKE_NETWORK (198.18.0.0/15, set aside for benchmarks by RFC 2544,
so no real host is hidden behind it), its own for this session; the
transparent door (proxy/daemon/door.py) maps a connection to it back to the name.
"""

from __future__ import annotations

import ipaddress

FAKE_NETWORK = ipaddress.IPv4Network("198.18.0.0/15")
MAX_NAMES = 65_536  # addresses one session may be given


class Names:
    """The addresses given out in one session, each mapping back to its name."""

    def __init__(self) -> None:
        self.by_name: dict[str, str] = {}
        self.by_address: dict[str, str] = {}

    def address(self, name: str) -> str | None:
        """The name's address, given out now if it has none yet; None once MAX_NAMES are out."""
        given = self.by_name.get(name)
        if given is None and len(self.by_name) < MAX_NAMES:
            given = str(FAKE_NETWORK.network_address + 1 + len(self.by_name))
            self.by_name[name] = given
            self.by_address[given] = name
        return given

    def name(self, address: str) -> str | None:
        return self.by_address.get(address)


def is_fake(address: str) -> bool:
    try:
        return ipaddress.IPv4Address(address) in FAKE_NETWORK
    except ValueError:
        return False
