"""Domain and address rules of `[network]`: parsing into a canonical form.

One canonical spelling per rule so that merging, narrowing, explaining and
the proxy's matcher all agree: lower-case A-labels, no trailing dot, IPs in
`ipaddress` form, CIDR blocks normalised.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Any

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class HostRule:
    """One allow/deny entry: a name, a `*.` wildcard, an IP literal or a CIDR block."""

    host: str = ""  # canonical name without "*." ("" for address rules)
    wildcard: bool = False  # "*.host": any subdomain, never the apex
    network: IPNetwork | None = None  # IP literal (a /32 or /128) or CIDR block
    port: int | None = None  # None: any port

    def __str__(self) -> str:
        if self.network is not None:
            single = self.network.num_addresses == 1
            text = str(self.network.network_address) if single else str(self.network)
            if self.port is None:
                return text
            return f"[{text}]:{self.port}" if self.network.version == 6 else f"{text}:{self.port}"
        name = f"*.{self.host}" if self.wildcard else self.host
        return name if self.port is None else f"{name}:{self.port}"

    def covers(self, other: HostRule) -> bool:
        """True when everything `other` matches, this rule matches too (for narrowing)."""
        if self.port is not None and self.port != other.port:
            return False
        if self.network is not None:
            return other.network is not None and other.network.version == self.network.version and other.network.subnet_of(self.network)  # type: ignore[arg-type]
        if other.network is not None:
            return False
        if not self.wildcard:
            return not other.wildcard and other.host == self.host
        return other.host.endswith("." + self.host) or (other.wildcard and other.host == self.host)


def canonical_name(name: str) -> str:
    """Lower-case A-label form of a host name, trailing dot removed; ValueError if malformed."""
    text = name.strip().rstrip(".")
    if not text:
        raise ValueError("empty host name")
    ascii_name = text if text.isascii() else _a_label(name, text)
    ascii_name = ascii_name.lower()
    labels = ascii_name.split(".")
    if len(ascii_name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{name!r} is not a valid host name")
    return ascii_name


def _a_label(name: str, text: str) -> str:
    """IDNA 2008 with UTS 46 mapping, as browsers and curl resolve names (Python's own "idna"
    codec is IDNA 2003: it maps faß.de to fass.de, another domain)."""
    import idna  # only for non-ASCII names

    try:
        return idna.encode(text, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise ValueError(f"{name!r} is not a valid international domain name ({exc})") from exc


def public_suffix(name: str) -> bool:
    """Whether anyone can register names directly under `name` (com, co.uk, github.io,
    s3.amazonaws.com): a wildcard on it would allow hosts an attacker can set up."""
    return bool(_suffix_list().is_public(name))


@functools.cache
def _suffix_list() -> Any:
    from publicsuffixlist import PublicSuffixList  # only for wildcard rules; the list is bundled (~40 ms to load)

    return PublicSuffixList(accept_unknown=False)


def _split_port(text: str) -> tuple[str, int | None]:
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"{text!r}: missing ']' after an IPv6 address")
        host, rest = text[1:end], text[end + 1 :]
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise ValueError(f"{text!r}: expected ':port' after ']'")
        return host, _parse_port(rest[1:], text)
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, _parse_port(port, text)
    return text, None  # no port, or a bare IPv6 address


def _parse_port(port: str, whole: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{whole!r}: port must be a number from 1 to 65535")
    return int(port)


def parse_rule(text: str) -> HostRule:
    """Parse one `[network]` allow/deny entry; ValueError explains what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty network rule")
    raw = text.strip()
    if "://" in raw:
        raise ValueError(_url_message(raw))
    if "/" in raw:
        try:
            return HostRule(network=ipaddress.ip_network(raw, strict=False))
        except ValueError as exc:
            head = raw.split("/", 1)[0]
            if head and not re.fullmatch(r"[0-9.:]+", head):
                raise ValueError(f"{raw!r}: rules name hosts, not paths: write {head!r}") from None
            raise ValueError(f'{raw!r} is not a valid CIDR block (e.g. "10.1.0.0/16")') from exc
    host, port = _split_port(raw)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        return HostRule(network=ipaddress.ip_network(address), port=port)
    if host == "*" or host.startswith("*") and not host.startswith("*."):
        raise ValueError(f'{raw!r}: a wildcard must be a whole first label such as "*.example.com" (use mode = "open" for everything)')
    wildcard = host.startswith("*.")
    name = host[2:] if wildcard else host
    if "*" in name:
        raise ValueError(f"{raw!r}: '*' is only allowed as the first label (\"*.example.com\")")
    if re.fullmatch(r"[0-9.]+", name.rstrip(".")):
        raise ValueError(f"{raw!r} is not a valid IPv4 address")
    host_name = canonical_name(name)
    if wildcard and public_suffix(host_name):
        raise ValueError(
            f"{raw!r}: {host_name} is a public suffix (anyone can register a name under it), so this would allow hosts "
            f"an attacker sets up; name each host you need instead"
        )
    return HostRule(host=host_name, wildcard=wildcard, port=port)


def _url_message(raw: str) -> str:
    """What to write instead of a URL: its host (and port, when the URL names one)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(raw)
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host:
        return f'{raw!r} is a URL: rules name hosts ("pypi.org"), not URLs'
    shown = f"{host}:{port}" if port else host
    return f"{raw!r} is a URL: rules name hosts; write {shown!r} (a scheme or path cannot be matched here)"


def overlaps(one: HostRule, other: HostRule) -> bool:
    """Whether some host:port matches both name rules (HTTP tables name hosts, never addresses)."""
    if one.port is not None and other.port is not None and one.port != other.port:
        return False
    if one.network is not None or other.network is not None:
        return one.network is not None and other.network is not None and one.network.overlaps(other.network)
    if one.wildcard and other.wildcard:
        return one.host == other.host or one.host.endswith("." + other.host) or other.host.endswith("." + one.host)
    if one.wildcard:
        return other.host.endswith("." + one.host)
    if other.wildcard:
        return one.host.endswith("." + other.host)
    return one.host == other.host
