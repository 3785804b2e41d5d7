"""Which addresses a run reaches only when its policy lists them (profiles/addresses.py)."""

from __future__ import annotations

import ipaddress

import pytest

from stockade.profiles.addresses import address_kind, canonical_address, network_kind


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@pytest.mark.parametrize(
    "address, kind",
    [
        pytest.param("127.0.0.1", "loopback", id="v4 loopback"),
        pytest.param("127.9.9.9", "loopback", id="v4 loopback range"),
        pytest.param("::1", "loopback", id="v6 loopback"),
        pytest.param("::ffff:127.0.0.1", "loopback", id="mapped loopback"),
        pytest.param("2002:7f00:1::", "loopback", id="6to4 loopback"),
        pytest.param("64:ff9b::a00:5", "private", id="nat64 private"),
        pytest.param("169.254.169.254", "cloud metadata", id="aws metadata"),
        pytest.param("fd00:ec2::254", "cloud metadata", id="aws v6 metadata"),
        pytest.param("100.100.100.200", "cloud metadata", id="alibaba metadata"),
        pytest.param("169.254.1.1", "link-local", id="v4 link-local"),
        pytest.param("fe80::1", "link-local", id="v6 link-local"),
        pytest.param("10.0.0.5", "private", id="10/8"),
        pytest.param("172.16.0.1", "private", id="172.16/12"),
        pytest.param("172.31.255.255", "private", id="172.16/12 top"),
        pytest.param("192.168.1.1", "private", id="192.168/16"),
        pytest.param("100.64.0.1", "private", id="shared address space"),
        pytest.param("fd12::1", "private", id="unique local"),
        pytest.param("224.0.0.1", "multicast", id="v4 multicast"),
        pytest.param("ff02::1", "multicast", id="v6 multicast"),
        pytest.param("0.0.0.0", "unspecified", id="v4 unspecified"),
        pytest.param("::", "unspecified", id="v6 unspecified"),
        pytest.param("255.255.255.255", "reserved", id="broadcast"),
        pytest.param("168.63.129.16", "cloud metadata", id="azure wire server"),
        pytest.param("192.0.0.9", "reserved", id="ietf protocol assignments"),
        pytest.param("192.0.0.170", "reserved", id="nat64 discovery"),
        pytest.param("203.0.113.80", None, id="documentation v4: labs use it"),
        pytest.param("93.184.216.34", None, id="public v4"),
        pytest.param("172.32.0.1", None, id="just outside 172.16/12"),
        pytest.param("2606:4700::1", None, id="public v6"),
    ],
)
def test_address_kind(address: str, kind: str | None) -> None:
    assert address_kind(ip(address)) == kind


def test_a_mapped_or_scoped_address_has_one_spelling() -> None:
    assert canonical_address(ip("::ffff:10.0.0.1")) == ip("10.0.0.1")
    assert canonical_address(ip("fe80::1%eth0")) == ip("fe80::1")


@pytest.mark.parametrize(
    ("network", "kind"),
    [("10.0.0.0/24", "private"), ("0.0.0.0/0", "cloud metadata"), ("2001:db8::/32", "reserved"), ("203.0.113.0/24", None)],
)
def test_network_kind(network: str, kind: str | None) -> None:
    assert network_kind(ipaddress.ip_network(network)) == kind


@pytest.mark.parametrize(
    ("spelled", "kind"),
    [
        ("::7f00:1", "loopback"),  # IPv4-compatible 127.0.0.1 (hostile review 16)
        ("::a9fe:a9fe", "cloud metadata"),  # IPv4-compatible 169.254.169.254
        ("::ffff:0:a00:1", "private"),  # IPv4-translated 10.0.0.1
        ("64:ff9b:1::a00:1", "reserved"),  # NAT64's local-use block, whole
        ("::8.8.8.8", None),  # an embedded public address stays public
    ],
)
def test_ipv6_forms_that_embed_an_ipv4_are_judged_by_it(spelled: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(spelled)) == kind
