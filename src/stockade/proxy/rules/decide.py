"""Allow or deny one (host, port) for a session: pure functions, no mitmproxy.

Two questions, asked at two moments:
- `decide`: may the sandbox ask for this host and port at all? Judged on the
  name the client sent, before any DNS lookup (so a denied name is never
  resolved, which also closes DNS exfiltration through the proxy).
- `check_resolved`: now that an allowed name has been resolved, may we
  connect to these addresses? Refuses loopback, private, link-local,
  multicast, metadata and this host's own addresses unless the address is
  listed, so an allowed name cannot be pointed at the inside.

The rule syntax and its canonical form belong to `profiles.domains`; this
module only applies it to what arrives on the wire, where every spelling of
an address (2130706433, 0x7f.1, 0177.0.0.1, ::ffff:127.0.0.1) must land on
one canonical address.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stockade.profiles.addresses import address_kind, canonical_address
from stockade.profiles.domains import HostRule, IPAddress, canonical_name, parse_rule
from stockade.profiles.gitrefs import parse_ref_pattern
from stockade.profiles.httprules import HttpRule, judge, parse_http_rule, request_readings, suggested_rule

if TYPE_CHECKING:
    from stockade.proxy.control import SessionCredential

_V4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]*|[0-9]+)")

NO_ALLOW_RULE = "no allow rule matches"
IP_NOT_LISTED = "IP literal not listed"
INVALID_HOST = "invalid host name"
NETWORK_OFF = "network mode is none"


@dataclass(frozen=True)
class Decision:
    """The answer for one request, with what to tell the user."""

    allowed: bool
    rule: str  # the rule that decided (`allow "x"`, `deny "y"`) or the reason
    hint: str = ""  # the exact TOML line to add under [network], "" when adding cannot help
    host: str = ""  # canonical spelling of the host that was judged


@dataclass(frozen=True)
class Target:
    """A host as sent by a client, canonicalised: a name or an address, never both."""

    name: str = ""
    address: IPAddress | None = None

    def __str__(self) -> str:
        return self.name if self.address is None else str(self.address)


@dataclass(frozen=True)
class HttpTable:
    """One [network.http."HOST"] table: the host rule it is for, and the requests it allows and denies."""

    host: HostRule
    allow: tuple[HttpRule, ...]
    deny: tuple[HttpRule, ...]
    push: tuple[str, ...] = ()  # ref patterns a git push may update (profiles/gitrefs.py)


class Secret:
    """One credential of a session, as the daemon keeps it. Its repr hides the value."""

    __slots__ = ("name", "placeholder", "value", "hosts", "header", "query")

    def __init__(self, credential: SessionCredential) -> None:
        self.name = credential.name
        self.placeholder = credential.placeholder
        self.value = credential.value
        self.hosts: tuple[HostRule, ...] = tuple(parse_rule(host) for host in credential.hosts)
        self.header = credential.header.lower()  # "" when no header may carry it
        self.query = credential.query  # "" when no query parameter may carry it

    def goes_to(self, target: Target, port: int) -> bool:
        return any(host_matches(rule, target, port) for rule in self.hosts)

    def __repr__(self) -> str:
        return f"Secret({self.name!r})"


@dataclass(frozen=True)
class SessionRules:
    """A session's network rules, parsed once at registration."""

    allow: tuple[HostRule, ...] = ()
    deny: tuple[HostRule, ...] = ()
    mode: str = "allowlist"  # "allowlist" | "open" | "none"
    http: tuple[HttpTable, ...] = ()
    secrets: tuple[Secret, ...] = ()  # the session's credentials (proxy/filter/placeholders.py); their hosts' TLS is terminated too

    @classmethod
    def parse(cls, allow: Iterable[str], deny: Iterable[str], mode: str = "allowlist", http: Iterable[Sequence[Any]] = ()) -> SessionRules:
        """Parse canonical rule strings from `profiles`; ValueError names the bad entry."""
        if mode not in ("allowlist", "open", "none"):
            raise ValueError(f"unknown network mode {mode!r} (expected allowlist, open or none)")
        tables = []
        for host, allow_rules, deny_rules, *more in http:  # (host, allow, deny) or (host, allow, deny, push)
            rule = parse_rule(host)
            if rule.network is not None:
                raise ValueError(f"HTTP rules name hosts, not addresses: {host!r}")
            push = tuple(parse_ref_pattern(p) for p in (more[0] if more else ()))
            tables.append(HttpTable(rule, tuple(parse_http_rule(r) for r in allow_rules), tuple(parse_http_rule(r) for r in deny_rules), push))
        return cls(
            allow=tuple(_normalise_rule(parse_rule(r)) for r in allow),
            deny=tuple(_normalise_rule(parse_rule(r)) for r in deny),
            mode=mode,
            http=tuple(tables),
        )


