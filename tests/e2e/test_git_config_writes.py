"""git writes its own config inside the sandbox, and nothing in it that runs a program reaches
the host (bwrap/running/gitstage.py; issue 31, item 1).

Real git in real sandboxes: `git remote add`, `git checkout` of a remote branch, `git push -u`
and `git config user.name` persist after the run; keys that make the host's git run a program
are left out and named, and the host's config never holds them, not even while the run goes on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.test_e_persistence import GIT_ENV, git

pytestmark = pytest.mark.e2e


def _local_config(box: Box, repo: Path | None = None) -> str:
    return git(box, "config", "--local", "-l", cwd=repo or box.project).stdout


def _clone_with_upstream(box: Box) -> None:
    """The project is a clone of a bare repository inside it (the sandbox sees both)."""
    upstream = box.project / "upstream.git"
    git(box, "init", "-q", "--bare", str(upstream))
    work = box.root / "seed"
    git(box, "init", "-q", str(work))
    git(box, "-C", str(work), "commit", "-q", "--allow-empty", "-m", "one")
    git(box, "-C", str(work), "branch", "feature")
    git(box, "-C", str(work), "push", "-q", str(upstream), "HEAD:refs/heads/main", "feature")
    git(box, "init", "-q")
    git(box, "remote", "add", "origin", str(upstream))
    git(box, "fetch", "-q", "origin")
    git(box, "checkout", "-q", "-b", "main", "origin/main")


@contextlib.contextmanager
def _paused_run(vbox: Box, first: str, then: str = "true") -> Iterator[subprocess.Popen[str]]:
    """A run that does `first`, waits while the test looks at the host, then does `then` and ends."""
    ready, go = vbox.project / "ready", vbox.project / "go"
    script = f"{first} && : > ready && while [ ! -e go ]; do sleep 0.05; done && {then}"
    process = subprocess.Popen([*vbox.command_words(), "--", "/bin/sh", "-c", script], cwd=vbox.project, env={**vbox.env, **GIT_ENV},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), process.communicate(timeout=10)
        yield process
    finally:
        go.touch()
        process.wait(timeout=30)


def test_everyday_config_writes_work_inside_and_persist(vbox: Box) -> None:
    _clone_with_upstream(vbox)
    result = vbox.run(
        "git checkout -q feature && git remote add mirror https://example.invalid/m.git && git config user.name Agent"
        " && git push -q -u origin HEAD:refs/heads/topic && git config --local -l",
        env=GIT_ENV,
    )
    assert result.returncode == 0, result
    assert "Device or resource busy" not in result.stderr
    after = _local_config(vbox)
    for line in (
        "branch.feature.remote=origin",
        "remote.mirror.url=https://example.invalid/m.git",
        "user.name=Agent",
        "branch.feature.merge=refs/heads/topic",
    ):
        assert line in result.stdout and line in after, (line, result.stdout, after)
    assert git(vbox, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "feature"
    assert "stockade:" not in result.stderr, result.stderr  # nothing refused, nothing to say


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("git config core.fsmonitor 'touch {marker}'", "core.fsmonitor"),
        ("git config alias.st '!touch {marker}'", "alias.st"),
        ("git config core.pager 'touch {marker}; cat'", "core.pager"),
        ("printf '[include]\\n\\tpath = ../evil.cfg\\n' >> .git/config", "include.path"),
        ("git config 'filter.x.clean' 'touch {marker}'", "filter.x.clean"),
        ("git config credential.helper '!touch {marker}'", "credential.helper"),
    ],
)
def test_a_key_that_runs_a_program_is_left_out_and_named(vbox: Box, command: str, key: str) -> None:
    git(vbox, "init", "-q")
    marker = vbox.root / "RAN"
    (vbox.project / "evil.cfg").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    result = vbox.run(command.format(marker=marker) + " && git config user.email agent@example.invalid && echo WROTE", env=GIT_ENV)
    assert "WROTE" in result.stdout, result  # control: git's write itself works inside
    assert key in result.stderr, result
    after = _local_config(vbox)
    assert "user.email=agent@example.invalid" in after  # the inert part of the same change is kept
    assert key not in after.lower()
    git(vbox, "status", "--short")
    git(vbox, "st", check=False)
    git(vbox, "-c", "core.pager=cat", "log", "-1", check=False)
    assert not marker.exists(), "the host's git ran what the sandbox put in its config"


def test_the_hosts_config_never_holds_the_key_while_the_run_goes_on(vbox: Box) -> None:
    """An editor runs `git status` on the host every few seconds: a key written through during the
    run would run at once, before any check after it."""
    git(vbox, "init", "-q")
    before = (vbox.project / ".git" / "config").read_bytes()
    with _paused_run(vbox, "git config core.fsmonitor 'touch /x'") as process:
        assert (vbox.project / ".git" / "config").read_bytes() == before  # the host's git reads its own file
    err = process.stderr.read() if process.stderr else ""
    assert process.returncode == 0, err
    assert "core.fsmonitor" in err
    assert (vbox.project / ".git" / "config").read_bytes() == before


def test_commits_rebases_and_stashes_leave_the_same_repository_as_bare_git(vbox: Box) -> None:
    git(vbox, "init", "-q", "-b", "main")
    (vbox.project / "f").write_text("one\n")
    git(vbox, "add", "f")
    git(vbox, "commit", "-qm", "first")
    script = (
        "git checkout -q -b side && echo side >> f && git commit -qam side"
        " && git checkout -q - && echo main > g && git add g && git commit -qm main"
        " && git checkout -q side && git rebase -q main && echo wip >> f && git stash -q"
        " && git checkout -q -b conflict main && echo c > g && git commit -qam c"
        " && (git rebase main side >/dev/null 2>&1; true) && git status --short"
    )
    result = vbox.run(script, env=GIT_ENV)
    assert result.returncode == 0, result
    assert "stockade:" not in result.stderr, result.stderr
    log = git(vbox, "log", "--all", "--format=%s").stdout.split()
    assert {"first", "side", "main", "c"} <= set(log)
    assert git(vbox, "stash", "list").stdout.strip()
    git(vbox, "fsck", "--no-progress")
    status = git(vbox, "status").stdout
    assert "working tree clean" in status or "nothing to commit" in status, status


def test_an_interrupted_rebase_continues_inside(vbox: Box) -> None:
    git(vbox, "init", "-q", "-b", "main")
    (vbox.project / "f").write_text("base\n")
    git(vbox, "add", "f")
    git(vbox, "commit", "-qm", "base")
    git(vbox, "checkout", "-q", "-b", "side")
    (vbox.project / "f").write_text("side\n")
    git(vbox, "commit", "-qam", "side")
    git(vbox, "checkout", "-q", "-")
    (vbox.project / "f").write_text("main\n")
    git(vbox, "commit", "-qam", "main")
    git(vbox, "checkout", "-q", "side")
    assert git(vbox, "rebase", "main", check=False).returncode != 0  # a conflict: .git/rebase-merge stays
    assert (vbox.project / ".git" / "rebase-merge").is_dir()
    result = vbox.run("echo resolved > f && git add f && GIT_EDITOR=true git rebase --continue", env=GIT_ENV)
    assert result.returncode == 0, result
    assert not (vbox.project / ".git" / "rebase-merge").exists()
    assert git(vbox, "log", "--format=%s", "-2").stdout.split() == ["side", "main"]


def test_a_killed_run_s_config_write_lands_with_the_next_run(vbox: Box) -> None:
    git(vbox, "init", "-q")
    process = subprocess.Popen(
        [*vbox.command_words(), "--", "/bin/sh", "-c", "git config user.name Killed && git config core.editor evil && : > ready && sleep 60"],
        cwd=vbox.project, env={**vbox.env, **GIT_ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (vbox.project / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.kill()
    process.wait(timeout=10)
    time.sleep(0.5)  # bwrap dies with its parent, the sandbox with bwrap
    assert "user.name" not in _local_config(vbox)
    result = vbox.run("true")
    assert "killed" in result.stderr and "core.editor" in result.stderr, result
    after = _local_config(vbox)
    assert "user.name=Killed" in after and "core.editor" not in after


def test_a_nested_repository_is_staged_too(vbox: Box) -> None:
    git(vbox, "init", "-q")
    nested = vbox.project / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(vbox, "init", "-q", cwd=nested)
    result = vbox.run("git -C vendor/lib remote add up https://example.invalid/lib.git && echo OK", env=GIT_ENV)
    assert "OK" in result.stdout, result
    assert "remote.up.url=https://example.invalid/lib.git" in _local_config(vbox, nested)


def test_a_git_dir_too_large_to_stage_keeps_its_config_and_hooks_read_only(vbox: Box) -> None:
    """No stage (over 64 MiB to copy: here a state folder): the plan's own mounts hold instead, as before."""
    git(vbox, "init", "-q")
    (vbox.project / ".git" / "rebase-apply").mkdir()
    with open(vbox.project / ".git" / "rebase-apply" / "patch", "wb") as handle:  # sparse: 65 MiB that take no room
        handle.truncate(65 << 20)
    before = (vbox.project / ".git" / "config").read_bytes()
    result = vbox.run("git config user.name Agent; echo x > .git/hooks/pre-commit; echo x >> .git/config; echo done", env=GIT_ENV)
    assert "done" in result.stdout, result  # control: the run itself works
    assert "Device or resource busy" in result.stderr or "Read-only" in result.stderr, result
    assert (vbox.project / ".git" / "config").read_bytes() == before
    assert not (vbox.project / ".git" / "hooks" / "pre-commit").exists()


