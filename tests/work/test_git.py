"""git inside the sandbox does what it does outside: the same exit codes, output, history and files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.work.realwork import Workplace


def git(cwd: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def _repository(project: Path, env: dict[str, str]) -> None:
    (project / "a.txt").write_text("one\n")
    (project / "name with spaces.txt").write_text("spaces\n")
    (project / "naïve-ünïcode.txt").write_text("accents\n")
    git(project, env, "init", "-q")
    git(project, env, "add", "-A")
    git(project, env, "commit", "-qm", "first")


EVERYDAY = """
set -e
echo two >> a.txt
git add -A && git commit -qm second
git branch feature && git checkout -q feature
echo three > b.txt && git add b.txt && git commit -qm third
git checkout -q main
echo wip >> a.txt && git stash -q && git stash list | wc -l
git rebase -q feature
git stash pop -q && git diff --stat
git log --format=%s
git worktree add -q ../wt-inside feature-wt 2>/dev/null || git worktree add -q -b feature-wt wt-here
git worktree list --porcelain | grep -c worktree
git status --porcelain
ls -A
"""


def test_everyday_git_matches_the_same_work_without_stockade(work: Workplace) -> None:
    bare, boxed = work.twice(lambda p: _repository(p, work.env), EVERYDAY)
    assert bare.code == 0, bare
    assert (boxed.code, boxed.out) == (bare.code, bare.out), boxed.err
    assert boxed.tree == bare.tree
    assert "Traceback" not in boxed.err and "renamed to" not in boxed.err, boxed.err


@pytest.mark.parametrize("protected", [False, True], ids=["fresh", "protected-files-exist"])
def test_fresh_repository_add_commit_and_listing_inside_equal_the_host(work: Workplace, protected: bool) -> None:
    def make(project: Path) -> None:
        (project / "only.txt").write_text("x\n")
        if protected:
            (project / ".envrc").write_text("export A=1\n")
            (project / ".npmrc").write_text("fund=false\n")
            (project / ".vscode").mkdir()
            (project / ".vscode" / "settings.json").write_text("{}\n")
        git(project, work.env, "init", "-q")

    script = "git add -A && git commit -qm x && git status --porcelain && ls -A && find . -path ./.git -prune -o -print | sort && git log --format=%H"
    bare, boxed = work.twice(make, script)
    assert bare.code == boxed.code == 0, boxed
    assert boxed.out == bare.out and boxed.tree == bare.tree


def _with_submodule(project: Path, env: dict[str, str], library: Path) -> None:
    _repository(project, env)
    git(project, env, "submodule", "add", "-q", str(library), "lib")
    git(project, env, "commit", "-qm", "lib")


@pytest.fixture
def library(work: Workplace) -> Path:
    lib = work.root / "library"
    lib.mkdir()
    _repository(lib, work.env)
    return lib


def test_work_inside_a_submodule_checkout(work: Workplace, library: Path) -> None:
    script = "echo sub > s.txt && git add s.txt && git commit -qm sub && git log --format=%s && git status --porcelain"
    bare, boxed = work.twice(lambda p: _with_submodule(p, work.env, library), script, workdir="lib")
    assert bare.code == 0 and (boxed.code, boxed.out) == (bare.code, bare.out), boxed.err
    assert boxed.tree == bare.tree


@pytest.fixture
def source(work: Workplace, library: Path) -> Path:
    """A repository with a submodule, to clone from."""
    folder = work.root / "source"
    folder.mkdir()
    _with_submodule(folder, work.env, library)
    return folder


def test_submodule_update_of_an_initialised_submodule(work: Workplace, source: Path) -> None:
    """A clone with its submodule registered (`git submodule init`, a host step: the repository's own
    config stays read-only inside), then `git submodule update` inside."""

    def make(project: Path) -> None:
        project.rmdir()
        git(work.root, work.env, "clone", "-q", str(source), str(project))
        git(project, work.env, "submodule", "init", "-q")

    bare, boxed = work.twice(make, "git submodule update -q && git -C lib log --format=%s && git submodule status | cut -c2-")
    assert bare.code == 0 and (boxed.code, boxed.out) == (bare.code, bare.out), boxed.err
    assert boxed.tree == bare.tree and "renamed to" not in boxed.err


def test_submodule_update_init_inside_works_and_names_the_local_url(work: Workplace, source: Path) -> None:
    """`--init` writes the repository's own config (staged, bwrap/running/gitstage.py): it works inside, and
    the submodule's URL, a local path here, is not carried to the host's config (a host fetch
    would copy whatever that path holds then); the run names it."""

    def make(project: Path) -> None:
        project.rmdir()
        git(work.root, work.env, "clone", "-q", str(source), str(project))

    bare, boxed = work.twice(make, "git submodule update --init -q && git submodule status | cut -c42-")
    assert bare.code == 0 and (boxed.code, boxed.out) == (bare.code, bare.out), boxed
    assert ".url" in boxed.err and "Traceback" not in boxed.err, boxed


def test_work_inside_a_linked_worktree(work: Workplace) -> None:
    def make(project: Path) -> None:
        main = project / "main"
        main.mkdir()
        _repository(main, work.env)
        git(main, work.env, "worktree", "add", "-q", "-b", "side", str(project / "side"))

    script = "echo w > w.txt && git add -A && git commit -qm in-worktree && git log --format=%s && git status --porcelain"
    bare, boxed = work.twice(make, script, workdir="side")
    assert bare.code == 0 and (boxed.code, boxed.out) == (bare.code, bare.out), boxed.err
    assert boxed.tree == bare.tree


def test_host_sees_nothing_new_while_the_run_lasts(work: Workplace) -> None:
    """During a run the host's `ls -A` and `git status --porcelain` show only what the command made
    (mount points for absent protected files used to appear on the host as well)."""
    import time

    from tests.work.realwork import STOCKADE

    work.project.mkdir()
    _repository(work.project, work.env)
    expected = sorted([*os.listdir(work.project), ".ready"])
    script = "touch .ready; while [ ! -e .go ]; do sleep 0.05; done; rm .ready .go; ls -A"
    run = subprocess.Popen(
        [*STOCKADE, "run", "--", "/bin/sh", "-c", script], cwd=work.project, env=work.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a timing check
        while not (work.project / ".ready").exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        during = sorted(os.listdir(work.project))
        status = git(work.project, work.env, "status", "--porcelain")
    finally:
        (work.project / ".go").touch()
        out, err = run.communicate(timeout=120)
    assert during == expected, during
    assert status == "?? .ready\n", status
    assert run.returncode == 0 and sorted(out.splitlines()) == sorted(os.listdir(work.project)), (out, err)
