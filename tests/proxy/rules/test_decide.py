from __future__ import annotations

import ipaddress

import pytest

from stockade.proxy.rules.decide import (
    IP_NOT_LISTED,
    NO_ALLOW_RULE,
    Decision,
    SessionRules,
    allow_line,
    canonical_target,
    check_resolved,
    decide,
    parse_ipv4_loose,
    raw_tcp_allowed,
)

RULES = SessionRules.parse(
    allow=[
        "allowed.test",
        "*.wild.test",
        "github.com:443",
        "bücher.test",
        "198.51.100.7",
        "10.1.0.0/16",
        "[2001:db8::5]:443",
        "::ffff:192.0.2.9",
    ],
    deny=["blocked.wild.test", "10.1.2.0/24"],
)
ip = ipaddress.ip_address


@pytest.mark.parametrize(
    "host, port, allowed, rule",
    [
        pytest.param("allowed.test", 443, True, 'allow "allowed.test"', id="exact name"),
        pytest.param("Allowed.TEST.", 80, True, 'allow "allowed.test"', id="case and trailing dot"),
        pytest.param("ALLOWED.test..", 80, True, 'allow "allowed.test"', id="two trailing dots"),
        pytest.param("a.wild.test", 443, True, 'allow "*.wild.test"', id="wildcard subdomain"),
        pytest.param("x.y.wild.test", 443, True, 'allow "*.wild.test"', id="wildcard deep subdomain"),
        pytest.param("wild.test", 443, False, NO_ALLOW_RULE, id="wildcard is not the apex"),
        pytest.param("blocked.wild.test", 443, False, 'deny "blocked.wild.test"', id="deny beats wildcard"),
        pytest.param("BLOCKED.wild.test.", 443, False, 'deny "blocked.wild.test"', id="deny: case and dot"),
        pytest.param("Blocked.Wild.Test", 80, False, 'deny "blocked.wild.test"', id="deny: mixed case"),
        pytest.param("allowed.test.evil.test", 443, False, NO_ALLOW_RULE, id="suffix look-alike"),
        pytest.param("evilallowed.test", 443, False, NO_ALLOW_RULE, id="prefix look-alike"),
        pytest.param("аllowed.test", 443, False, NO_ALLOW_RULE, id="cyrillic a look-alike"),
        pytest.param("xn--llowed-3ve.test", 443, False, NO_ALLOW_RULE, id="cyrillic look-alike as A-label"),
        pytest.param("BÜCHER.test", 443, True, 'allow "xn--bcher-kva.test"', id="IDN U-label"),
        pytest.param("xn--bcher-kva.test", 443, True, 'allow "xn--bcher-kva.test"', id="IDN A-label"),
        pytest.param("github.com", 443, True, 'allow "github.com:443"', id="host:port rule, that port"),
        pytest.param("github.com", 22, False, "no allow rule matches port 22", id="host:port rule, other port"),
        pytest.param("denied.test", 443, False, NO_ALLOW_RULE, id="unlisted name"),
        pytest.param("a\nb.test", 80, False, "invalid host name", id="newline in name"),
        pytest.param('a\n{"decision":"allow"}.test', 80, False, "invalid host name", id="json injection"),
        pytest.param("a\x1b]52;c;aGk=\x07.test", 443, False, "invalid host name", id="terminal escape"),
        pytest.param("[red]x[/red].test", 80, False, "invalid host name", id="markup"),
        pytest.param("", 80, False, "invalid host name", id="empty"),
        pytest.param("allowed.test", 0, False, "invalid port 0", id="port zero"),
        pytest.param("allowed.test", 70000, False, "invalid port 70000", id="port too large"),
    ],
)
def test_decide_names(host: str, port: int, allowed: bool, rule: str) -> None:
    decision = decide(RULES, host, port)
    assert (decision.allowed, decision.rule) == (allowed, rule)


