"""Old runs' placeholder records: only empty files and folders they name are removed, never through a link; then the records go."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stockade.bwrap.plan.placeholders import clear_leftovers


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    (folder / "placeholders").mkdir(parents=True)
    return folder


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """One of each kind of thing a record may name."""
    root = tmp_path / "host"
    root.mkdir()
    made = {
        "empty-file": root / "empty-file",
        "empty-folder": root / "empty-folder",
        "file-with-content": root / "file-with-content",
        "folder-with-content": root / "folder-with-content",
        "link-to-empty-file": root / "link-to-empty-file",
        "link-to-empty-folder": root / "link-to-empty-folder",
        "missing": root / "missing",
    }
    made["empty-file"].write_bytes(b"")
    made["empty-folder"].mkdir()
    made["file-with-content"].write_text("mine\n")
    made["folder-with-content"].mkdir()
    (made["folder-with-content"] / "x").write_text("")
    target_file, target_folder = root / "target-file", root / "target-folder"
    target_file.write_bytes(b"")
    target_folder.mkdir()
    made["link-to-empty-file"].symlink_to(target_file)
    made["link-to-empty-folder"].symlink_to(target_folder)
    return made


REMOVED = {"empty-file", "empty-folder"}


def exists(path: Path) -> bool:
    return os.path.lexists(path)


@pytest.mark.parametrize("kind", [".paths", ".json"])
def test_only_empty_files_and_folders_go_never_through_a_link(state: Path, places: dict[str, Path], kind: str) -> None:
    paths = [str(p) for p in places.values()]
    record = state / "placeholders" / f"run1{kind}"
    record.write_bytes("\0".join(paths).encode() if kind == ".paths" else json.dumps(paths).encode())
    clear_leftovers(str(state))
    assert {name for name, path in places.items() if not exists(path)} == REMOVED | {"missing"}
    assert (places["link-to-empty-file"].parent / "target-file").exists() and (places["link-to-empty-folder"].parent / "target-folder").is_dir()
    assert not (state / "placeholders").exists() and state.is_dir()


def test_no_placeholders_folder_is_fine(tmp_path: Path) -> None:
    clear_leftovers(str(tmp_path))
    clear_leftovers(str(tmp_path / "no-state-at-all"))
    assert list(tmp_path.iterdir()) == []


def test_every_record_is_finished(state: Path, places: dict[str, Path]) -> None:
    (state / "placeholders" / "a.paths").write_bytes(str(places["empty-file"]).encode() + b"\0")
    (state / "placeholders" / "b.json").write_text(json.dumps([str(places["empty-folder"])]))
    clear_leftovers(str(state))
    assert not exists(places["empty-file"]) and not exists(places["empty-folder"])
    assert not (state / "placeholders").exists()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("not json", id="not-json"),
        pytest.param('{"path": "X"}', id="an-object"),
        pytest.param('"X"', id="a-string"),
        pytest.param("", id="empty"),
    ],
)
def test_a_json_record_that_is_not_a_list_removes_nothing(state: Path, places: dict[str, Path], text: str) -> None:
    (state / "placeholders" / "r.json").write_text(text.replace("X", str(places["empty-file"])))
    clear_leftovers(str(state))
    assert exists(places["empty-file"])
    assert not (state / "placeholders").exists()  # the record goes all the same


def test_a_json_list_skips_what_is_not_a_path(state: Path, places: dict[str, Path]) -> None:
    (state / "placeholders" / "r.json").write_text(json.dumps([1, None, ["x"], {"a": 1}, str(places["empty-file"])]))
    clear_leftovers(str(state))
    assert not exists(places["empty-file"])


def test_a_paths_record_keeps_bytes_that_are_not_utf8(state: Path, tmp_path: Path) -> None:
    name = os.fsencode(tmp_path) + b"/caf\xe9"
    open(name, "wb").close()
    (state / "placeholders" / "r.paths").write_bytes(b"\0" + name + b"\0\0")
    clear_leftovers(str(state))
    assert not os.path.lexists(name)


def test_a_record_is_read_up_to_a_mebibyte(state: Path, places: dict[str, Path]) -> None:
    early, late = places["empty-file"], places["empty-folder"]
    data = str(early).encode() + b"\0" * (1 << 20) + str(late).encode()
    (state / "placeholders" / "r.paths").write_bytes(data)
    clear_leftovers(str(state))
    assert not exists(early) and exists(late)


def test_other_files_go_unread_and_a_folder_inside_keeps_the_folder(state: Path, places: dict[str, Path]) -> None:
    (state / "placeholders" / "notes.txt").write_text(str(places["empty-file"]))
    (state / "placeholders" / "sub").mkdir()
    clear_leftovers(str(state))
    assert exists(places["empty-file"])  # not a record: its text is not a list of paths
    assert sorted(p.name for p in (state / "placeholders").iterdir()) == ["sub"]


def test_a_record_naming_the_placeholders_folder_itself_is_harmless(state: Path) -> None:
    folder = state / "placeholders"
    (folder / "r.paths").write_bytes(str(folder).encode())
    clear_leftovers(str(state))
    assert not folder.exists() and state.is_dir()
