"""Which git config entries made inside a run may stay (gitcheck.inert_entry)."""

from __future__ import annotations

import pytest

from stockade.bwrap.gitcheck import inert_entry


@pytest.mark.parametrize(("key", "value"), [
    ("core.repositoryformatversion", "0"), ("core.worktree", "../../../lib"), ("remote.origin.url", "/srv/lib"),
    ("remote.origin.url", "https://example.test/x.git"), ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
    ("branch.main.remote", "origin"), ("submodule.lib.url", "/srv/lib"), ("submodule.lib.update", "rebase"),
])
def test_inert(key: str, value: str) -> None:
    assert inert_entry(key, value)


@pytest.mark.parametrize(("key", "value"), [
    ("core.fsmonitor", "touch x"), ("core.hookspath", "h"), ("core.sshcommand", "x"), ("include.path", "x"),
    ("includeif.gitdir:/.path", "x"), ("remote.origin.uploadpack", "x"), ("remote.origin.url", "ext::sh -c x"),
    ("remote.origin.url", "-oProxyCommand=x"), ("submodule.lib.update", "!sh -c x"), ("filter.lfs.process", "x"),
    ("alias.st", "!x"), ("core.pager", "x"), ("diff.x.textconv", "x"), ("credential.helper", "x"),
])
def test_not_inert(key: str, value: str) -> None:
    assert not inert_entry(key, value)