@pytest.mark.parametrize(
    "host, port, allowed, rule, shown",
    [
        pytest.param("198.51.100.7", 80, True, 'allow "198.51.100.7"', "198.51.100.7", id="listed v4"),
        pytest.param("203.0.113.7", 80, False, IP_NOT_LISTED, "203.0.113.7", id="unlisted v4"),
        pytest.param("127.0.0.1", 80, False, IP_NOT_LISTED, "127.0.0.1", id="loopback literal"),
        pytest.param("2130706433", 80, False, IP_NOT_LISTED, "127.0.0.1", id="decimal loopback"),
        pytest.param("0x7f.1", 80, False, IP_NOT_LISTED, "127.0.0.1", id="hex two-part loopback"),
        pytest.param("0177.0.0.1", 80, False, IP_NOT_LISTED, "127.0.0.1", id="octal loopback"),
        pytest.param("127.1", 80, False, IP_NOT_LISTED, "127.0.0.1", id="short loopback"),
        pytest.param("0x7f000001", 80, False, IP_NOT_LISTED, "127.0.0.1", id="hex loopback"),
        pytest.param("127.0.0.1.", 80, False, IP_NOT_LISTED, "127.0.0.1", id="loopback trailing dot"),
        pytest.param("3325256711", 80, True, 'allow "198.51.100.7"', "198.51.100.7", id="decimal spelling of a listed ip"),
        pytest.param("0xc6.0x33.0x64.0x7", 80, True, 'allow "198.51.100.7"', "198.51.100.7", id="hex spelling of a listed ip"),
        pytest.param("::ffff:198.51.100.7", 80, True, 'allow "198.51.100.7"', "198.51.100.7", id="mapped v6 of a listed v4"),
        pytest.param("[::ffff:127.0.0.1]", 80, False, IP_NOT_LISTED, "127.0.0.1", id="mapped v6 loopback"),
        pytest.param("::ffff:7f00:1", 80, False, IP_NOT_LISTED, "127.0.0.1", id="mapped v6 loopback in hex"),
        pytest.param("192.0.2.9", 80, True, 'allow "192.0.2.9"', "192.0.2.9", id="mapped v6 rule meets v4"),
        pytest.param("10.1.9.9", 5432, True, 'allow "10.1.0.0/16"', "10.1.9.9", id="cidr allow"),
        pytest.param("10.1.2.3", 80, False, 'deny "10.1.2.0/24"', "10.1.2.3", id="cidr deny beats cidr allow"),
        pytest.param("2001:db8::5", 443, True, 'allow "[2001:db8::5]:443"', "2001:db8::5", id="v6 with port"),
        pytest.param("[2001:DB8:0::5]", 443, True, 'allow "[2001:db8::5]:443"', "2001:db8::5", id="v6 other spelling"),
        pytest.param("2001:db8::5", 80, False, IP_NOT_LISTED, "2001:db8::5", id="v6 other port"),
        pytest.param("2001:db8::1", 443, False, IP_NOT_LISTED, "2001:db8::1", id="unlisted v6"),
        pytest.param("fe80::1%eth0", 80, False, IP_NOT_LISTED, "fe80::1", id="v6 scope id"),
        pytest.param("1.2.3.4.5", 80, False, "invalid host name", "1.2.3.4.5", id="five parts"),
        pytest.param("256.1.1.1", 80, False, "invalid host name", "256.1.1.1", id="octet too large"),
        pytest.param("08.1.1.1", 80, False, "invalid host name", "08.1.1.1", id="bad octal"),
        pytest.param("example.0x10", 80, False, "invalid host name", "example.0x10", id="numeric last label"),
        pytest.param("[::1", 80, False, "invalid host name", "[::1", id="broken brackets"),
    ],
)
def test_decide_addresses(host: str, port: int, allowed: bool, rule: str, shown: str) -> None:
    decision = decide(RULES, host, port)
    assert (decision.allowed, decision.rule, decision.host) == (allowed, rule, shown)


