from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from stockade.proxy.filter.resolver import file_resolver, own_addresses, system_resolver

ip = ipaddress.ip_address


async def test_system_resolver_literals_and_localhost() -> None:
    assert (await system_resolver("2130706433", 80)).addresses == (ip("127.0.0.1"),)
    assert (await system_resolver("::ffff:10.0.0.1", 80)).addresses == (ip("10.0.0.1"),)
    localhost = await system_resolver("localhost", 80)
    assert ip("127.0.0.1") in localhost.addresses and localhost.upstreams == frozenset()


async def test_system_resolver_unknown_name_is_empty() -> None:
    assert (await system_resolver("name.invalid", 80)).addresses == ()


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "names.json"
    path.write_text(
        json.dumps(
            {
                "names": {"Allowed.Test.": ["127.0.0.1", "::1"], "meta.wild.test": ["169.254.169.254"], "v6.test": ["::ffff:127.0.0.1"]},
                "upstreams": ["127.0.0.1:8443", "[::1]:8443"],
                "log": str(tmp_path / "queries.txt"),
            }
        )
    )
    return path


async def test_file_resolver(table: Path) -> None:
    resolve = file_resolver(table)
    allowed = await resolve("ALLOWED.test", 8443)
    assert allowed.addresses == (ip("127.0.0.1"), ip("::1"))
    assert allowed.upstreams == frozenset({(ip("127.0.0.1"), 8443), (ip("::1"), 8443)})
    assert (await resolve("v6.test", 1)).addresses == (ip("127.0.0.1"),)
    assert (await resolve("unknown.test", 80)).addresses == ()
    assert (await resolve("0x7f.1", 80)).addresses == (ip("127.0.0.1"),)
    queries = (table.parent / "queries.txt").read_text().splitlines()
    assert [json.loads(q) for q in queries] == ["ALLOWED.test", "v6.test", "unknown.test", "0x7f.1"]


async def test_file_resolver_rereads_the_file(table: Path) -> None:
    resolve = file_resolver(table)
    assert (await resolve("late.test", 80)).addresses == ()
    data = json.loads(table.read_text())
    data["names"]["late.test"] = ["93.184.216.34"]
    table.write_text(json.dumps(data))
    assert (await resolve("late.test", 80)).addresses == (ip("93.184.216.34"),)


def test_own_addresses_include_loopback() -> None:
    assert ip("127.0.0.1") in own_addresses()
