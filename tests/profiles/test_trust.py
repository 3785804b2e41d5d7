"""Trust records: the digest of a policy's chain, and the store that records, checks and revokes it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from stockade.core.errors import StockadeError
from stockade.profiles.loader import Layer
from stockade.profiles.trust import TrustStore, chain_digest

POLICY = Path("/proj/.stockade.toml")


def chain(*texts: str, implicit: str | None = None) -> list[Layer]:
    layers = [Layer(source=f"/proj/{n}.toml", text=t) for n, t in enumerate(texts)]
    if implicit is not None:
        layers.insert(0, Layer(source="/home/ann/.config/stockade/default.toml", text=implicit, implicit=True))
    return layers


def test_the_digest_is_a_sha256_hex_of_the_chain() -> None:
    digest = chain_digest(chain("a = 1\n"))
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert digest == chain_digest(chain("a = 1\n"))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        pytest.param(chain("a"), chain("b"), id="text-changed"),
        pytest.param(chain("a", "b"), chain("a", "c"), id="extended-file-changed"),
        pytest.param(chain("a", "b"), chain("b", "a"), id="order"),
        pytest.param(chain("a"), chain("a", ""), id="extra-file"),
        pytest.param([Layer(source="/x", text="ab")], [Layer(source="/xa", text="b")], id="source-text-boundary"),
        pytest.param([Layer(source="builtin:default", text="")], [Layer(source="builtin:python", text="")], id="source-name"),
    ],
)
def test_any_change_to_the_chain_changes_the_digest(one: list[Layer], other: list[Layer]) -> None:
    assert chain_digest(one) != chain_digest(other)


def test_the_users_implicit_default_is_not_part_of_it() -> None:
    assert chain_digest(chain("a", implicit="mine")) == chain_digest(chain("a", implicit="changed")) == chain_digest(chain("a"))


def test_an_empty_store_trusts_nothing(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "none" / "trusted.json")
    assert not store.is_trusted(POLICY, "d")
    assert not store.was_trusted(POLICY)
    assert store.revoke(POLICY) is False
    assert not (tmp_path / "none").exists()  # nothing written for a revoke of nothing


def test_trust_check_and_revoke(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "state" / "trusted.json")
    store.trust(POLICY, "d1")
    assert store.is_trusted(POLICY, "d1")
    assert not store.is_trusted(POLICY, "d2")  # changed since
    assert store.was_trusted(POLICY)
    assert not store.is_trusted(Path("/other/.stockade.toml"), "d1")
    store.trust(POLICY, "d2")  # trusted again in its new version
    assert store.is_trusted(POLICY, "d2") and not store.is_trusted(POLICY, "d1")
    assert store.revoke(POLICY) is True
    assert not store.was_trusted(POLICY)
    assert store.revoke(POLICY) is False


def test_the_store_is_private_sorted_json(tmp_path: Path) -> None:
    path = tmp_path / "state" / "trusted.json"
    store = TrustStore(path)
    store.trust(Path("/b"), "2")
    store.trust(Path("/a"), "1")
    assert json.loads(path.read_text()) == {"/a": "1", "/b": "2"}
    assert path.read_text().index('"/a"') < path.read_text().index('"/b"') and path.read_text().endswith("\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["trusted.json"]  # no temporary file left


@pytest.mark.parametrize("content", ["{not json", "\xff\xfe"])
def test_a_corrupt_store_is_an_error_naming_it(tmp_path: Path, content: str) -> None:
    path = tmp_path / "trusted.json"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(StockadeError, match="cannot read the trust store"):
        TrustStore(path).is_trusted(POLICY, "d")
    with pytest.raises(StockadeError, match=str(path)):
        TrustStore(path).trust(POLICY, "d")
    assert path.read_bytes() == content.encode("latin-1")  # left for the user to fix


@pytest.mark.parametrize(("content", "trusted"), [("[]", False), ('"x"', False), ('{"/proj/.stockade.toml": 5}', True)])
def test_odd_json_shapes(tmp_path: Path, content: str, trusted: bool) -> None:
    path = tmp_path / "trusted.json"
    path.write_text(content)
    assert TrustStore(path).is_trusted(POLICY, "5") is trusted
