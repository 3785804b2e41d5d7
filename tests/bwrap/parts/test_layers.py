"""Which writable places are seen through a cache layer, and where each layer's folders are (bwrap/parts/layers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.bwrap.parts import layers
from tests.visible import force_rmtree, visible_root

STORE = "/h/.cache/stockade/layers"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with a few caches made: cargo's git checkouts and pip's cache."""
    for name in (".cargo/git", ".cache/pip/wheels"):
        (tmp_path / name).mkdir(parents=True)
    return tmp_path


def test_a_writable_cache_is_a_place_to_layer_and_an_ordinary_folder_is_not(home: Path) -> None:
    (home / "src").mkdir()
    assert layers.candidates([str(home / ".cargo/git")], str(home)) == ([str(home / ".cargo/git")], [])
    assert layers.candidates([str(home / "src")], str(home)) == ([], [])  # control: not a cache


def test_caches_inside_a_writable_home_are_layered_or_kept_by_the_floor_when_absent(home: Path) -> None:
    places, unmade = layers.candidates([str(home)], str(home))
    assert places == [str(home / ".cache/pip"), str(home / ".cargo/git")]
    assert str(home / ".cargo/registry") in unmade and str(home / "go/pkg/mod") in unmade
    assert len(places) + len(unmade) == len(layers.LAYERED_CACHES)


def test_a_cache_that_is_a_link_is_never_layered_but_kept(home: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (home / ".cargo/registry").symlink_to(elsewhere)
    places, unmade = layers.candidates([str(home)], str(home))
    assert str(home / ".cargo/registry") in unmade and str(elsewhere) not in places


def test_a_writable_place_inside_a_cache_is_layered_itself(home: Path) -> None:
    wheels = str(home / ".cache/pip/wheels")
    assert layers.candidates([wheels], str(home)) == ([wheels], [])


def test_each_project_has_layers_of_its_own_and_keeps_them() -> None:
    one = layers.layer_of("/h/.cargo/git", STORE, "/work/a")
    assert one == layers.layer_of("/h/.cargo/git", STORE, "/work/a")
    assert one != layers.layer_of("/h/.cargo/git", STORE, "/other/a")
    place, upper, work, mount = one
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
