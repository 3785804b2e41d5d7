"""Which allowed host loopback ports the sandbox's namespace listens at (bwrap/parts/forwards.py)."""

from __future__ import annotations

from stockade.bwrap.parts.forwards import loopback_forwards


def test_each_loopback_entry_with_a_port_is_forwarded_at_its_address() -> None:
    found = loopback_forwards(["pypi.org", "127.0.0.1:5432", "localhost:8080", "[::1]:6379", "127.0.0.2:9"], 3128)
    assert found == [
        ["127.0.0.1:5432", 5432, ["127.0.0.1"]],
        ["localhost:8080", 8080, ["127.0.0.1", "::1"]],
        ["[::1]:6379", 6379, ["::1"]],
        ["127.0.0.2:9", 9, ["127.0.0.2"]],
    ]


def test_no_port_a_block_a_name_or_the_proxys_port_is_not() -> None:
    assert loopback_forwards(["127.0.0.1", "localhost", "127.0.0.0/8", "10.0.0.1:80", "db.test:5432", "127.0.0.1:3128"], 3128) == []


def test_one_address_and_port_is_forwarded_once() -> None:
    found = loopback_forwards(["localhost:8080", "127.0.0.1:8080"], 3128)
    assert found == [["localhost:8080", 8080, ["127.0.0.1", "::1"]]]


def test_the_listeners_stop_at_what_the_daemon_takes() -> None:
    from stockade.bwrap.parts.forwards import MAX_LISTENERS
    from stockade.proxy.control import MAX_FORWARDS

    found = loopback_forwards([f"localhost:{port}" for port in range(1000, 1100)], 3128)
    assert sum(len(addresses) for _entry, _port, addresses in found) == MAX_LISTENERS == MAX_FORWARDS


def test_interceptions_ports_are_never_forwarded() -> None:
    """The sandbox's 127.0.0.1:3129 and :53 are interception's (bwrap/parts/interception.py): a forward there would take them."""
    found = loopback_forwards(["127.0.0.1:3129", "localhost:53", "127.0.0.1:5432"], 3128, (3129, 53))
    assert found == [["127.0.0.1:5432", 5432, ["127.0.0.1"]]]
