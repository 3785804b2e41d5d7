"""Where a repository's git data lives in each layout (folder, gitdir file, link, worktree, submodule, GIT_DIR) and which of it runs code later."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.profiles import gitdirs
from stockade.profiles.gitdirs import (
    GitLayout,
    UserGit,
    common_dir_of,
    environment_hooks_paths,
    from_environment,
    locate,
    module_git_dirs,
    pointer_target,
    points_back,
    protected_for,
    protected_paths,
    runs_later,
    user_configs,
    user_hooks_paths,
    worktree_git_dirs,
)


def git_dir(path: Path) -> Path:
    """A bare-bones git dir: HEAD, config, hooks."""
    (path / "hooks").mkdir(parents=True)
    (path / "HEAD").write_text("ref: refs/heads/main\n")
    (path / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    return path


def plain(tmp_path: Path, name: str = "repo") -> Path:
    work = tmp_path / name
    git_dir(work / ".git")
    return work


def worktree(main: Path, tmp_path: Path, name: str = "wt") -> tuple[Path, Path]:
    """A linked worktree of `main`, as `git worktree add` writes it: (work tree, its git dir)."""
    work = tmp_path / name
    work.mkdir()
    own = main / ".git" / "worktrees" / name
    own.mkdir(parents=True)
    (own / "HEAD").write_text("ref: refs/heads/wt\n")
    (own / "commondir").write_text("../..\n")
    (own / "gitdir").write_text(f"{work}/.git\n")
    (work / ".git").write_text(f"gitdir: {own}\n")
    return work, own


# -- pointer_target and common_dir_of -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "target"),
    [
        pytest.param("gitdir: ../real\n", "REAL", id="relative"),
        pytest.param("gitdir: ABS\n", "REAL", id="absolute"),
        pytest.param("gitdir:../real", "REAL", id="no-space-no-newline"),
        pytest.param("gitdir:   ../real  \r\nignored\n", "REAL", id="whitespace-and-second-line"),
        pytest.param("gitdir: \n", None, id="empty-target"),
        pytest.param("gitdir:\n", None, id="nothing"),
        pytest.param("ref: refs/heads/main\n", None, id="not-a-pointer"),
        pytest.param("", None, id="empty-file"),
        pytest.param("gitdir: ../re\0al\n", None, id="nul"),
        pytest.param("GITDIR: ../real\n", None, id="case-matters"),
    ],
)
def test_pointer_target(tmp_path: Path, text: str, target: str | None) -> None:
    real = tmp_path / "real"
    real.mkdir()
    pointer = tmp_path / "work" / ".git"
    pointer.parent.mkdir()
    pointer.write_text(text.replace("ABS", str(real)))
    assert pointer_target(str(pointer)) == (str(real) if target else None)


def test_pointer_target_of_a_folder_or_nothing(tmp_path: Path) -> None:
    assert pointer_target(str(tmp_path)) is None and pointer_target(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(
    ("text", "common"),
    [
        (None, "GIT"),
        ("../..\n", "MAIN"),
        ("../..", "MAIN"),
        ("ABS\n", "MAIN"),
        ("\n", "GIT"),
        ("../\0..\n", "GIT"),
    ],
)
def test_common_dir_of(tmp_path: Path, text: str | None, common: str) -> None:
    main = git_dir(tmp_path / "main" / ".git")
    own = main / "worktrees" / "wt"
    own.mkdir(parents=True)
    if text is not None:
        (own / "commondir").write_text(text.replace("ABS", str(main)))
    assert common_dir_of(str(own)) == str(main if common == "MAIN" else own)


# -- locate ------------------------------------------------------------------------------------------


def test_no_dot_git_no_repository(tmp_path: Path) -> None:
    assert locate(str(tmp_path)) is None


def test_a_plain_repository(tmp_path: Path) -> None:
    work = plain(tmp_path)
    layout = locate(str(work))
    assert layout is not None
    assert (layout.work_tree, layout.dot_git, layout.git_dir, layout.common_dir) == (
        str(work),
        str(work / ".git"),
        str(work / ".git"),
        str(work / ".git"),
    )
    assert layout.linked is False


def test_a_linked_worktree(tmp_path: Path) -> None:
    main = plain(tmp_path, "main")
    work, own = worktree(main, tmp_path)
    layout = locate(str(work))
    assert layout is not None
    assert (layout.git_dir, layout.common_dir, layout.linked) == (str(own), str(main / ".git"), True)


def test_a_dot_git_link_to_a_git_dir(tmp_path: Path) -> None:
    real = git_dir(tmp_path / "elsewhere.git")
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").symlink_to(real)
    layout = locate(str(work))
    assert layout is not None and layout.git_dir == str(real) and layout.linked is True


@pytest.mark.parametrize("kind", ["dangling-link", "link-to-a-file", "pointer-to-nothing", "not-a-pointer", "fifo"])
def test_what_is_not_a_repository(tmp_path: Path, kind: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    dot_git = work / ".git"
    if kind == "dangling-link":
        dot_git.symlink_to(tmp_path / "gone")
    elif kind == "link-to-a-file":
        (tmp_path / "f").write_text("gitdir: /x\n")
        dot_git.symlink_to(tmp_path / "f")
    elif kind == "pointer-to-nothing":
        dot_git.write_text(f"gitdir: {tmp_path / 'gone'}\n")
    elif kind == "not-a-pointer":
        dot_git.write_text("hello\n")
    else:
        os.mkfifo(dot_git)
    assert locate(str(work)) is None


def test_linked_without_a_dot_git() -> None:
    assert GitLayout(None, None, "/g", "/g").linked is True


# -- points_back ------------------------------------------------------------------------------------------


def test_a_worktree_named_back_by_its_git_dir(tmp_path: Path) -> None:
    main = plain(tmp_path, "main")
    work, own = worktree(main, tmp_path)
    layout = locate(str(work))
    assert layout is not None and points_back(layout) is True
    (own / "gitdir").write_text(f"{tmp_path / 'other'}/.git\n")  # it names another work tree
    assert points_back(layout) is False


def test_a_planted_pointer_to_another_repository_does_not_point_back(tmp_path: Path) -> None:
    victim = git_dir(tmp_path / "victim.git")
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").write_text(f"gitdir: {victim}\n")
    layout = locate(str(work))
    assert layout is not None and points_back(layout) is False


def test_a_submodule_named_back_by_core_worktree(tmp_path: Path) -> None:
    top = plain(tmp_path, "top")
    module = git_dir(top / ".git" / "modules" / "lib")
    (module / "config").write_text("[core]\n\tworktree = ../../../lib\n")
    sub = top / "lib"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../.git/modules/lib\n")
    layout = locate(str(sub))
    assert layout is not None and layout.git_dir == str(module) and points_back(layout) is True
    (module / "config").write_text("[core]\n\tworktree = ../../../elsewhere\n")
    assert points_back(layout) is False


def test_points_back_needs_a_regular_pointer_and_a_real_git_dir(tmp_path: Path) -> None:
    main = plain(tmp_path, "main")
    work, own = worktree(main, tmp_path)
    layout = locate(str(work))
    assert layout is not None
    assert points_back(GitLayout(layout.work_tree, None, layout.git_dir, layout.common_dir)) is True  # GIT_DIR: the user's word
    linked_dot_git = tmp_path / "link.git"
    linked_dot_git.symlink_to(work / ".git")
    assert points_back(GitLayout(str(work), str(linked_dot_git), str(own), str(main / ".git"))) is False
    linked_git_dir = tmp_path / "gitdir-link"
    linked_git_dir.symlink_to(own)
    assert points_back(GitLayout(str(work), str(work / ".git"), str(linked_git_dir), str(main / ".git"))) is False


# -- GIT_DIR and the user's config ------------------------------------------------------------------------------


def test_from_environment(tmp_path: Path) -> None:
    main = git_dir(tmp_path / "repo.git")
    assert from_environment({}, str(tmp_path)) is None
    assert from_environment({"GIT_DIR": "missing.git"}, str(tmp_path)) is None
    layout = from_environment({"GIT_DIR": "repo.git"}, str(tmp_path))
    assert layout is not None
    assert (layout.work_tree, layout.dot_git, layout.git_dir, layout.common_dir) == (None, None, str(main), str(main))
    layout = from_environment({"GIT_DIR": str(main), "GIT_COMMON_DIR": "common", "GIT_WORK_TREE": "tree"}, str(tmp_path))
    assert layout is not None and (layout.common_dir, layout.work_tree) == (str(tmp_path / "common"), str(tmp_path / "tree"))


@pytest.mark.parametrize(
    ("env", "files"),
    [
        pytest.param({}, ["/etc/gitconfig", "/h/.config/git/config", "/h/.gitconfig"], id="defaults"),
        pytest.param({"XDG_CONFIG_HOME": "/x"}, ["/etc/gitconfig", "/x/git/config", "/h/.gitconfig"], id="xdg"),
        pytest.param({"XDG_CONFIG_HOME": "rel"}, ["/etc/gitconfig", "/h/.config/git/config", "/h/.gitconfig"], id="relative-xdg-ignored"),
        pytest.param({"GIT_CONFIG_SYSTEM": "/s", "GIT_CONFIG_GLOBAL": "/g"}, ["/s", "/h/.config/git/config", "/g"], id="git-variables"),
        pytest.param({"GIT_CONFIG_SYSTEM": "", "GIT_CONFIG_GLOBAL": ""}, ["/etc/gitconfig", "/h/.config/git/config", "/h/.gitconfig"],
                     id="empty-variables"),
    ],
)  # fmt: skip
def test_user_configs(env: dict[str, str], files: list[str]) -> None:
    assert user_configs("/h", env) == files


@pytest.mark.parametrize(
    ("env", "found"),
    [
        pytest.param({}, [], id="none"),
        pytest.param({"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "me",
                      "GIT_CONFIG_KEY_1": "core.hooksPath", "GIT_CONFIG_VALUE_1": "/hooks"}, ["/hooks"], id="one-of-two"),
        pytest.param({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "CORE.HOOKSPATH", "GIT_CONFIG_VALUE_0": "h"}, ["h"], id="any-case"),
        pytest.param({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": ""}, [], id="empty-value"),
        pytest.param({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_1": "core.hooksPath", "GIT_CONFIG_VALUE_1": "/h"}, [], id="past-the-count"),
        pytest.param({"GIT_CONFIG_COUNT": "x", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/h"}, [], id="bad-count"),
        pytest.param({"GIT_CONFIG_COUNT": "-1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/h"}, [], id="negative"),
    ],
)  # fmt: skip
def test_environment_hooks_paths(env: dict[str, str], found: list[str]) -> None:
    assert environment_hooks_paths(env) == found


def test_the_environment_is_read_up_to_a_thousand_entries() -> None:
    env = {"GIT_CONFIG_COUNT": "5000", "GIT_CONFIG_KEY_999": "core.hooksPath", "GIT_CONFIG_VALUE_999": "/in",
           "GIT_CONFIG_KEY_1000": "core.hooksPath", "GIT_CONFIG_VALUE_1000": "/out"}  # fmt: skip
    assert environment_hooks_paths(env) == ["/in"]


def test_user_git_reads_every_config_and_its_includes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / "extra.inc").write_text("[core]\n\thooksPath = ~/included-hooks\n")
    (home / ".gitconfig").write_text("[include]\n\tpath = ~/extra.inc\n[core]\n\thooksPath = ~/global-hooks\n")
    (home / ".config" / "git" / "config").write_text("[core]\n\thooksPath = .githooks\n")
    env = {"GIT_CONFIG_SYSTEM": str(tmp_path / "none"), "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/env"}
    user = UserGit(str(home), env)
    assert user.included == [str(home / "extra.inc")]
    assert sorted(user.hook_values) == sorted([".githooks", "~/included-hooks", "~/global-hooks", "/env"])
    assert user_hooks_paths(str(home), env) == user.hook_values


# -- module and worktree git dirs ------------------------------------------------------------------------------


def test_module_git_dirs_nested_and_slashed_names(tmp_path: Path) -> None:
    common = git_dir(tmp_path / ".git")
    a = git_dir(common / "modules" / "a")
    nested = git_dir(a / "modules" / "inner")
    slashed = git_dir(common / "modules" / "group" / "b")
    (common / "modules" / "file").write_text("")
    (common / "modules" / "link").symlink_to(a)
    assert sorted(module_git_dirs(str(common))) == sorted([str(a), str(nested), str(slashed)])
    assert module_git_dirs(str(tmp_path / "none")) == []


def test_module_git_dirs_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    common = git_dir(tmp_path / ".git")
    for index in range(5):
        git_dir(common / "modules" / f"m{index}")
    monkeypatch.setattr(gitdirs, "MAX_MODULES", 3)
    assert len(module_git_dirs(str(common))) == 5  # one folder's entries are taken whole
    for index in range(5):
        git_dir(common / "modules" / f"m{index}" / "modules" / "inner")
    assert len(module_git_dirs(str(common))) == 5  # no folder further is opened once the cap is reached


def test_worktree_git_dirs(tmp_path: Path) -> None:
    common = git_dir(tmp_path / ".git")
    assert worktree_git_dirs(str(common)) == []
    for name in ("b", "a"):
        (common / "worktrees" / name).mkdir(parents=True)
    (common / "worktrees" / "file").write_text("")
    (common / "worktrees" / "link").symlink_to(common / "worktrees" / "a")
    assert worktree_git_dirs(str(common)) == [str(common / "worktrees" / "a"), str(common / "worktrees" / "b")]


# -- runs_later, protected_paths, protected_for -------------------------------------------------------------------


def nobody(home: Path) -> UserGit:
    return UserGit(str(home), {"GIT_CONFIG_SYSTEM": str(home / "no-system"), "XDG_CONFIG_HOME": str(home / "no-xdg")})


def test_a_plain_repository_runs_its_hooks_and_config(tmp_path: Path) -> None:
    work, home = plain(tmp_path), tmp_path / "home"
    layout = locate(str(work))
    assert layout is not None
    g = work / ".git"
    assert runs_later(layout, str(home), nobody(home)) == [f"{g}/hooks", f"{g}/config", f"{g}/commondir", f"{g}/config.worktree"]


def test_a_worktree_adds_its_own_and_the_others(tmp_path: Path) -> None:
    main, home = plain(tmp_path, "main"), tmp_path / "home"
    work, own = worktree(main, tmp_path, "wt")
    _, other = worktree(main, tmp_path, "zz")
    layout = locate(str(work))
    assert layout is not None
    g = main / ".git"
    paths = runs_later(layout, str(home), nobody(home))
    assert paths[:8] == [f"{g}/hooks", f"{g}/config", f"{g}/commondir", f"{g}/config.worktree",
                         f"{own}/commondir", f"{own}/config.worktree", f"{own}/config", f"{own}/hooks"]  # fmt: skip
    assert f"{other}/commondir" in paths and f"{other}/config.worktree" in paths
    assert len(paths) == len(set(paths))


def test_submodules_and_hooks_paths_and_includes(tmp_path: Path) -> None:
    work, home = plain(tmp_path), tmp_path / "home"
    g = work / ".git"
    module = git_dir(g / "modules" / "lib")
    (tmp_path / "inc.cfg").write_text("[core]\n\thooksPath = /abs/hooks\n")
    (g / "config").write_text(f"[include]\n\tpath = {tmp_path / 'inc.cfg'}\n[core]\n\thooksPath = .githooks\n")
    layout = locate(str(work))
    assert layout is not None
    paths = runs_later(layout, str(home), nobody(home))
    assert f"{module}/hooks" in paths and f"{module}/config" in paths
    assert str(tmp_path / "inc.cfg") in paths
    assert str(work / ".githooks") in paths and "/abs/hooks" in paths


def test_protected_paths_add_the_pointer_file_and_the_users_absolute_hooks(tmp_path: Path) -> None:
    main, home = plain(tmp_path, "main"), tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = ~/hooks\n")
    work, _ = worktree(main, tmp_path)
    layout = locate(str(work))
    assert layout is not None
    env = {"GIT_CONFIG_SYSTEM": str(home / "none"), "XDG_CONFIG_HOME": str(home / "none")}
    paths = protected_paths([layout], str(home), env)
    assert paths[0] == str(work / ".git")
    assert str(home / "hooks") in paths and len(paths) == len(set(paths))
    (home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")  # relative: per repository only
    paths = protected_paths([layout], str(home), env)
    assert str(work / ".githooks") in paths and "/.githooks" not in paths


def test_protected_for_keeps_what_lies_in_writable_places(tmp_path: Path) -> None:
    work, home = plain(tmp_path), tmp_path / "home"
    bare = git_dir(tmp_path / "bare.git")
    env = {"GIT_CONFIG_SYSTEM": str(home / "none"), "XDG_CONFIG_HOME": str(home / "none"), "GIT_DIR": str(bare)}
    paths = protected_for((str(work), str(work)), (str(work),), str(home), env, str(tmp_path))
    assert paths == [f"{work}/.git/hooks", f"{work}/.git/config", f"{work}/.git/commondir", f"{work}/.git/config.worktree"]
    paths = protected_for((str(work),), (str(tmp_path),), str(home), env, str(tmp_path))
    assert f"{bare}/hooks" in paths  # GIT_DIR's repository too, once writable
    assert protected_for((str(work),), (str(tmp_path / "elsewhere"),), str(home), env, str(tmp_path)) == []
