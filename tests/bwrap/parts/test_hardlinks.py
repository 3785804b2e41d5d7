"""Project files hard-linked elsewhere are replaced by copies of themselves before a run (git's objects aside); failures say why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.bwrap.parts.hardlinks import any_in, make_own, to_copy


@pytest.fixture
def store(tmp_path: Path) -> Path:
    folder = tmp_path / "store"
    folder.mkdir()
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def linked(store: Path, project: Path, name: str = "mod.py", text: str = "print('store')\n") -> tuple[Path, Path]:
    """A file in the store and its hard link in the project."""
    original = store / name
    original.write_text(text)
    inside = project / name
    os.link(original, inside)
    return original, inside


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        ("/p/.venv/lib/site-packages/mod.py", True),
        ("/p/node_modules/.pnpm/x/index.js", True),
        ("/p/.git/objects/ab/cdef", True),  # a sandbox can write one in place (a review's finding)
        ("/p/.git/lfs/objects/ab/cd/abcd", True),
        ("/p/sub/.git/objects/pack/pack-1.pack", True),
        ("/p/.git/index", True),
        ("/p/.git/objects-old/x", True),
        ("/p/git/objects/x", True),
    ],
)
def test_to_copy_takes_every_path_named(path: str, kept: bool) -> None:
    assert to_copy([path]) == ([path] if kept else [])


def test_to_copy_keeps_the_order() -> None:
    assert to_copy(["/b", "/p/.git/objects/x", "/a"]) == ["/b", "/p/.git/objects/x", "/a"]
    assert to_copy([]) == []


def test_a_linked_file_becomes_the_projects_own(store: Path, project: Path) -> None:
    original, inside = linked(store, project)
    os.chmod(original, 0o751)
    os.utime(original, (1_000_000, 2_000_000))
    assert make_own([str(inside)]) == (1, [])
    assert os.stat(inside).st_ino != os.stat(original).st_ino
    assert os.stat(original).st_nlink == 1 and os.stat(inside).st_nlink == 1
    assert inside.read_text() == "print('store')\n"
    info = os.stat(inside)
    assert (info.st_mode & 0o7777, info.st_mtime) == (0o751, 2_000_000)
    inside.write_text("changed in the sandbox\n")  # a write in place now changes only the project's copy
    assert original.read_text() == "print('store')\n"
    assert sorted(p.name for p in project.iterdir()) == ["mod.py"]  # no temporary left


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file another owner")
def test_root_keeps_the_owner(store: Path, project: Path) -> None:
    original, inside = linked(store, project)
    os.chown(original, 1234, 5678)
    assert make_own([str(inside)]) == (1, [])
    info = os.stat(inside)
    assert (info.st_uid, info.st_gid) == (1234, 5678)


def test_each_of_several_links_is_copied(store: Path, project: Path) -> None:
    _, one = linked(store, project, "a.py")
    _, two = linked(store, project, "b.py")
    assert make_own([str(one), str(two)]) == (2, [])


def test_two_project_links_to_one_store_file(store: Path, project: Path) -> None:
    original, first = linked(store, project, "a.py")
    second = project / "b.py"
    os.link(original, second)
    assert make_own([str(first), str(second)]) == (2, [])
    assert len({os.stat(p).st_ino for p in (original, first, second)}) == 3


def test_what_is_not_a_shared_regular_file_is_left(store: Path, project: Path) -> None:
    single = project / "single.py"
    single.write_text("x")
    link = project / "link.py"
    link.symlink_to(single)
    folder = project / "folder"
    folder.mkdir()
    before = {p: os.lstat(p).st_ino for p in (single, link, folder)}
    assert make_own([str(single), str(link), str(folder)]) == (0, [])
    assert {p: os.lstat(p).st_ino for p in (single, link, folder)} == before


def test_a_file_that_cannot_be_copied_is_a_line_each(store: Path, project: Path) -> None:
    _, fine = linked(store, project)
    gone = project / "gone.py"
    copied, failed = make_own([str(gone), str(fine)])
    assert copied == 1
    assert failed == [
        f"{gone} is a hard link shared with other places and could not be copied (No such file or directory): a write inside would change them too"
    ]


def test_a_file_that_changes_while_copied_is_left_and_no_copy_stays(store: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original, inside = linked(store, project)
    real_lstat = os.lstat
    seen: list[str] = []

    class Swapped:
        def __init__(self, info: os.stat_result) -> None:
            self.info = info

        def __getattr__(self, name: str) -> object:
            return self.info.st_ino + 1 if name == "st_ino" else getattr(self.info, name)

    def lstat(path: object, *args: object, **kwargs: object) -> object:
        info = real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]
        if str(path) == str(inside):
            seen.append(str(path))
            return Swapped(info) if len(seen) > 1 else info  # another file there by the time of the rename
        return info

    monkeypatch.setattr(os, "lstat", lstat)
    copied, failed = make_own([str(inside)])
    monkeypatch.undo()
    assert copied == 0 and len(failed) == 1 and "(it changed while being copied)" in failed[0]
    assert os.stat(inside).st_ino == os.stat(original).st_ino  # still the shared file, not half-replaced
    assert sorted(p.name for p in project.iterdir()) == ["mod.py"]


def test_an_interrupted_copy_leaves_no_temporary(store: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    _, inside = linked(store, project)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copystat", interrupted)
    with pytest.raises(KeyboardInterrupt):
        make_own([str(inside)])
    assert sorted(p.name for p in project.iterdir()) == ["mod.py"]


# -- any_in ----------------------------------------------------------------------------------------


def test_any_in_finds_a_linked_file(store: Path, project: Path) -> None:
    (project / "plain.py").write_text("x")
    assert any_in(str(project)) is False
    linked(store, project)
    assert any_in(str(project)) is True


def test_any_in_looks_at_the_folder_only(store: Path, project: Path) -> None:
    (project / "sub").mkdir()
    linked(store, project / "sub")
    assert any_in(str(project)) is False and any_in(str(project / "sub")) is True


def test_any_in_ignores_links_and_sees_gits_objects(store: Path, project: Path, tmp_path: Path) -> None:
    _, inside = linked(store, tmp_path)
    (project / "link.py").symlink_to(inside)  # a symlink to a shared file: not the folder's own
    objects = project / ".git" / "objects" / "ab"
    objects.mkdir(parents=True)
    linked(store, objects, "cdef")
    assert any_in(str(project)) is False and any_in(str(objects)) is True  # a shared object is copied too


def test_any_in_a_missing_folder_or_a_file_is_false(project: Path) -> None:
    (project / "f").write_text("")
    assert any_in(str(project / "missing")) is False and any_in(str(project / "f")) is False


def test_links_only_within_the_project_are_no_copy_at_all(tmp_path: Path) -> None:
    """Issue 33: a run that left a 100 MiB sparse file linked five times in the project made the next
    run write 400 MB; links that stay inside the project spread nothing outside it."""
    first = tmp_path / "big"
    with open(first, "wb") as handle:
        handle.truncate(100 << 20)
    names = [str(first)]
    for number in range(4):
        os.link(first, tmp_path / f"big{number}")
        names.append(str(tmp_path / f"big{number}"))
    assert to_copy(names) == []
    outside = tmp_path.parent / f"{tmp_path.name}-store"
    os.link(first, outside)  # the control: one link elsewhere, and every name of it is copied
    try:
        assert sorted(to_copy(names)) == sorted(names)
    finally:
        outside.unlink()


def test_a_sparse_file_is_copied_with_its_holes(tmp_path: Path) -> None:
    path, store = tmp_path / "sparse", tmp_path / "store"
    with open(path, "wb") as handle:
        handle.seek(50 << 20)
        handle.write(b"data")
    os.link(path, store)
    copied, failed = make_own([str(path)])
    assert (copied, failed) == (1, [])
    info = os.lstat(path)
    assert info.st_nlink == 1 and info.st_size == (50 << 20) + 4 and info.st_blocks * 512 < 1 << 20
    with open(path, "rb") as handle:
        handle.seek(50 << 20)
        assert handle.read() == b"data"


def test_data_over_the_runs_budget_stays_linked_and_is_named(tmp_path: Path) -> None:
    path, store = tmp_path / "dense", tmp_path / "store"
    path.write_bytes(os.urandom(1 << 20))
    os.link(path, store)
    copied, failed = make_own([str(path)], budget=1 << 19)
    assert copied == 0 and len(failed) == 1 and "stays linked" in failed[0]
    assert os.lstat(path).st_nlink == 2