def parse_ipv4_loose(text: str) -> ipaddress.IPv4Address | None:
    """Parse IPv4 the way inet_aton does (1-4 parts, hex, octal), or None.

    Clients hand such spellings to the resolver, which turns 2130706433,
    0x7f.1 and 0177.0.0.1 into 127.0.0.1; the filter must see the same address.
    """
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        if not _NUMBER.fullmatch(part):
            return None
        if part[:2].lower() == "0x":
            values.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not set(part) <= set("01234567"):
                return None
            values.append(int(part, 8))
        else:
            values.append(int(part))
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = last
    for i, value in enumerate(head):
        number |= value << (24 - 8 * i)
    return ipaddress.IPv4Address(number)


def canonical_target(host: str) -> Target:
    """Canonicalise a host from a request line, CONNECT or SNI; ValueError if it is no valid host."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return Target(address=canonical_address(ipaddress.ip_address(text)))
        except ValueError as exc:
            raise ValueError(f"{host!r} is not a valid IPv6 address") from exc
    text = text.rstrip(".")
    last_label = text.rsplit(".", 1)[-1]
    if _NUMBER.fullmatch(last_label):
        # A name whose last label is a number is an IPv4 spelling (no TLD is numeric).
        address = parse_ipv4_loose(text)
        if address is None:
            raise ValueError(f"{host!r} is not a valid IPv4 address")
        return Target(address=address)
    return Target(name=canonical_name(text))


def decide(rules: SessionRules, host: str, port: int) -> Decision:
    """May this session ask for host:port? Deny rules first, then allow rules."""
    try:
        target = canonical_target(host)
    except ValueError:
        return Decision(False, INVALID_HOST, "", _printable(host))
    shown = str(target)
    if not 0 < port < 65536:
        return Decision(False, f"invalid port {port}", "", shown)
    if rules.mode == "none":
        return Decision(False, NETWORK_OFF, "", shown)
    for rule in rules.deny:
        if _matches(rule, target, port):
            return Decision(False, f'deny "{rule}"', "", shown)
    if rules.mode == "open":
        return Decision(True, 'mode "open"', "", shown)
    for rule in rules.allow:
        if _matches(rule, target, port):
            return Decision(True, f'allow "{rule}"', "", shown)
    if target.address is not None:  # a local or special address: only this port, not every service on it
        entry = shown if address_kind(target.address) is None else endpoint(target.address, port)
        return Decision(False, IP_NOT_LISTED, allow_line(entry), shown)
    if any(_matches(HostRule(r.host, r.wildcard, r.network), target, port) for r in rules.allow):
        # Listed for other ports only: suggest exactly this port, not every port.
        return Decision(False, f"no allow rule matches port {port}", allow_line(f"{shown}:{port}"), shown)
    return Decision(False, NO_ALLOW_RULE, allow_line(shown), shown)


def inspected(rules: SessionRules, host: str, port: int) -> tuple[HttpTable, ...]:
    """The HTTP tables for host:port (several may match: "*.example.com" and "api.example.com");
    when there are any, the daemon terminates the tunnel's TLS and judges each request."""
    if not rules.http:
        return ()
    try:
        target = canonical_target(host)
    except ValueError:
        return ()
    return tuple(table for table in rules.http if _matches(table.host, target, port))


# Ports whose tunnels must carry TLS or HTTP whatever the rules say: what is allowed there is judged
# as TLS (the SNI) or HTTP (the requests), and raw TCP would slip past both checks.
HTTP_PORTS = (80, 443)