@pytest.mark.parametrize(
    "host, port, hint",
    [
        pytest.param("denied.test", 443, 'allow = ["denied.test"]', id="name"),
        pytest.param("Denied.Test.", 443, 'allow = ["denied.test"]', id="name in canonical form"),
        pytest.param("github.com", 22, 'allow = ["github.com:22"]', id="narrow to the port"),
        pytest.param("203.0.113.7", 80, 'allow = ["203.0.113.7"]', id="ip literal, documentation"),
        pytest.param("93.184.216.34", 80, 'allow = ["93.184.216.34"]', id="ip literal"),
        pytest.param("2130706433", 80, 'allow = ["127.0.0.1:80"]', id="ip literal, canonical, loopback: with its port"),
        pytest.param("2001:db8::1", 443, 'allow = ["2001:db8::1"]', id="v6 literal, documentation"),
        pytest.param("10.0.0.5", 443, 'allow = ["10.0.0.5:443"]', id="private literal: with its port"),
        pytest.param("2606:4700::1", 443, 'allow = ["2606:4700::1"]', id="v6 literal"),
        pytest.param("blocked.wild.test", 443, "", id="explicit deny: adding cannot help"),
        pytest.param("a\nb", 443, "", id="invalid name: no hint"),
    ],
)
def test_hints(host: str, port: int, hint: str) -> None:
    assert decide(RULES, host, port).hint == hint


def test_invalid_host_is_shown_escaped() -> None:
    decision = decide(RULES, "a\x1b]52\n.test", 80)
    assert decision.host == "a\\x1b]52\\n.test"
    assert "\n" not in decision.host and "\x1b" not in decision.host


@pytest.mark.parametrize(
    "mode, host, allowed, rule",
    [
        pytest.param("open", "anything.test", True, 'mode "open"', id="open allows names"),
        pytest.param("open", "203.0.113.7", True, 'mode "open"', id="open allows literals"),
        pytest.param("open", "blocked.wild.test", False, 'deny "blocked.wild.test"', id="open keeps deny"),
        pytest.param("none", "allowed.test", False, "network mode is none", id="none denies all"),
        pytest.param("allowlist", "allowed.test", True, 'allow "allowed.test"', id="allowlist"),
    ],
)
def test_modes(mode: str, host: str, allowed: bool, rule: str) -> None:
    rules = SessionRules.parse(["allowed.test"], ["blocked.wild.test"], mode)
    assert (decide(rules, host, 443).allowed, decide(rules, host, 443).rule) == (allowed, rule)


def test_empty_allow_means_nothing() -> None:
    assert not decide(SessionRules.parse([], []), "allowed.test", 443).allowed


@pytest.mark.parametrize(
    "allow, deny, mode, message",
    [
        pytest.param(["*"], [], "allowlist", "wildcard", id="bare star"),
        pytest.param(["bad host"], [], "allowlist", "valid host", id="space"),
        pytest.param([], ["10.0.0.0/99"], "allowlist", "CIDR", id="bad cidr"),
        pytest.param([], [], "wide-open", "unknown network mode", id="bad mode"),
    ],
)
def test_parse_rejects(allow: list[str], deny: list[str], mode: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionRules.parse(allow, deny, mode)


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("2130706433", "127.0.0.1", id="one part"),
        pytest.param("127.1", "127.0.0.1", id="two parts"),
        pytest.param("127.0.1", "127.0.0.1", id="three parts"),
        pytest.param("0x7f.0.0.0x1", "127.0.0.1", id="hex parts"),
        pytest.param("0X7F.1", "127.0.0.1", id="upper-case hex"),
        pytest.param("0177.0.0.01", "127.0.0.1", id="octal parts"),
        pytest.param("0", "0.0.0.0", id="zero"),
        pytest.param("0x", "0.0.0.0", id="bare 0x"),
        pytest.param("4294967295", "255.255.255.255", id="max"),
        pytest.param("4294967296", None, id="too large"),
        pytest.param("1.16777216", None, id="two parts, tail too large"),
        pytest.param("1.2.3.4.5", None, id="five parts"),
        pytest.param("1..2", None, id="empty part"),
        pytest.param("09", None, id="bad octal digit"),
        pytest.param("1.2.3.٣", None, id="unicode digit"),
        pytest.param("a.b", None, id="letters"),
    ],
)
def test_parse_ipv4_loose(text: str, expected: str | None) -> None:
    result = parse_ipv4_loose(text)
    assert (str(result) if result is not None else None) == expected


