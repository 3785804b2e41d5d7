"""plan_view on a small project tree: masks for deny_read, the read-only floor, deny_write carve-outs, writable roots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stockade.bwrap.parts import layers
from stockade.bwrap.parts.args import Bind, ReadOnlyBind, ReadOnlyBindFrom, Tmpfs
from stockade.bwrap.plan import mounts
from stockade.bwrap.plan.mounts import Mount, View, plan_view
from stockade.core.locations import Locations
from stockade.profiles.model import FilesystemRules, Policy
from tests.visible import force_rmtree, visible_root


@pytest.fixture
def root() -> Iterator[Path]:
    """A fresh folder on the visible root (tests/visible.py), not under /tmp."""
    folder = visible_root("mounts-").resolve()
    try:
        yield folder
    finally:
        force_rmtree(folder)


@pytest.fixture
def project(root: Path) -> Path:
    p = root / "proj"
    (p / "src").mkdir(parents=True)
    (p / ".env").write_text("TOKEN=1\n")
    (p / "src" / ".env").write_text("TOKEN=2\n")
    (p / "src" / "main.py").write_text("print(1)\n")
    (p / "secret").mkdir()
    (p / "secret" / "key").write_text("k")
    (p / "dist").mkdir()
    (p / ".git" / "hooks").mkdir(parents=True)
    (p / ".envrc").write_text("export X=1\n")
    return p


def locations(root: Path) -> Locations:
    home = root / "home"
    home.mkdir(exist_ok=True)
    return Locations(home=home, config=home / "config", state=home / "state", cache=home / "cache", runtime=home / "run")


def view_of(root: Path, project: Path, **rules: tuple[str, ...]) -> View:
    rules.setdefault("allow_write", (str(project),))
    policy = Policy(filesystem=FilesystemRules(**rules), project_dir=project)
    return plan_view(policy, locations(root), str(project))


def mount_at(view: View, path: Path) -> Mount:
    (found,) = [m for m in view.mounts if m.path == str(path)]
    return found


def test_the_project_is_the_writable_root(root: Path, project: Path) -> None:
    view = view_of(root, project)
    assert view.project == str(project)
    assert view.writable == [str(project)]
    mount = mount_at(view, project)
    assert type(mount.piece) is Bind and mount.rank == 0


def test_deny_read_masks_files_with_dev_null_and_folders_with_an_empty_tmpfs(root: Path, project: Path) -> None:
    view = view_of(root, project, deny_read=(f"{project}/**/.env", f"{project}/secret"))
    assert sorted(view.masked) == sorted([str(project / ".env"), str(project / "src" / ".env"), str(project / "secret")])
    for name in (".env", "src/.env"):
        mount = mount_at(view, project / name)
        assert type(mount.piece) is ReadOnlyBindFrom and mount.piece.source == "/dev/null" and mount.rank == 3
    folder = mount_at(view, project / "secret").piece
    assert type(folder) is Tmpfs and folder.read_only and folder.mode == "0000"
    assert str(project / "src" / "main.py") not in view.masked


def test_a_masks_parent_inside_a_writable_root_is_pinned(root: Path, project: Path) -> None:
    view = view_of(root, project, deny_read=(f"{project}/**/.env",))
    pin = mount_at(view, project / "src")
    assert type(pin.piece) is Bind and pin.rank == 1  # a rename of src/ cannot carry the mask away


def test_without_deny_read_nothing_is_masked_in_the_project(root: Path, project: Path) -> None:
    view = view_of(root, project)
    assert not any(path.startswith(str(project)) for path in view.masked)


def test_the_floor_keeps_runs_later_files_read_only(root: Path, project: Path) -> None:
    view = view_of(root, project)
    assert {str(project / ".git" / "hooks"), str(project / ".envrc")} <= set(view.read_only)
    for path in (project / ".git" / "hooks", project / ".envrc"):
        mount = mount_at(view, path)
        assert type(mount.piece) is ReadOnlyBind and mount.rank == 2
    assert str(project / "src" / "main.py") not in view.read_only


def test_absent_floor_files_are_watched_not_mounted(root: Path, project: Path) -> None:
    view = view_of(root, project)
    absent = dict(view.unguarded)
    assert absent[str(project / ".stockade.toml")] == str(project / ".stockade.toml")
    assert absent[str(project / ".git" / "config")] == str(project / ".git" / "config")
    assert str(project / ".envrc") not in absent  # it exists: a read-only mount, not a watch
    assert not any(m.path == str(project / ".stockade.toml") for m in view.mounts)


def test_deny_write_is_a_read_only_carve_out(root: Path, project: Path) -> None:
    view = view_of(root, project, deny_write=(f"{project}/dist",))
    assert str(project / "dist") in view.read_only and str(project / "dist") not in view.writable
    assert type(mount_at(view, project / "dist").piece) is ReadOnlyBind


def test_deny_read_beats_allow_write(root: Path, project: Path) -> None:
    view = view_of(root, project, allow_write=(str(project), str(project / "secret")), deny_read=(f"{project}/secret",))
    assert str(project / "secret") in view.masked
    assert str(project / "secret") not in view.writable


def test_a_second_writable_root(root: Path, project: Path) -> None:
    out = root / "out"
    out.mkdir()
    view = view_of(root, project, allow_write=(str(project), str(out)))
    assert set(view.writable) == {str(project), str(out)}
    assert type(mount_at(view, out).piece) is Bind
    assert str(out / ".envrc") in dict(view.unguarded)  # the floor applies at every writable root


def test_nothing_writable_means_no_writable_bind(root: Path, project: Path) -> None:
    view = view_of(root, project, allow_write=())
    assert view.writable == []
    assert not any(type(m.piece) is Bind and m.path.startswith(str(project)) for m in view.mounts)


@pytest.mark.parametrize("path", ["/home/u/proj/..", "/home/u/./proj", "/home/u//proj", "home/u", "/home/u/"])
def test_a_mount_path_that_is_not_plain_is_refused(path: str) -> None:
    """Mounts are ordered by how deep they are; `/a/b/..` counts deeper than `/a/x` and would cover it."""
    from stockade.core.errors import SandboxSetupError

    view = View()
    with pytest.raises(SandboxSetupError, match="not a plain absolute path"):
        view.add(path, 0, Bind(path))
    view.add("/home/u/proj", 0, Bind("/home/u/proj"))  # control: a plain path is planned
    assert [m.path for m in view.mounts] == ["/home/u/proj"]


def test_the_layered_caches_hold_the_built_in_profiles_writable_places() -> None:
    """layers.BUILTIN_CACHES is the built-in profiles' allow_write, but the project: a new cache there is named here too."""
    import tomllib
    from importlib import resources

    named = set()
    for item in resources.files("stockade.profiles.builtin").iterdir():
        if item.name.endswith(".toml"):
            named.update(tomllib.loads(item.read_text()).get("filesystem", {}).get("allow_write", []))
    assert named - {"."} == set(layers.BUILTIN_CACHES)


