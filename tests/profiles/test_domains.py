"""Network rule spellings: one canonical form, and clear refusals."""

from __future__ import annotations

import pytest

from stockade.profiles.domains import parse_rule

CANONICAL = [
    pytest.param("Example.COM.", "example.com", id="case-and-trailing-dot"),
    pytest.param("*.Example.com", "*.example.com", id="wildcard"),
    pytest.param("github.com:443", "github.com:443", id="port"),
    pytest.param("bücher.test", "xn--bcher-kva.test", id="idn-a-label"),
    pytest.param("аllowed.test", "xn--llowed-2nf.test", id="cyrillic-lookalike-punycode"),
    pytest.param("192.0.2.1", "192.0.2.1", id="ipv4"),
    pytest.param("192.0.2.1:80", "192.0.2.1:80", id="ipv4-port"),
    pytest.param("2001:DB8::0:1", "2001:db8::1", id="ipv6-canonical"),
    pytest.param("[2001:db8::1]:443", "[2001:db8::1]:443", id="ipv6-port"),
    pytest.param("10.1.2.3/16", "10.1.0.0/16", id="cidr-normalised"),
    pytest.param("2001:db8::/32", "2001:db8::/32", id="cidr-v6"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical(text: str, canonical: str) -> None:
    assert str(parse_rule(text)) == canonical


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("*", id="star"),
        pytest.param("*example.com", id="star-glued"),
        pytest.param("a.*.com", id="inner-star"),
        pytest.param("bad_label-.com", id="label-ends-hyphen"),
        pytest.param("a" * 64 + ".com", id="label-too-long"),
        pytest.param("x.test:0", id="port-zero"),
        pytest.param("x.test:http", id="port-name"),
        pytest.param("1.2.3", id="short-ipv4"),
        pytest.param("[::1", id="open-bracket"),
        pytest.param("300.1.1.1/8", id="bad-cidr"),
    ],
)
def test_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rule(text)


@pytest.mark.parametrize(
    ("wide", "narrow", "covered"),
    [
        pytest.param("*.example.com", "api.example.com", True, id="wildcard-covers-sub"),
        pytest.param("*.example.com", "example.com", False, id="wildcard-not-apex"),
        pytest.param("*.example.com", "*.a.example.com", True, id="wildcard-covers-deeper-wildcard"),
        pytest.param("example.com", "example.com:443", True, id="any-port-covers-port"),
        pytest.param("example.com:443", "example.com", False, id="port-does-not-cover-any"),
        pytest.param("10.0.0.0/8", "10.1.2.3", True, id="cidr-covers-ip"),
        pytest.param("10.0.0.0/8", "example.com", False, id="cidr-not-name"),
        pytest.param("example.com", "10.0.0.1", False, id="name-not-ip"),
    ],
)
def test_covers(wide: str, narrow: str, covered: bool) -> None:
    assert parse_rule(wide).covers(parse_rule(narrow)) is covered