def test_stash_gc_and_a_host_git_during_the_run_see_one_repository(vbox: Box) -> None:
    """Refs and packed-refs are the host's, live: a `git gc` inside never hides a branch from the host."""
    git(vbox, "init", "-q", "-b", "main")
    (vbox.project / "f").write_text("one\n")
    git(vbox, "add", "f")
    git(vbox, "commit", "-qm", "first")
    git(vbox, "branch", "b1")
    with _paused_run(vbox, "echo wip >> f && git stash -q && git gc -q", then="git stash pop -q") as process:
        assert set(git(vbox, "branch", "--format=%(refname:short)").stdout.split()) == {"main", "b1"}  # packed, still seen
        assert git(vbox, "stash", "list").stdout.strip()
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    assert (vbox.project / "f").read_text() == "one\nwip\n"
    git(vbox, "fsck", "--no-progress")


def test_a_killed_runs_hooks_are_judged_by_the_next_run(vbox: Box) -> None:
    """The next run carries a killed run's stage back before the journal's sweeps, which move aside
    the hooks folder it made where none was."""
    git(vbox, "init", "-q")
    shutil.rmtree(vbox.project / ".git" / "hooks")
    marker = vbox.root / "HOOKED"
    script = (
        f"mkdir .git/hooks && printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"
        " && git config user.name Killed && : > ready && sleep 60"
    )
    process = subprocess.Popen([*vbox.command_words(), "--", "/bin/sh", "-c", script], cwd=vbox.project, env={**vbox.env, **GIT_ENV},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 30
    while not (vbox.project / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.kill()
    process.wait(timeout=10)
    time.sleep(0.5)
    result = vbox.run("true")
    assert result.returncode == 0, result
    assert "user.name=Killed" in _local_config(vbox)  # control: the killed run's config write landed
    git(vbox, "commit", "-q", "--allow-empty", "-m", "host")
    assert not marker.exists(), result.stderr
    assert not (vbox.project / ".git" / "hooks" / "pre-commit").exists()


def test_what_the_sandbox_writes_through_the_alias_is_judged_too(vbox: Box) -> None:
    """The real git dir is writable inside at its alias (as `.git` was before the stage): a rebase
    todo with `exec` and a link made there are moved aside after the run (a second review's finding)."""
    git(vbox, "init", "-q", "-b", "main")
    git(vbox, "commit", "-q", "--allow-empty", "-m", "a")
    git(vbox, "commit", "-q", "--allow-empty", "-m", "b")
    marker, victim = vbox.root / "RAN", vbox.root / "victim"
    script = (
        "A=/run/stockade-git/0; mkdir $A/rebase-merge && cd $A/rebase-merge && git rev-parse HEAD~1 > onto"
        " && git rev-parse HEAD > orig-head && echo refs/heads/main > head-name && : > interactive && : > done"
        f" && echo 1 > msgnum && echo 1 > end && echo 'exec touch {marker}' > git-rebase-todo && ln -s {victim} $A/FETCH_HEAD"
        " && echo PLANTED"
    )
    result = vbox.run(script, env=GIT_ENV)
    assert "PLANTED" in result.stdout, result
    assert "renamed to" in result.stderr, result
    git(vbox, "rebase", "--continue", check=False)
    assert not marker.exists(), "the host's git ran the todo's exec"
    assert not os.path.lexists(vbox.project / ".git" / "FETCH_HEAD") and not victim.exists()


def test_a_local_clone_of_the_project_works_inside(vbox: Box) -> None:
    git(vbox, "init", "-q", "-b", "main")
    git(vbox, "commit", "-q", "--allow-empty", "-m", "a")
    result = vbox.run("git clone -q . /tmp/c && git -C /tmp/c log --format=%s", env=GIT_ENV)
    assert result.returncode == 0 and result.stdout == "a\n", result


def test_a_socket_in_the_git_dir_is_masked_and_the_run_goes_on(vbox: Box) -> None:
    git(vbox, "init", "-q")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(vbox.project / ".git" / "fsmonitor.sock"))
    server.listen(1)
    try:
        result = vbox.run("git config user.name Agent && echo OK", env=GIT_ENV)
        assert result.returncode == 0 and "OK" in result.stdout, result
    finally:
        server.close()
    assert "user.name=Agent" in _local_config(vbox)


def test_a_repository_with_a_submodule_works_inside(vbox: Box) -> None:
    """A submodule's git dir names its work tree relatively (core.worktree): bound where git sees it."""
    library = vbox.project / "libsrc"
    git(vbox, "init", "-q", "-b", "main", str(library))
    git(vbox, "-C", str(library), "commit", "-q", "--allow-empty", "-m", "lib")
    git(vbox, "init", "-q", "-b", "main")
    git(vbox, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "./libsrc", "lib")
    git(vbox, "commit", "-qm", "with lib")
    result = vbox.run("git status --short && git -C lib log --format=%s && git submodule status | cut -c43- && echo OK", env=GIT_ENV)
    assert result.returncode == 0 and "lib\n" in result.stdout and "OK" in result.stdout, result
    assert "fatal" not in result.stderr, result