@pytest.mark.parametrize(
    "host, addresses, allowed, rule",
    [
        pytest.param("a.wild.test", ["93.184.216.34"], True, "resolved addresses are public or listed", id="public"),
        pytest.param("rebind.wild.test", ["127.0.0.1"], False, "rebind.wild.test resolves to 127.0.0.1 (loopback)", id="rebind to loopback"),
        pytest.param("meta.wild.test", ["169.254.169.254"], False, "meta.wild.test resolves to 169.254.169.254 (cloud metadata)", id="metadata"),
        pytest.param("priv.wild.test", ["10.0.0.5"], False, "priv.wild.test resolves to 10.0.0.5 (private)", id="private"),
        pytest.param(
            "mixed.wild.test", ["93.184.216.34", "127.0.0.1"], False, "mixed.wild.test resolves to 127.0.0.1 (loopback)", id="any bad address refuses"
        ),
        pytest.param("v6.wild.test", ["::ffff:127.0.0.1"], False, "v6.wild.test resolves to 127.0.0.1 (loopback)", id="mapped loopback"),
        pytest.param("lan.wild.test", ["10.1.4.4"], True, "resolved addresses are public or listed", id="listed cidr"),
        pytest.param(
            "lan.wild.test", ["10.1.2.4"], False, 'deny "10.1.2.0/24" (lan.wild.test resolves to 10.1.2.4)', id="deny cidr applies after resolution"
        ),
        pytest.param(
            "own.wild.test", ["93.184.216.99"], False, "own.wild.test resolves to 93.184.216.99 (this host's own address)", id="own address"
        ),
        pytest.param("empty.wild.test", [], False, "empty.wild.test did not resolve", id="no address"),
        pytest.param("127.0.0.1", ["127.0.0.1"], False, "127.0.0.1 is loopback", id="literal in open mode"),
    ],
)
def test_check_resolved(host: str, addresses: list[str], allowed: bool, rule: str) -> None:
    decision = check_resolved(RULES, host, 443, [ip(a) for a in addresses], own_addresses=[ip("93.184.216.99")])
    assert (decision.allowed, decision.rule) == (allowed, rule)


def test_check_resolved_hint_names_the_address_and_port() -> None:
    decision = check_resolved(RULES, "rebind.wild.test", 80, [ip("127.0.0.1")])
    assert decision.hint == 'allow = ["127.0.0.1:80"]'  # the address alone would open every port
    assert check_resolved(RULES, "::1", 38082, [ip("::1")]).hint == 'allow = ["[::1]:38082"]'


@pytest.mark.parametrize(
    "allow, port, allowed",
    [
        pytest.param(["127.0.0.1"], 8080, True, id="address listed"),
        pytest.param(["127.0.0.0/8"], 8080, True, id="cidr listed"),
        pytest.param(["127.0.0.1:8080"], 8080, True, id="address and port listed"),
        pytest.param(["127.0.0.1:9090"], 8080, False, id="address listed for another port"),
        pytest.param(["::ffff:127.0.0.1"], 8080, True, id="listed as mapped v6"),
        pytest.param(["localhost"], 8080, False, id="a name rule does not list an address"),
    ],
)
def test_check_resolved_listed_addresses(allow: list[str], port: int, allowed: bool) -> None:
    rules = SessionRules.parse(allow + ["*.wild.test"], [])
    assert check_resolved(rules, "rebind.wild.test", port, [ip("127.0.0.1")]).allowed is allowed