def raw_tcp_allowed(rules: SessionRules, host: str, port: int) -> bool:
    """May a CONNECT tunnel to host:port (already allowed) carry raw TCP? (Tunnels lets only SSH use it.)

    Only when an allow rule names this very port (`github.com:22`; a rule without a port allows
    TLS and HTTP only), the port is not an HTTP one and the host has no HTTP rules on any port
    (its requests are judged one by one; raw bytes could carry any) and no credential goes to it
    on any port (every answer of a credential's host is masked; an ssh session's cannot be). The
    same in `mode = "open"`: open lets any host be asked for, and raw TCP still needs its
    `host:port` in `allow`.
    """
    if port in HTTP_PORTS or rules.mode == "none" or has_http_rules(rules, host) or has_credentials(rules, host):
        return False
    try:
        target = canonical_target(host)
    except ValueError:
        return False
    if any(_matches(rule, target, port) for rule in rules.deny):
        return False
    return any(rule.port == port and _matches(rule, target, port) for rule in rules.allow)


def has_http_rules(rules: SessionRules, host: str) -> bool:
    """Whether a [network.http."HOST"] table names this host, on any port."""
    try:
        target = canonical_target(host)
    except ValueError:
        return False
    return any(_matches(HostRule(t.host.host, t.host.wildcard, t.host.network), target, 0) for t in rules.http)


def has_credentials(rules: SessionRules, host: str) -> bool:
    """Whether a credential of the session goes to this host, on any port."""
    if not rules.secrets:
        return False
    try:
        target = canonical_target(host)
    except ValueError:
        return False
    return any(_matches(_normalise_rule(HostRule(h.host, h.wildcard, h.network)), target, 0) for secret in rules.secrets for h in secret.hosts)


def decide_request(tables: tuple[HttpTable, ...], host: str, method: str, path: str, overrides: tuple[tuple[str, str], ...] = ()) -> Decision:
    """One request to a host with HTTP rules: every matching table's deny rules first, then their allow rules.

    `overrides` are the (where, method) a server may act on instead of the request line's method
    (X-HTTP-Method-Override and its kin, see requests.py): each is judged as well, so an allowed
    POST cannot become a DELETE the rules refuse."""
    decision = _request_decision(tables, host, method, path)
    for where, other in overrides:
        if not decision.allowed:
            break
        instead = _request_decision(tables, host, other, path)
        if not instead.allowed:
            decision = Decision(False, f"{instead.rule} (asked by {where})", instead.hint, host)
    return decision


def _request_decision(tables: tuple[HttpTable, ...], host: str, method: str, path: str) -> Decision:
    if is_push(path):
        return _push_decision(tables, host, method, path)
    allow = tuple(rule for table in tables for rule in table.allow)
    deny = tuple(rule for table in tables for rule in table.deny)
    allowed, why = judge(allow, deny, method, path)
    if allowed:
        return Decision(True, f"http {why}", "", host)
    if why.startswith("deny "):
        return Decision(False, f"http {why}", "", host)
    if why.startswith("no "):
        shown = f"{method.upper()} {path.split('?', 1)[0][:200]}"
        return Decision(False, f"{why.removesuffix(' it')} {shown}", http_line(tables[0].host, suggested_rule(method, path)), host)
    return Decision(False, f"refused: {why}", "", host)


GIT_PUSH = "git-receive-pack"
PUSH_PENDING = "http push (its refs are judged as its body comes)"
_ANY_REQUEST = parse_http_rule("* /**")


def is_push(path: str) -> bool:
    """Whether a request to a host with HTTP rules is a git push (smart HTTP's `.../git-receive-pack`),
    in any reading a server may give its path: such a request is judged by the refs it updates."""
    readings = request_readings(path)
    if isinstance(readings, str):
        return False  # refused whatever it is
    for segments in readings:
        last = [part for part in segments if part][-1:]
        if last and last[0].casefold() == GIT_PUSH:
            return True
    return False


def push_patterns(tables: tuple[HttpTable, ...]) -> tuple[str, ...]:
    """The ref patterns of every table that matched a host: a push may update what any of them covers."""
    return tuple(dict.fromkeys(pattern for table in tables for pattern in table.push))


