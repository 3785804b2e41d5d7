"""Runs-later files: stamps, what changed between two snapshots, and the quarantine rename that never follows a link."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from stockade.bwrap.after import changes


def test_changes_names_created_and_changed_sorted() -> None:
    before = {"/p/Makefile": (1, 2, 3, 4), "/p/conftest.py": (5, 6, 7, 8), "/p/gone": (9, 9, 9, 9)}
    after = {"/p/conftest.py": (5, 6, 7, 9), "/p/Makefile": (1, 2, 3, 4), "/p/a.sh": (1, 1, 1, 1)}
    assert changes.changes(before, after) == [("/p/a.sh", "created"), ("/p/conftest.py", "changed")]


def test_nothing_touched_is_no_change() -> None:
    same = {"/p/x": (1, 2, 3, 4)}
    assert changes.changes(same, dict(same)) == []


def test_a_rewrite_changes_the_stamp(tmp_path: Path) -> None:
    file = tmp_path / "Makefile"
    file.write_text("all:\n")
    first = changes.stamp(os.lstat(file))
    file.write_text("all: evil\n")
    assert changes.stamp(os.lstat(file)) != first
    assert changes.stamp(os.lstat(file))[0] == first[0]


def test_stamps_skip_missing_paths_and_real_folders_when_asked(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    paths = [str(tmp_path / n) for n in ("f", "d", "link", "missing")]
    assert set(changes._stamps(paths)) == {str(tmp_path / n) for n in ("f", "d", "link")}
    assert set(changes._stamps(paths, dirs=False)) == {str(tmp_path / n) for n in ("f", "link")}


def test_from_matches_leaves_out_sample_hooks_and_swept_folders(tmp_path: Path) -> None:
    hooks = tmp_path / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("x")
    (hooks / "pre-commit.sample").write_text("x")
    (tmp_path / "Makefile").write_text("x")
    matches = {
        "Makefile": [str(tmp_path / "Makefile")],
        ".git/hooks": [str(hooks)],
        ".git/hooks/*": [str(hooks / "pre-commit"), str(hooks / "pre-commit.sample")],
    }
    snap = changes.from_matches(("Makefile",), (".git/hooks", ".git/hooks/*"), matches, None)
    assert set(snap.reported) == {str(tmp_path / "Makefile")}
    assert set(snap.swept) == {str(hooks / "pre-commit")}
    assert snap.tree is None


def test_quarantine_renames_in_place_and_numbers_a_second_move(tmp_path: Path) -> None:
    hook = tmp_path / "repo" / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True)
    hook.write_text("first")
    moved = changes.quarantine([str(hook)], "s1", [str(tmp_path)])
    aside = hook.parent / "pre-commit.stockade-quarantine-s1"
    assert moved == [(str(hook), str(aside))]
    assert aside.read_text() == "first" and not hook.exists()
    hook.write_text("second")
    moved = changes.quarantine([str(hook)], "s1", [str(tmp_path)])
    assert moved == [(str(hook), str(hook.parent / "pre-commit.stockade-quarantine-s1-2"))]
    assert aside.read_text() == "first"


def test_quarantine_outside_every_root_moves_nothing(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    file = tmp_path / "b" / "Makefile"
    file.write_text("x")
    assert changes.quarantine([str(file)], "s", [str(tmp_path / "a")]) == []
    assert file.exists()


def test_quarantine_does_not_follow_a_swapped_in_symlink(tmp_path: Path) -> None:
    root, host = tmp_path / "root", tmp_path / "host"
    root.mkdir()
    host.mkdir()
    (host / "precious").write_text("x")
    (root / "sub").symlink_to(host)
    assert changes.quarantine([str(root / "sub" / "precious")], "s", [str(root)]) == []
    assert (host / "precious").exists()


def test_a_missing_file_is_not_reported_moved(tmp_path: Path) -> None:
    assert changes.quarantine([str(tmp_path / "nothing")], "s", [str(tmp_path)]) == []


def test_an_unwritable_folder_is_moved_aside_instead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []
    locked = str(tmp_path / "proj" / "locked")

    def fake_rename(path: str, session: str, roots: list[str]) -> str | int:
        tried.append(path)
        return errno.EACCES if path.startswith(locked + "/") else f"{path}.q"

    monkeypatch.setattr(changes, "_rename_aside", fake_rename)
    moved = changes.quarantine([f"{locked}/Makefile"], "s", [str(tmp_path / "proj")])
    assert tried == [f"{locked}/Makefile", locked]
    assert moved == [(locked, f"{locked}.q")]


def test_give_back_access_only_for_a_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    os.chmod(root, 0o555)
    assert changes._give_back_access(str(tmp_path / "other"), [str(root)]) is False
    assert changes._give_back_access(str(root), [str(root)]) is True
    assert os.stat(root).st_mode & 0o700 == 0o700


@pytest.mark.parametrize(
    ("path", "inside"),
    [("/p/a", True), ("/p", False), ("/pp/a", False), ("/q/a", False)],
)
def test_strictly_inside(path: str, inside: bool) -> None:
    assert changes._strictly_inside(path, ["/p/"]) is inside


def test_take_since_without_a_tree_walks_the_patterns_again(tmp_path: Path) -> None:
    make = tmp_path / "Makefile"
    make.write_text("x")
    pattern = str(make)
    before = changes.Snapshot()
    after = changes.take_since((str(tmp_path),), (pattern,), (), before)
    assert changes.changes(before.reported, after.reported) == [(pattern, "created")]


def test_a_name_too_long_to_take_the_suffix_is_still_moved_aside(tmp_path: Path) -> None:
    """Review of issue 32: a planted file whose name left no room for the suffix stayed (ENAMETOOLONG)."""
    long = tmp_path / (".vscode-" + "é" * 115 + ".json")  # 246 bytes
    long.write_text("planted")
    moved = changes.quarantine([str(long)], "s1", [str(tmp_path)])
    assert len(moved) == 1 and not long.exists()
    new = Path(moved[0][1])
    assert new.read_text() == "planted" and len(os.fsencode(new.name)) <= 255 and changes.QUARANTINE_SUFFIX in new.name