@pytest.mark.parametrize(
    "exempt, allowed",
    [
        pytest.param([(ip("127.0.0.1"), 8443)], True, id="registered upstream"),
        pytest.param([(ip("127.0.0.1"), 9999)], False, id="upstream on another port"),
        pytest.param([], False, id="no upstreams"),
    ],
)
def test_check_resolved_test_upstreams(exempt: list[tuple[ipaddress.IPv4Address, int]], allowed: bool) -> None:
    assert check_resolved(RULES, "allowed.test", 8443, [ip("127.0.0.1")], exempt=exempt).allowed is allowed


def test_canonical_target() -> None:
    assert canonical_target("Allowed.TEST.").name == "allowed.test"
    assert str(canonical_target("[::ffff:10.0.0.1]")) == "10.0.0.1"
    with pytest.raises(ValueError):
        canonical_target("bad_host name")


def test_allow_line_escapes_quotes() -> None:
    assert allow_line('a"b') == 'allow = ["a\\"b"]'


def test_decision_is_frozen() -> None:
    with pytest.raises(AttributeError):
        Decision(True, "x").allowed = False  # type: ignore[misc]


def test_a_host_with_http_rules_is_inspected_and_each_request_judged() -> None:
    from stockade.proxy.rules.decide import decide_request, inspected

    rules = SessionRules.parse(
        ["api.test", "*.cdn.test"], [], "allowlist",
        [("api.test", ["GET /repos/**"], ["* /repos/x/admin"]), ("*.cdn.test", ["GET /**"], []), ("api.test:8443", ["POST /only"], [])],
    )  # fmt: skip
    assert inspected(rules, "plain.test", 443) == ()
    assert [str(t.host) for t in inspected(rules, "API.test.", 443)] == ["api.test"]
    assert [str(t.host) for t in inspected(rules, "api.test", 8443)] == ["api.test", "api.test:8443"]  # every table that matches
    tables = inspected(rules, "api.test", 443)
    assert decide_request(tables, "api.test", "GET", "/repos/a").rule == "http allow GET /repos/**"
    denied = decide_request(tables, "api.test", "GET", "/repos/x/admin")
    assert (denied.allowed, denied.rule, denied.hint) == (False, "http deny * /repos/x/admin", "")
    missing = decide_request(tables, "api.test", "PUT", "/users/me?x=1")
    assert (missing.allowed, missing.rule) == (False, "no HTTP rule allows PUT /users/me")
    assert missing.hint == '[network.http."api.test"] allow = ["PUT /users/me"]'
    odd = decide_request(tables, "api.test", "GET", "/repos/%2Fx")
    assert not odd.allowed and odd.rule.startswith("refused: ") and odd.hint == ""
    assert decide_request(inspected(rules, "api.test", 8443), "api.test", "POST", "/only").allowed


def test_http_rules_for_an_address_are_refused_at_registration() -> None:
    with pytest.raises(ValueError, match="not addresses"):
        SessionRules.parse(["10.0.0.1"], [], "allowlist", [("10.0.0.1", ["GET /"], [])])


def test_a_method_override_is_judged_as_well() -> None:
    """Servers honouring X-HTTP-Method-Override (and kin) act on that method: it must be allowed too."""
    from stockade.proxy.rules.decide import decide_request, inspected

    rules = SessionRules.parse(["api.test"], [], "allowlist", [("api.test", ["POST /repos/**", "GET /repos/**"], ["DELETE /repos/**"])])
    tables = inspected(rules, "api.test", 443)
    denied = decide_request(tables, "api.test", "POST", "/repos/a", (("X-HTTP-Method-Override", "DELETE"),))
    assert (denied.allowed, denied.rule) == (False, "http deny DELETE /repos/** (asked by X-HTTP-Method-Override)")
    missing = decide_request(tables, "api.test", "POST", "/repos/a", (("the _method parameter", "put"),))
    assert not missing.allowed and missing.hint == '[network.http."api.test"] allow = ["PUT /repos/a"]'
    assert decide_request(tables, "api.test", "POST", "/repos/a", (("X-HTTP-Method", "GET"),)).allowed  # control
    assert decide_request(tables, "api.test", "POST", "/repos/a").allowed


