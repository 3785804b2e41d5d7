"""Folders as the walks see them: stamps, entry words and digests, and which folders the sandbox can enter."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stockade.bwrap.parts import folders
from stockade.bwrap.parts.folders import digest, entry_word, folder_stamp, listing, sandbox_can_enter, walked_into


def fake_stat(uid: int, gid: int, mode: int) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 1, 1, 2, uid, gid, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("uid", "gid", "mode", "enters"),
    [
        pytest.param(0, 0, 0o000, True, id="root-owned-root-group"),
        pytest.param(0, 5, 0o100, True, id="root-owner-x"),
        pytest.param(0, 5, 0o011, False, id="root-owner-no-x"),
        pytest.param(5, 0, 0o010, True, id="root-group-x"),
        pytest.param(5, 0, 0o101, False, id="root-group-no-x"),
        pytest.param(5, 5, 0o001, True, id="other-x"),
        pytest.param(5, 5, 0o770, False, id="another-users-0770"),
        pytest.param(1000, 1000, 0o700, False, id="another-users-0700"),
    ],
)
def test_sandbox_can_enter(uid: int, gid: int, mode: int, enters: bool) -> None:
    assert sandbox_can_enter(fake_stat(uid, gid, mode)) is enters


def test_folder_stamp_changes_when_an_entry_is_added_or_renamed(tmp_path: Path) -> None:
    before = folder_stamp(os.lstat(tmp_path))
    assert before == (os.lstat(tmp_path).st_ino, os.lstat(tmp_path).st_mtime_ns, os.lstat(tmp_path).st_ctime_ns)
    (tmp_path / "new").write_text("x")
    added = folder_stamp(os.lstat(tmp_path))
    assert added != before
    os.utime(tmp_path, ns=(0, before[1]))  # even with the mtime put back, the ctime moved
    assert folder_stamp(os.lstat(tmp_path)) != before


def test_entry_words_tell_kinds_apart(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    words = {entry.name: entry_word(entry) for entry in os.scandir(tmp_path)}
    assert words == {"file": "file", "dir": "dir/", "link": "link//"}


def test_digest_ignores_order_and_sees_names_and_kinds() -> None:
    assert digest(["a", "b/"]) == digest(["b/", "a"])
    assert digest(["a"]) != digest(["a/"]) != digest(["a//"])
    assert digest(["ab"]) != digest(["a", "b"])
    assert len(digest([])) == 32


def test_digest_takes_undecodable_names() -> None:
    name = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert digest([name]) != digest(["caf"])


def test_listing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    assert listing(str(tmp_path)) == (digest(["f", "sub/", "link//"]), ["sub"])
    assert listing(str(tmp_path / "missing")) is None
    assert listing(str(tmp_path / "f")) is None


@pytest.mark.parametrize("as_root", [False, True])
def test_walked_into_real_folders_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_root: bool) -> None:
    monkeypatch.setattr(folders, "AS_ROOT", as_root)
    (tmp_path / "f").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    walked = {entry.name: walked_into(entry) for entry in os.scandir(tmp_path)}
    assert walked == {"f": False, "sub": True, "link": False}


def test_as_root_another_users_closed_folder_is_not_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    real_lstat = os.lstat

    def lstat(path: str | os.PathLike[str]) -> os.stat_result:
        info = real_lstat(path)
        if os.fspath(path) == str(closed):
            return fake_stat(1000, 1000, 0o700)
        return info

    monkeypatch.setattr(folders.os, "lstat", lstat)
    for as_root, walked in ((True, False), (False, True)):
        monkeypatch.setattr(folders, "AS_ROOT", as_root)
        (entry,) = [e for e in os.scandir(tmp_path) if e.name == "closed"]
        assert walked_into(entry) is walked
