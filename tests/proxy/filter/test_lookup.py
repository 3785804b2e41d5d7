"""Tests of lookup.py (the resolver Decisions and Backstop share, and its test option)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons

from stockade.proxy.filter import lookup as lookup_module
from stockade.proxy.filter.lookup import Lookup
from stockade.proxy.filter.resolver import system_resolver
from tests.proxy.filterkit import UPSTREAM


async def test_test_resolver_option(tmp_path: Path) -> None:
    table = tmp_path / "names.json"
    table.write_text(json.dumps({"names": {"allowed.test": ["127.0.0.1"]}, "upstreams": ["127.0.0.1:8443"]}))
    filt = Lookup()
    with taddons.context(filt) as tctx:
        tctx.configure(filt, stockade_test_resolver=str(table))
        resolved = await filt.resolver("Allowed.Test.", 8443)
        assert resolved.addresses == (UPSTREAM,)
        assert (UPSTREAM, 8443) in resolved.upstreams
        assert (await filt.resolver("other.test", 80)).addresses == ()


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(None, "No such file", id="missing file"),
        pytest.param("not json", "Expecting value", id="not json"),
        pytest.param("[1]", "expected an object", id="not an object"),
        pytest.param('{"names": []}', "expected an object", id="names not an object"),
    ],
)
async def test_test_resolver_option_rejects(tmp_path: Path, content: str | None, message: str) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"names": {}}')
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    filt = Lookup()
    with taddons.context(filt) as tctx:
        tctx.configure(filt, stockade_test_resolver=str(good))
        with pytest.raises(exceptions.OptionsError, match=f"stockade_test_resolver: cannot use .*{message}"):
            tctx.configure(filt, stockade_test_resolver=str(bad))
        assert tctx.options.stockade_test_resolver == str(good)


# -- unit tests ------------------------------------------------------------------


async def test_an_empty_test_resolver_is_the_system_resolver(tmp_path: Path) -> None:
    table = tmp_path / "names.json"
    table.write_text('{"names": {}}')
    lookup = Lookup()
    with taddons.context(lookup) as tctx:
        tctx.configure(lookup, stockade_test_resolver=str(table))
        assert lookup.resolver is not system_resolver
        tctx.configure(lookup, stockade_test_resolver="")
        assert lookup.resolver is system_resolver


def test_own_addresses_are_read_again_only_after_their_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = iter(range(100))
    monkeypatch.setattr(lookup_module, "own_addresses", lambda: frozenset({next(reads)}))
    lookup = Lookup()
    assert lookup.own_addresses() == frozenset({0})
    assert lookup.own_addresses() == frozenset({0})  # within the TTL: not read again
    lookup._own_at = time.monotonic() - lookup_module.OWN_ADDRESSES_TTL - 1
    assert lookup.own_addresses() == frozenset({1})
