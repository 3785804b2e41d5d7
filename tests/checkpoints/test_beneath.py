"""Paths under a place are reached one real folder at a time: a link in a folder's place stops the walk."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from stockade.checkpoints import beneath


def test_a_folder_is_opened_beneath_its_root(tmp_path: Path) -> None:
    (tmp_path / "p" / "a" / "b").mkdir(parents=True)
    fd = beneath.open_folder(str(tmp_path / "p" / "a" / "b"), [str(tmp_path / "p")])
    try:
        assert os.fstat(fd).st_ino == (tmp_path / "p" / "a" / "b").stat().st_ino
    finally:
        os.close(fd)


def test_a_link_on_the_way_is_refused_and_nothing_beyond_it_is_reached(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "p" / "a")
    with pytest.raises(OSError) as refused:
        beneath.open_parent(str(tmp_path / "p" / "a" / "file"), [str(tmp_path / "p")], make=True)
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_missing_folders_are_made_only_when_asked(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    with pytest.raises(FileNotFoundError):
        beneath.open_parent(str(tmp_path / "p" / "x" / "y" / "f"), [str(tmp_path / "p")])
    fd, name = beneath.open_parent(str(tmp_path / "p" / "x" / "y" / "f"), [str(tmp_path / "p")], make=True)
    os.close(fd)
    assert name == "f" and (tmp_path / "p" / "x" / "y").is_dir()


def test_a_path_outside_every_root_or_climbing_out_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError) as outside:
        beneath.open_folder(str(tmp_path / "other"), [str(tmp_path / "p")])
    assert outside.value.errno == errno.EXDEV
    (tmp_path / "p").mkdir()
    with pytest.raises(OSError) as climbing:
        beneath.open_folder(str(tmp_path / "p") + "/../p", [str(tmp_path / "p")])
    assert climbing.value.errno == errno.EINVAL


def test_a_root_s_own_entry_is_reached_through_its_folder(tmp_path: Path) -> None:
    (tmp_path / "single.txt").write_text("x")
    fd, name = beneath.open_parent(str(tmp_path / "single.txt"), [str(tmp_path / "single.txt")])
    try:
        assert name == "single.txt" and os.stat(name, dir_fd=fd).st_size == 1
    finally:
        os.close(fd)
