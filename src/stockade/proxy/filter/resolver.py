"""Name resolution for the proxy: the system resolver, or a file for tests.

The proxy resolves names itself (instead of letting mitmproxy hand a name to
`asyncio.open_connection`) so that the address it checks is the address it
connects to: no second lookup an attacker's DNS could answer differently.

The test resolver reads a JSON file on every lookup (tests may edit it while
a daemon runs):

    {"names": {"allowed.test": ["127.0.0.1"], "rebind.wild.test": ["127.0.0.1"]},
     "upstreams": ["127.0.0.1:8443"],
     "log": "/tmp/queries.txt"}

`names` answers lookups (anything else does not resolve: tests never touch
real DNS); `upstreams` lists the test origins, the only loopback endpoints
exempt from the post-resolution check; `log`, when set, receives one line
per name looked up, so a test can prove a denied name was never resolved.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from stockade.profiles.domains import IPAddress
from stockade.proxy.rules.decide import canonical_address, canonical_target

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resolved:
    """What a name resolved to, and which endpoints the resolver vouches for."""

    addresses: tuple[IPAddress, ...]
    upstreams: frozenset[tuple[IPAddress, int]] = frozenset()  # test origins only; empty in production


Resolver = Callable[[str, int], Awaitable[Resolved]]


async def system_resolver(host: str, port: int) -> Resolved:
    """Resolve with getaddrinfo (in a thread, via the event loop); no answer is an empty result."""
    literal = _literal(host)
    if literal is not None:
        return Resolved((literal,))
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        logger.info("cannot resolve %r: %s", host, exc)
        return Resolved(())
    seen: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen.setdefault(canonical_address(ipaddress.ip_address(sockaddr[0])), None)
    return Resolved(tuple(seen))


def file_resolver(path: str | os.PathLike[str]) -> Resolver:
    """A resolver answering from the JSON file at `path` (see the module docstring)."""
    source = Path(path)

    async def resolve(host: str, port: int) -> Resolved:
        table = json.loads(source.read_text())
        names = {canonical_target(k).name or str(canonical_target(k)): v for k, v in table.get("names", {}).items()}
        upstreams = frozenset(_endpoint(e) for e in table.get("upstreams", ()))
        if table.get("log"):
            with open(table["log"], "a", encoding="utf-8") as log:
                log.write(json.dumps(host) + "\n")
        literal = _literal(host)
        if literal is not None:
            return Resolved((literal,), upstreams)
        key = str(canonical_target(host))
        answers = tuple(canonical_address(ipaddress.ip_address(a)) for a in names.get(key, ()))
        return Resolved(answers, upstreams)

    return resolve


def own_addresses() -> frozenset[IPAddress]:
    """This host's interface addresses: a name pointing at them reaches local services."""
    found: set[IPAddress] = set()
    try:
        import psutil  # daemon only; keeps the lookup portable (Linux and macOS)

        for entries in psutil.net_if_addrs().values():
            for entry in entries:
                if entry.family in (socket.AF_INET, socket.AF_INET6):
                    try:
                        found.add(canonical_address(ipaddress.ip_address(entry.address.split("%", 1)[0])))
                    except ValueError:
                        continue
    except ImportError:  # pragma: no cover - psutil is a dependency; fall back to hostname lookup
        try:
            for info in socket.getaddrinfo(socket.gethostname(), None):
                found.add(canonical_address(ipaddress.ip_address(info[4][0])))
        except OSError:
            pass
    return frozenset(found)


def _literal(host: str) -> IPAddress | None:
    try:
        return canonical_target(host).address
    except ValueError:
        return None


def _endpoint(text: str) -> tuple[IPAddress, int]:
    host, _, port = text.rpartition(":")
    return canonical_address(ipaddress.ip_address(host.strip("[]"))), int(port)
