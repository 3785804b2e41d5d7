"""Which writable places are seen through a cache layer, and where each layer's folders are (bwrap/layers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.bwrap import layers
from tests.visible import force_rmtree, visible_root

HOME = "/h"
STORE = "/h/.cache/stockade/layers"


def places(writable: list[str], hidden: tuple[str, ...] = (), project: str = "/p") -> list[str]:
    return [layer[0] for layer in layers.plan(writable, hidden, HOME, STORE, project)]


def test_a_writable_cache_is_layered_and_an_ordinary_place_is_not() -> None:
    assert places(["/p", "/h/.cargo/git"]) == ["/h/.cargo/git"]
    assert places(["/p", "/srv/data"]) == []  # control: not a cache


def test_every_cache_inside_a_writable_folder_is_layered() -> None:
    found = places(["/h"])
    assert "/h/.cargo/git" in found and "/h/.cache/pip" in found and "/h/.cache/pre-commit" in found
    assert len(found) == len(layers.LAYERED_CACHES)


def test_a_writable_place_inside_a_cache_is_layered_itself() -> None:
    assert places(["/h/.cache/pip/wheels"]) == ["/h/.cache/pip/wheels"]


def test_a_cache_hidden_inside_a_writable_home_gets_no_layer_but_a_carve_out_does() -> None:
    assert "/h/.cargo/git" not in places(["/h"], hidden=("/h/.cargo",))  # hidden: nothing to show
    assert places(["/h/.cargo/git"], hidden=("/h/.cargo",)) == ["/h/.cargo/git"]  # writable inside the hidden folder


def test_each_project_has_layers_of_its_own_and_keeps_them() -> None:
    one = layers.plan(["/h/.cargo/git"], [], HOME, STORE, "/work/a")
    again = layers.plan(["/h/.cargo/git"], [], HOME, STORE, "/work/a")
    other = layers.plan(["/h/.cargo/git"], [], HOME, STORE, "/other/a")
    assert one == again and one != other
    place, upper, work, mount = one[0]
    assert place == "/h/.cargo/git"
    assert {upper.rsplit("/", 1)[1], work.rsplit("/", 1)[1], mount.rsplit("/", 1)[1]} == {"upper", "work", "mount"}
    assert all(folder.startswith(STORE + "/a-") for folder in (upper, work, mount))


def test_a_path_overlay_cannot_spell_is_not_mounted_as_an_overlay(tmp_path: Path) -> None:
    for mark in (",", ":", "\\"):
        folder = tmp_path / f"a{mark}b"
        why = layers._overlay(str(folder), str(tmp_path / "u"), str(tmp_path / "w"), str(tmp_path / "m"))
        assert why is not None and "cannot spell" in why


@pytest.mark.parametrize("entry", layers.LAYERED_CACHES)
def test_each_layered_cache_is_a_folder_of_the_home(entry: str) -> None:
    assert entry.startswith("~/") and "*" not in entry and not entry.endswith("/")


def test_the_probe_mounts_an_overlay_as_a_run_does() -> None:
    """`stockade doctor`'s check: on this machine's disk a layer is an overlay (CI's machines, root and not)."""
    root = visible_root("l")
    try:
        assert layers.probe(str(root / "store")) is None
        assert (root / "store" / ".probe" / "upper").is_dir()
        assert not (root / "store" / ".probe" / "mount" / "x").exists()  # mounted only in the probe's own namespace
    finally:
        force_rmtree(root)


def test_the_probe_says_why_a_layer_cannot_be_an_overlay() -> None:
    root = visible_root("l")
    try:
        why = layers.probe(str(root / "odd,store"))
        assert why is not None and "cannot spell" in why
    finally:
        force_rmtree(root)