def test_other_places_are_each_writable_folder_outside_the_project_but_caches_and_system_tops(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project, src, deep, npm = home / "proj", home / "src", home / "src" / "deep", home / ".npm"
    for folder in (project / "sub", deep, npm):
        folder.mkdir(parents=True)
    entries = (str(project), str(project / "sub"), str(src), str(deep), str(npm), "/tmp", str(home / "absent"))
    assert mounts._other_places(entries, str(project), str(home)) == [str(src)]
    assert mounts._other_places((str(home), str(src)), str(project), str(home)) == [str(home)]  # the outer one, holding the project


def test_other_places_stay_watched_when_the_projects_walk_is_cut_short(root: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project past the walk's limit (one the sandbox can grow) must not switch off the check of every other place."""
    from stockade.bwrap.parts import globs

    src = root / "src"
    (src / "other" / ".git" / "hooks").mkdir(parents=True)
    for number in range(30):
        (project / "src" / f"m{number}.py").write_text("x")
    monkeypatch.setattr(globs, "MAX_ENTRIES", 20)
    view = view_of(root, project, allow_write=(str(project), str(src)))
    assert view.watch_roots == [str(src)]
    assert view.watched.tree is None  # the project's record is gone: the check walks every pattern again
    assert str(src / "other" / ".git" / "hooks") in view.read_only  # its repository held as before


def test_a_place_whose_walk_is_cut_short_is_named_and_its_repositories_still_held(root: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.bwrap.parts import globs

    src = root / "src"
    (src / ".git" / "hooks").mkdir(parents=True)  # found before the walk stops
    for number in range(40):
        (src / f"z{number}").write_text("x")
    monkeypatch.setattr(globs, "MAX_ENTRIES", 30)
    view = view_of(root, project, allow_write=(str(project), str(src)))
    assert view.watch_roots == []
    assert any(str(src) in note and "cannot check it" in note for note in view.notes), view.notes
    assert str(src / ".git" / "hooks") in view.read_only


def test_a_worktree_in_another_place_does_not_make_its_main_repository_writable(root: Path, project: Path) -> None:
    """Its git data lies in a repository outside every allow_write entry: that stays read-only (review of issue 32)."""
    import subprocess

    main, src = root / "main", root / "src"
    src.mkdir()
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    subprocess.run(["git", "init", "-q", str(main)], check=True, env=env)
    subprocess.run(["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=env)
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(src / "wt")], check=True, env=env, capture_output=True)
    view = view_of(root, project, allow_write=(str(project), str(src)))
    assert not [place for place in view.writable if place.startswith(str(main))], view.writable
