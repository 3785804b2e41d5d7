"""Glob expansion at sandbox start: what exists now, links not followed, trees, locked and shared files."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stockade.bwrap.parts import folders, globs
from stockade.bwrap.parts.globs import Patterns, expand
from stockade.profiles.paths import glob_to_regex


def tree_of(root: Path, files: list[str]) -> Path:
    for name in files:
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
    return root


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return tree_of(tmp_path / "proj", [".env", "a/.env", "a/b/.env", "a/b/c.key", "a/notes.txt", "d/x.env", "empty/"])


def rel(root: Path, paths: list[str]) -> list[str]:
    return sorted(os.path.relpath(p, root) for p in paths)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        pytest.param("**/.env", [".env", "a/.env", "a/b/.env"], id="anywhere"),
        pytest.param("*/.env", ["a/.env"], id="one-level"),
        pytest.param("**/*.key", ["a/b/c.key"], id="wild-name"),
        pytest.param("a/**", ["a/.env", "a/b", "a/b/.env", "a/b/c.key", "a/notes.txt"], id="everything-below"),
        pytest.param("**/*.env", [".env", "a/.env", "a/b/.env", "d/x.env"], id="star-matches-dot-names-too"),
        pytest.param("a/?otes.txt", ["a/notes.txt"], id="question"),
        pytest.param("**/nothing", [], id="no-match"),
        pytest.param("missing/**/x", [], id="missing-base"),
    ],
)
def test_globs_match_what_exists(proj: Path, pattern: str, expected: list[str]) -> None:
    found, notes = expand((f"{proj}/{pattern}",))
    assert rel(proj, found[f"{proj}/{pattern}"]) == expected
    assert notes == []


def test_plain_paths_match_themselves_when_they_exist(proj: Path) -> None:
    link = proj / "dangling"
    link.symlink_to(proj / "nowhere")
    patterns = (str(proj / ".env"), str(proj / "gone"), str(proj / ".env" / "under-a-file"), str(link))
    found, _ = expand(patterns)
    assert found == {
        str(proj / ".env"): [str(proj / ".env")],
        str(proj / "gone"): [],
        str(proj / ".env" / "under-a-file"): [],
        str(link): [str(link)],
    }


def test_symlinked_folders_are_not_walked_into(proj: Path, tmp_path: Path) -> None:
    outside = tree_of(tmp_path / "outside", [".env"])
    (proj / "link").symlink_to(outside)
    found, _ = expand((f"{proj}/**/.env", f"{proj}/**/link"))
    assert rel(proj, found[f"{proj}/**/.env"]) == [".env", "a/.env", "a/b/.env"]
    assert rel(proj, found[f"{proj}/**/link"]) == ["link"]  # the link itself matches


def test_patterns_under_different_bases(proj: Path) -> None:
    found, _ = expand((f"{proj}/a/**/.env", f"{proj}/d/*.env", f"{proj}/a/b/*"))
    assert rel(proj, found[f"{proj}/a/**/.env"]) == ["a/.env", "a/b/.env"]
    assert rel(proj, found[f"{proj}/d/*.env"]) == ["d/x.env"]
    assert rel(proj, found[f"{proj}/a/b/*"]) == ["a/b/.env", "a/b/c.key"]


def test_the_tree_records_every_folder_under_its_root(proj: Path) -> None:
    tree: globs.Tree = {}
    expand((f"{proj}/**/.env",), tree=tree, tree_root=str(proj))
    assert sorted(tree) == sorted(str(proj / p) if p else str(proj) for p in ("", "a", "a/b", "d", "empty"))
    stamp, subfolders, digest = tree[str(proj / "a")]
    assert stamp == folders.folder_stamp(os.lstat(proj / "a"))
    assert subfolders == ["b"]
    assert (digest, subfolders) == folders.listing(str(proj / "a"))


def test_no_tree_for_another_root(proj: Path) -> None:
    tree: globs.Tree = {}
    expand((f"{proj}/a/**/.env",), tree=tree, tree_root=str(proj))
    assert tree == {}


def test_a_walk_stops_at_the_limit_with_a_note_and_no_partial_tree(proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(globs, "MAX_ENTRIES", 3)
    tree: globs.Tree = {}
    found, notes = expand((f"{proj}/**/.env",), tree=tree, tree_root=str(proj))
    assert notes == [f"stopped expanding globs under {proj} after 3 entries"]
    assert tree == {}
    assert len(found[f"{proj}/**/.env"]) < 3  # what it saw before it stopped


def test_locked_folders_of_ours_are_listed_unwalked(proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(folders, "AS_ROOT", False)  # the unprivileged user's rule, even when the suite runs as root
    (proj / "a").chmod(0o300)  # not readable by its owner
    locked: list[str] = []
    try:
        found, _ = expand((f"{proj}/**/.env",), locked=locked)
    finally:
        (proj / "a").chmod(0o755)
    assert locked == [str(proj / "a")]
    assert rel(proj, found[f"{proj}/**/.env"]) == [".env"]


def test_without_a_locked_list_an_unreadable_folder_is_skipped_quietly(proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(folders, "AS_ROOT", False)
    (proj / "a").chmod(0o000)
    try:
        found, notes = expand((f"{proj}/**/.env",))
    finally:
        (proj / "a").chmod(0o755)
    assert notes == []
    assert str(proj / ".env") in found[f"{proj}/**/.env"]


def test_files_with_other_hard_links_are_shared(proj: Path, tmp_path: Path) -> None:
    os.link(proj / "a" / "notes.txt", tmp_path / "elsewhere.txt")
    (proj / "sym").symlink_to(proj / "a" / "notes.txt")
    shared: list[str] = []
    expand((f"{proj}/**/.env",), tree_root=str(proj), shared=shared)
    assert shared == [str(proj / "a" / "notes.txt")]
    other: list[str] = []
    expand((f"{proj}/**/.env",), tree_root=str(tmp_path / "else"), shared=other)
    assert other == []  # only under the tree's root


def test_no_patterns() -> None:
    assert expand(()) == ({}, [])


@pytest.mark.parametrize(
    ("name", "path", "expected"),
    [
        (".env", "/p/.env", ["/p/**/.env"]),
        (".env", "/q/.env", []),
        ("c.key", "/p/a/c.key", ["/p/**/*.key"]),
        ("x.txt", "/p/x.txt", ["/p/*.txt", "/p/**/*.txt"]),
        ("x.txt", "/p/a/x.txt", ["/p/**/*.txt"]),
        ("other", "/p/other", []),
    ],
)
def test_patterns_match_by_name_then_by_path(name: str, path: str, expected: list[str]) -> None:
    patterns = Patterns(["/p/**/.env", "/p/**/*.key", "/p/*.txt", "/p/**/*.txt"])
    assert sorted(patterns.matching(name, path)) == sorted(expected)


def test_patterns_without_wildcard_names_have_no_name_regex() -> None:
    patterns = Patterns(["/p/**/.env"])
    assert patterns.wild_name is None
    assert patterns.matching("x", "/p/x") == []


_PARTS = ["a", "b", "hooks", ".git", "*", "**", "?", "*.key", "h*", "[ab]"]


@settings(max_examples=400, deadline=None)
@given(
    pattern=st.lists(st.sampled_from(_PARTS), min_size=1, max_size=4),
    path=st.lists(st.sampled_from(["a", "b", "hooks", ".git", "x.key", "hx", "c"]), min_size=1, max_size=5),
)
def test_the_indexed_lookup_finds_what_the_full_regex_does(pattern: list[str], path: list[str]) -> None:
    """Patterns.matching narrows by name and by parent name: never to fewer matches than the plain regex."""
    glob = "/r/" + "/".join(pattern)
    full = "/r/" + "/".join(path)
    expected = re.match(glob_to_regex(glob), full) is not None
    assert (glob in globs.Patterns([glob]).matching(path[-1], full)) is expected


def test_another_place_cut_short_leaves_none_of_its_folders_and_all_of_the_projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partial record would make every folder of the place the walk did not reach look new after the run."""
    home = tmp_path / "home"
    project = home / "proj"
    for folder in (project / "a", home / "src" / "b", home / "src" / "c"):
        folder.mkdir(parents=True)
        (folder / "f").write_text("x")
    monkeypatch.setattr(globs, "MAX_ENTRIES", 4)
    tree: globs.Tree = {}
    _found, notes = expand((f"{project}/**/.envrc", f"{home}/**/.envrc"), tree, str(project), more_roots=(str(home),))
    assert str(project) in tree and str(project / "a") in tree
    assert not [folder for folder in tree if folder.startswith(str(home / "src"))] and str(home) not in tree
    assert notes == [f"stopped expanding globs under {home} after 4 entries"]


def test_another_place_holding_the_project_is_walked_around_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "proj"
    (project / "a").mkdir(parents=True)
    (home / "src").mkdir()
    (project / "a" / ".envrc").write_text("x")
    tree: globs.Tree = {}
    found, _notes = expand((f"{project}/**/.envrc", f"{home}/**/.envrc"), tree, str(project), more_roots=(str(home),))
    assert found[f"{project}/**/.envrc"] == [str(project / "a" / ".envrc")]
    assert found[f"{home}/**/.envrc"] == []  # the project is the project walk's: the place's walk does not enter it
    assert {str(home), str(home / "src"), str(project), str(project / "a")} <= set(tree)
