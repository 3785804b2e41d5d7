"""The inside-a-sandbox sign: a link with one exact target at the marker path, nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.bwrap.parts import marker


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "stockade-sandbox"
    monkeypatch.setattr(marker, "MARKER_PATH", str(path))
    return path


def test_the_marker_is_a_link_in_the_private_run() -> None:
    assert marker.MARKER_PATH == "/run/stockade-sandbox"
    assert marker.MARKER_TARGET == "stockade"


def test_a_link_to_the_target_is_the_sign(place: Path) -> None:
    place.symlink_to("stockade")
    assert marker.inside_stockade() is True


@pytest.mark.parametrize("target", ["stockade/", "./stockade", "/run/stockade", "Stockade", "other"])
def test_a_link_elsewhere_is_not(place: Path, target: str) -> None:
    place.symlink_to(target)
    assert marker.inside_stockade() is False


def test_a_missing_marker_is_not(place: Path) -> None:
    assert marker.inside_stockade() is False


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_file_or_folder_of_that_name_is_not(place: Path, kind: str) -> None:
    if kind == "file":
        place.write_text("stockade")
    else:
        place.mkdir()
    assert marker.inside_stockade() is False