def _push_decision(tables: tuple[HttpTable, ...], host: str, method: str, path: str) -> Decision:
    """A git push: refused by a deny rule (or a path servers read in different ways) as any request; else
    let through to have its refs judged from its body (gitpush.py) against the tables' `push` patterns,
    which alone allow a push: an allow rule such as "* /**" does not."""
    deny = tuple(rule for table in tables for rule in table.deny)
    allowed, why = judge((_ANY_REQUEST,), deny, method, path)
    if not allowed:
        return Decision(False, f"http {why}" if why.startswith("deny ") else f"refused: {why}", "", host)
    if method.upper() != "POST":
        return Decision(False, f"refused: {method.upper()[:20]} to {GIT_PUSH} (a git push is a POST)", "", host)
    return Decision(True, PUSH_PENDING, "", host)


def push_line(host: HostRule, ref: str) -> str:
    """Where a refused push's ref goes: the table's header and the push entry to add."""
    return f"[network.http.{json.dumps(str(host))}] push = [{json.dumps(ref)}]"


def http_line(host: HostRule, rule: str) -> str:
    """Where a refused request's rule goes: the table's header and the allow entry to add."""
    return f"[network.http.{json.dumps(str(host))}] allow = [{json.dumps(rule)}]"


def check_resolved(
    rules: SessionRules,
    host: str,
    port: int,
    addresses: Iterable[IPAddress],
    own_addresses: Iterable[IPAddress] = (),
    exempt: Iterable[tuple[IPAddress, int]] = (),
) -> Decision:
    """May we connect to what `host` resolved to? Every address must pass.

    `exempt` lists (address, port) endpoints that are known upstreams (the
    test resolver's origins), never set in production.
    """
    own = {canonical_address(a) for a in own_addresses}
    exempt_set = {(canonical_address(a), p) for a, p in exempt}
    resolved = [canonical_address(a) for a in addresses]
    if not resolved:
        return Decision(False, f"{host} did not resolve", "", host)
    is_literal = len(resolved) == 1 and host == str(resolved[0])
    # `localhost` named in an allow entry means the host's loopback (bwrap/parts/forwards.py forwards it): its
    # loopback addresses pass; any other address it resolved to is judged as any name's
    named_loopback = host == "localhost" and any(
        r.host == "localhost" and not r.wildcard and r.network is None and r.port in (None, port) for r in rules.allow
    )
    for address in resolved:
        where = f"{address}" if is_literal else f"{host} resolves to {address}"
        for rule in rules.deny:
            if rule.network is not None and _matches(rule, Target(address=address), port):
                return Decision(False, f'deny "{rule}" ({where})', "", host)
        if (address, port) in exempt_set:
            continue
        kind = address_kind(address) or ("this host's own address" if address in own else None)
        if kind is None or (kind == "loopback" and named_loopback):
            continue
        if any(r.network is not None and _matches(r, Target(address=address), port) for r in rules.allow):
            continue
        reason = f"{address} is {kind}" if is_literal else f"{where} ({kind})"
        return Decision(False, reason, allow_line(endpoint(address, port)), host)  # the address alone opens every port
    return Decision(True, "resolved addresses are public or listed", "", host)


def endpoint(address: IPAddress, port: int) -> str:
    """An address and port as a rule spells them."""
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def allow_line(entry: str) -> str:
    """The exact line that would allow `entry`, ready to paste under [network]."""
    return f"allow = [{json.dumps(entry)}]"


def host_matches(rule: HostRule, target: Target, port: int) -> bool:
    """Does a host rule of the policy cover this canonical target and port?"""
    return _matches(_normalise_rule(rule), target, port)


def _matches(rule: HostRule, target: Target, port: int) -> bool:
    if rule.port is not None and rule.port != port:
        return False
    if rule.network is not None:
        address = target.address
        return address is not None and address.version == rule.network.version and address in rule.network
    if target.address is not None:
        return False
    if rule.wildcard:
        return target.name.endswith("." + rule.host)
    return target.name == rule.host


def _normalise_rule(rule: HostRule) -> HostRule:
    """IPv4-mapped IPv6 rules become IPv4 rules, so they meet canonical addresses."""
    net = rule.network
    if net is not None and net.version == 6 and net.prefixlen >= 96 and net.subnet_of(_V4_MAPPED):  # type: ignore[arg-type]
        v4 = ipaddress.IPv4Network((int(net.network_address) & 0xFFFFFFFF, net.prefixlen - 96))
        return HostRule(network=v4, port=rule.port)
    return rule


def _printable(host: str) -> str:
    """A rejected host as text safe for logs and one-line messages (escapes control bytes)."""
    return host.encode("unicode_escape").decode("ascii")[:255]
