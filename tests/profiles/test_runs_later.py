"""The runs-later table: well-formed entries, and paths() and folders() read it by class and place."""

from __future__ import annotations

from collections import Counter

import pytest

from stockade.profiles.paths import is_glob
from stockade.profiles.runs_later import PROTECTED, REPORTED, TABLE, Entry, folders, paths


@pytest.mark.parametrize("entry", TABLE, ids=[f"{e.where}:{e.path}" for e in TABLE])
def test_every_entry_is_well_formed(entry: Entry) -> None:
    assert entry.where in ("project", "home")
    assert entry.cls in (PROTECTED, REPORTED)
    assert entry.path and not entry.path.startswith("/") and not entry.path.endswith("/")
    assert ".." not in entry.path.split("/") and "." not in entry.path.split("/") and "//" not in entry.path
    assert entry.source.strip()
    if is_glob(entry.path):  # a pattern is a bare name reported at any depth, never a folder
        assert entry.cls == REPORTED and "/" not in entry.path and not entry.folder


def test_no_entry_is_listed_twice() -> None:
    counts = Counter((e.path, e.where) for e in TABLE)
    assert [key for key, n in counts.items() if n > 1] == []


def test_paths_select_by_place_and_class_in_table_order() -> None:
    protected = paths("project", PROTECTED)
    assert protected[:2] == (".git/hooks", ".git/config")
    assert {".stockade.toml", ".envrc", ".vscode", ".claude", ".mcp.json", ".npmrc"} <= set(protected)
    assert "Makefile" not in protected and ".bashrc" not in protected
    reported = paths("project", REPORTED)
    assert {"Makefile", "package.json", "*.pth", "CLAUDE.md", "AGENTS.md", ".github/workflows"} <= set(reported)
    assert set(protected).isdisjoint(reported)
    home = paths("home", PROTECTED)
    assert {".bashrc", ".zshrc", ".profile", ".ssh", ".gitconfig", ".local/bin", ".config/git"} <= set(home)
    assert paths("home", REPORTED) == ()


@pytest.mark.parametrize(("where", "cls"), [("nowhere", PROTECTED), ("project", "other"), ("", "")])
def test_paths_of_an_unknown_place_or_class_are_empty(where: str, cls: str) -> None:
    assert paths(where, cls) == ()


def test_every_entry_is_in_exactly_one_selection() -> None:
    selected = [p for where in ("project", "home") for cls in (PROTECTED, REPORTED) for p in paths(where, cls)]
    assert len(selected) == len(TABLE)


def test_folders() -> None:
    found = folders()
    assert {".git/hooks", ".vscode", ".claude", ".ssh", ".github/workflows", ".husky"} <= found
    assert found.isdisjoint({".git/config", ".bashrc", "Makefile", ".claude.json", "*.sh"})