@pytest.mark.parametrize(
    "allow, deny, mode, http, target, expected",
    [
        (["github.com:22"], [], "allowlist", [], ("github.com", 22), True),
        (["GitHub.com.:22"], [], "allowlist", [], ("github.com", 22), True),
        (["github.com"], [], "allowlist", [], ("github.com", 22), False),  # no port named: TLS and HTTP only
        (["github.com:22"], [], "allowlist", [], ("github.com", 2222), False),
        (["*.example.com:22"], [], "allowlist", [], ("git.example.com", 22), True),
        (["*.example.com:22"], ["git.example.com"], "allowlist", [], ("git.example.com", 22), False),
        (["203.0.113.5:22"], [], "allowlist", [], ("203.0.113.5", 22), True),
        (["203.0.113.0/24"], [], "allowlist", [], ("203.0.113.5", 22), False),
        (["github.com:443"], [], "allowlist", [], ("github.com", 443), False),
        (["github.com:80"], [], "allowlist", [], ("github.com", 80), False),
        (["github.com:22"], [], "allowlist", [("github.com", ["GET /**"], [])], ("github.com", 22), False),
        (["github.com:22"], [], "allowlist", [("*.github.com", ["GET /**"], [])], ("github.com", 22), True),
        ([], [], "open", [], ("github.com", 22), False),  # open lets any host be asked for, not raw TCP
        (["github.com:22"], [], "open", [], ("github.com", 22), True),
        (["github.com:22"], [], "none", [], ("github.com", 22), False),
    ],
)
def test_raw_tcp_allowed(
    allow: list[str], deny: list[str], mode: str, http: list[tuple[str, list[str], list[str]]], target: tuple[str, int], expected: bool
) -> None:
    rules = SessionRules.parse(allow, deny, mode, http)
    assert raw_tcp_allowed(rules, *target) is expected


@pytest.mark.parametrize(
    "credential_hosts, target, expected",
    [
        (("git.test",), ("git.test", 22), False),  # a credential's host: its answers are masked, an ssh session's cannot be
        (("git.test:443",), ("git.test", 22), False),  # on any port
        (("*.test",), ("git.test", 22), False),
        (("api.test",), ("git.test", 22), True),  # the control: a credential for another host changes nothing
    ],
)
def test_no_raw_tcp_to_a_credential_host(credential_hosts: tuple[str, ...], target: tuple[str, int], expected: bool) -> None:
    from dataclasses import replace

    from stockade.proxy.control import SessionCredential
    from stockade.proxy.rules.decide import Secret

    rules = SessionRules.parse(["git.test:22", "api.test"], [])
    secrets = (Secret(SessionCredential("T", "stockade-placeholder-t", "value", credential_hosts, "Authorization")),)
    assert raw_tcp_allowed(replace(rules, secrets=secrets), *target) is expected
    assert raw_tcp_allowed(rules, *target) is True


def test_an_allowed_localhost_reaches_the_hosts_loopback_and_nothing_else() -> None:
    """`localhost:PORT` (forwarded to every client inside, bwrap/parts/forwards.py) resolved to a loopback
    address, which the resolution check refused: the entry never worked."""
    rules = SessionRules.parse(["localhost:8080"], [])
    assert check_resolved(rules, "localhost", 8080, [ip("127.0.0.1"), ip("::1")]).allowed
    assert not check_resolved(rules, "localhost", 8081, [ip("127.0.0.1")]).allowed  # another port
    assert not check_resolved(rules, "localhost", 8080, [ip("10.0.0.5")]).allowed  # a localhost that is not loopback
    assert not check_resolved(SessionRules.parse(["*.localhost"], []), "localhost", 8080, [ip("127.0.0.1")]).allowed
