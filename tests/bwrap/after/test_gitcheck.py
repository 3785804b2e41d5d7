"""Which git config entries made inside a run may stay (gitcheck.inert_entry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.bwrap.after.gitcheck import inert_entry, user_hook_folders


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.repositoryformatversion", "0"),
        ("core.worktree", "../../../lib"),
        ("remote.origin.url", "/srv/lib"),
        ("remote.origin.url", "https://example.test/x.git"),
        ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
        ("branch.main.remote", "origin"),
        ("submodule.lib.url", "/srv/lib"),
        ("submodule.lib.update", "rebase"),
    ],
)
def test_inert(key: str, value: str) -> None:
    assert inert_entry(key, value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.fsmonitor", "touch x"),
        ("core.hookspath", "h"),
        ("core.sshcommand", "x"),
        ("include.path", "x"),
        ("includeif.gitdir:/.path", "x"),
        ("remote.origin.uploadpack", "x"),
        ("remote.origin.url", "ext::sh -c x"),
        ("remote.origin.url", "-oProxyCommand=x"),
        ("submodule.lib.update", "!sh -c x"),
        ("filter.lfs.process", "x"),
        ("alias.st", "!x"),
        ("core.pager", "x"),
        ("diff.x.textconv", "x"),
        ("credential.helper", "x"),
        ("remote.o.promisor", "true"),
        ("remote.o.partialclonefilter", "blob:none"),  # host `git log -p` would fetch by itself
    ],
)
def test_not_inert(key: str, value: str) -> None:
    assert not inert_entry(key, value)


def test_a_moved_work_tree_moves_the_users_relative_hooks_folder_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's `core.hooksPath = .githooks` is read from the work tree: one the run's config moved
    (`core.worktree = ../sub`) is where git looks, so the hooks planted there are moved aside too."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    git_dir = project / "lib" / ".git"
    for folder in ("objects", "refs"):
        (git_dir / folder).mkdir(parents=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (git_dir / "config").write_text("[core]\n\tworktree = ../../sub\n")
    (project / "sub" / ".githooks").mkdir(parents=True)
    (project / "lib" / ".githooks").mkdir(parents=True)
    found = user_hook_folders([str(git_dir / "config")])
    assert str(project / "sub" / ".githooks") in found and str(project / "lib" / ".githooks") in found
