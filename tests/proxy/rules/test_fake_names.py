"""The resolver's addresses (proxy/rules/fake_names.py): one per name, mapping back, bounded, inside their block."""

from __future__ import annotations

import pytest

from stockade.proxy.rules import fake_names
from stockade.proxy.rules.fake_names import FAKE_NETWORK, Names, is_fake


def test_names_run_out_at_their_bound_and_never_leave_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_names, "MAX_NAMES", 3)
    names = Names()
    given = [names.address(f"n{i}.test") for i in range(4)]
    assert given[3] is None and all(g is not None and is_fake(g) for g in given[:3])
    assert len(set(given[:3])) == 3 and not is_fake("198.20.0.1") and not is_fake("not an address")
    assert FAKE_NETWORK.num_addresses > fake_names.MAX_NAMES


def test_an_address_maps_back_to_its_name_and_a_name_keeps_its_address() -> None:
    names = Names()
    first = names.address("a.test")
    assert first == "198.18.0.1" and names.address("a.test") == first and names.address("b.test") == "198.18.0.2"
    assert names.name(first) == "a.test" and names.name("198.18.0.3") is None
