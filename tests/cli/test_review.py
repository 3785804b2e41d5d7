"""`stockade review`'s pieces: how a change is named and shown, and which paths a command may name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.cli import review
from stockade.core.errors import UsageError


@pytest.mark.parametrize(
    ("unit", "word"),
    [
        ({"a": "remove", "k": "file"}, "removed"),
        ({"a": "put", "k": "tree"}, "new tree"),
        ({"a": "put", "k": "dir", "was": "dir"}, "mode"),
        ({"a": "put", "k": "dir", "was": None}, "new dir"),
        ({"a": "put", "k": "file", "was": None}, "new"),
        ({"a": "put", "k": "file", "was": "file"}, "changed"),
        ({"a": "put", "k": "link", "was": "file"}, "replaced"),
        ({"a": "skip", "k": "other"}, "skipped"),
    ],
)
def test_each_change_has_its_word(unit: dict[str, object], word: str) -> None:
    assert review._what(unit) == word


def test_a_diff_line_never_carries_a_control_character_but_keeps_tabs() -> None:
    assert review._diff_line("+plain text") == "+plain text"
    assert review._diff_line("+\x1b[2Jgone\tcol") == "+\\x1b[2Jgone\tcol"
    assert review._diff_line("-\u202eevil") == "-\\u202eevil"


def test_marked_and_conflicting_changes_say_so() -> None:
    unit = {"p": ".envrc", "a": "put", "k": "file", "was": None, "mark": "runs code later"}
    line = review._line(unit, {".envrc": "changed on the host after the run began"})
    assert line.startswith("  ! new") and "runs code later" in line and "conflict: changed on the host" in line
    assert review._line({"p": "a.py", "a": "put", "k": "file", "was": "file"}, {}).startswith("    changed")


def test_paths_are_made_absolute_inside_the_project_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    monkeypatch.chdir(project / "src")
    assert review._absolute(["a.py", "."], str(project)) == [str(project / "src" / "a.py"), str(project / "src")]
    with pytest.raises(UsageError, match="outside the project"):
        review._absolute(["../../elsewhere"], str(project))
    with pytest.raises(UsageError, match="empty path"):
        review._absolute([""], str(project))


def test_a_text_file_is_read_and_a_binary_one_is_not(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("héllo\n")
    (tmp_path / "b").write_bytes(b"\x00\x01")
    (tmp_path / "l").write_bytes(b"\xff\xfe")
    assert review._text(str(tmp_path / "t")) == "héllo\n"
    assert review._text(str(tmp_path / "b")) is None and review._text(str(tmp_path / "l")) is None
    assert review._text(os.path.join(tmp_path, "missing")) is None
