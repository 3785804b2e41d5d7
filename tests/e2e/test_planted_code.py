"""Code planted beside the floor does not run on the host later (profiles/runs_later.py, bwrap/after/gitcheck.py).

Each attack is checked on the host after the run, the way a user would meet
it (`git status` in the folder); each has a control that real work of the
same shape stays.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from stockade.profiles import runs_later
from tests.e2e.boxes import Box

PAYLOAD = '#!/bin/sh\necho PWNED > "$MARK"\n'
FIXED = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.test",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.test",
}


def _host_git(box: Box, folder: Path, mark: Path) -> subprocess.CompletedProcess[str]:
    env = {**box.env, **FIXED, "MARK": str(mark), "GIT_CEILING_DIRECTORIES": str(box.project.parent)}
    return subprocess.run(["git", "status"], cwd=folder, env=env, capture_output=True, text=True, timeout=30)


def _plant_payload(box: Box) -> Path:
    payload = box.project / "payload.sh"
    payload.write_text(PAYLOAD)
    payload.chmod(0o755)
    return payload


def test_a_bare_repository_under_another_name_does_not_run_on_the_host(vbox: Box) -> None:
    payload = _plant_payload(vbox)
    mark = vbox.root / "mark"
    attack = vbox.run(
        "git init -q --bare docs/notes && git --git-dir=docs/notes config core.bare false "
        "&& git --git-dir=docs/notes config core.worktree .. "
        f"&& git --git-dir=docs/notes config core.fsmonitor {payload} && echo PLANTED"
    )
    assert "PLANTED" in attack.stdout, attack
    _host_git(vbox, vbox.project / "docs" / "notes", mark)
    assert not mark.exists(), "a host git status ran the planted fsmonitor"
    assert "docs/notes" in attack.stderr and "stockade-quarantine" in attack.stderr, attack
    control = vbox.run("git init -q --bare docs/clean && echo MADE")
    assert "MADE" in control.stdout and (vbox.project / "docs" / "clean" / "HEAD").exists(), control
    assert "quarantine" not in control.stderr, control


def test_git_data_copied_into_an_existing_folder_is_moved_aside(vbox: Box) -> None:
    payload = _plant_payload(vbox)
    (vbox.project / "src").mkdir()
    (vbox.project / "src" / "main.py").write_text("print('hi')\n")
    mark = vbox.root / "mark"
    vbox.run(
        "git init -q --bare /tmp/b && cp -r /tmp/b/HEAD /tmp/b/objects /tmp/b/refs src/ "
        f"&& printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tfsmonitor = {payload}\\n\\tworktree = ..\\n' > src/config"
    )
    _host_git(vbox, vbox.project / "src", mark)
    assert not mark.exists(), "a host git status ran the planted fsmonitor"
    assert (vbox.project / "src" / "main.py").exists()


def test_a_config_planted_first_and_a_git_dir_made_later_is_caught(vbox: Box) -> None:
    payload = _plant_payload(vbox)
    (vbox.project / "src").mkdir()
    mark = vbox.root / "mark"
    first = vbox.run(
        f"printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tfsmonitor = {payload}\\n\\tworktree = ..\\n' > src/config"
    )
    assert first.returncode == 0 and (vbox.project / "src" / "config").exists()  # an ordinary file named config
    vbox.run("git init -q --bare /tmp/b && cp -r /tmp/b/HEAD /tmp/b/objects /tmp/b/refs src/")
    _host_git(vbox, vbox.project / "src", mark)
    assert not mark.exists(), "a host git status ran the fsmonitor of a config planted in an earlier run"


def test_ordinary_files_named_like_git_data_stay(vbox: Box) -> None:
    result = vbox.run("mkdir -p src/hooks app && echo 'export {}' > src/hooks/useAuth.ts && echo x=1 > app/config && echo main > HEAD")
    assert result.returncode == 0 and "quarantine" not in result.stderr, result
    for name in ("src/hooks/useAuth.ts", "app/config", "HEAD"):
        assert (vbox.project / name).exists(), name


def test_a_mercurial_hook_is_moved_aside_and_a_clone_s_paths_stay(vbox: Box) -> None:
    attack = vbox.run(
        "mkdir -p a/.hg b/.hg && printf '[hooks]\\npre-status = sh -c id\\n' > a/.hg/hgrc "
        "&& printf '[paths]\\ndefault = https://example.test/repo\\n' > b/.hg/hgrc"
    )
    assert not (vbox.project / "a" / ".hg" / "hgrc").exists(), attack
    assert "a/.hg/hgrc" in attack.stderr, attack
    assert (vbox.project / "b" / ".hg" / "hgrc").exists(), attack


def test_an_existing_devcontainer_is_read_only_and_a_new_one_moved_aside(vbox: Box) -> None:
    (vbox.project / ".devcontainer").mkdir()
    (vbox.project / ".devcontainer" / "devcontainer.json").write_text('{"image": "debian"}\n')
    attack = vbox.run('echo \'{"initializeCommand": "id"}\' > .devcontainer/devcontainer.json; echo rc=$?')
    assert "rc=1" in attack.stdout or "Read-only" in attack.stderr, attack
    assert (vbox.project / ".devcontainer" / "devcontainer.json").read_text() == '{"image": "debian"}\n'
    sub = vbox.project / "sub"
    sub.mkdir()
    made = vbox.run('mkdir -p sub/.devcontainer && echo \'{"initializeCommand": "id"}\' > sub/.devcontainer/devcontainer.json')
    assert not (sub / ".devcontainer" / "devcontainer.json").exists(), made
    assert "stockade-quarantine" in made.stderr, made


DEBUGGER_AND_REPL_FILES = (".pdbrc", ".gdbinit", ".lldbinit", ".irbrc", "irb.rc", "_irbrc", ".pryrc", ".Rprofile", ".Renviron", ".ghci",
                           ".nvimrc", ".dir-locals.el", "mise.local.toml", ".miserc.toml")  # fmt: skip


def test_a_planted_pdbrc_never_runs_in_a_host_debugger(vbox: Box) -> None:
    """ESCAPES 83: pdb runs ./.pdbrc as if typed: a breakpoint() on the host would run the sandbox's command."""
    mark = vbox.root / "pdb-mark"
    (vbox.project / "app.py").write_text("x = 1\n")
    attack = vbox.run(f'printf \'!open("{mark}", "w").write("PWNED")\\n\' > .pdbrc; echo status=$?')
    assert "status=" in attack.stdout, attack
    host = subprocess.run(["python3", "-m", "pdb", "app.py"], cwd=vbox.project, input="c\n", capture_output=True, text=True, timeout=30)
    assert host.returncode == 0 and not mark.exists(), "the host's pdb ran the planted .pdbrc"
    control = vbox.run("printf 'notes\\n' > debug-notes.txt && cat debug-notes.txt")  # ordinary work beside it stays
    assert control.stdout == "notes\n" and (vbox.project / "debug-notes.txt").exists(), control


def test_every_debugger_and_repl_init_file_made_inside_is_kept_from_the_host(vbox: Box) -> None:
    """ESCAPES 83: each name of the table's debugger, REPL and loader rows, planted, is gone or untouched after the run."""
    script = "; ".join(f"echo planted > {name}" for name in DEBUGGER_AND_REPL_FILES) + "; true"
    vbox.run(script)
    kept = [name for name in DEBUGGER_AND_REPL_FILES if (vbox.project / name).is_file() and (vbox.project / name).read_text() == "planted\n"]
    assert kept == [], f"planted and left where the host tool reads them: {kept}"


WHOLE = [
    # (what the run adds to a git dir of another name whose config holds only inert keys, its name)
    ("printf '[core]\\n\\tfsmonitor = {payload}\\n' > lib/x/config.worktree", "config.worktree"),
    (
        "mkdir -p lib/x/worktrees/w && printf '[core]\\n\\tfsmonitor = {payload}\\n' > lib/x/worktrees/w/config.worktree",
        "a worktree's config.worktree",
    ),
    (
        "mkdir -p lib/elsewhere && git init -q --bare lib/elsewhere/g && git --git-dir=lib/elsewhere/g config core.fsmonitor {payload}"
        " && printf '../elsewhere/g\\n' > lib/x/commondir",
        "commondir",
    ),
]


@pytest.mark.parametrize(("addition", "what"), WHOLE, ids=[what for _addition, what in WHOLE])
def test_a_git_dir_is_judged_by_every_file_git_reads(vbox: Box, addition: str, what: str) -> None:
    """ESCAPES 85 (issue 32): a git dir of another name whose config held only inert keys was kept, though its
    config.worktree (or commondir, or a worktree's config) made a host `git status` run a program."""
    payload = _plant_payload(vbox)
    mark = vbox.root / "mark"
    attack = vbox.run(
        "git init -q --bare lib/x && git --git-dir=lib/x config core.bare false && git --git-dir=lib/x config core.worktree .. "
        "&& git --git-dir=lib/x config extensions.worktreeConfig true && git --git-dir=lib/x config core.repositoryformatversion 1 && "
        + addition.format(payload=payload)
        + " && echo PLANTED"
    )
    assert "PLANTED" in attack.stdout, attack
    _host_git(vbox, vbox.project / "lib" / "x", mark)
    assert not mark.exists(), f"a host git status ran the fsmonitor planted through {what}"
    assert "stockade-quarantine" in attack.stderr, attack
    control = vbox.run("git init -q --bare lib/clean && git --git-dir=lib/clean config extensions.worktreeConfig true"
                       " && git --git-dir=lib/clean config core.repositoryformatversion 1 && echo MADE")  # fmt: skip
    assert "MADE" in control.stdout and (vbox.project / "lib" / "clean" / "HEAD").exists(), control
    assert "quarantine" not in control.stderr, control


HOME_PROGRAM_CONFIGS = (".kube/config", ".aws/config", ".docker/config.json", ".config/go/env", ".psqlrc")


@pytest.mark.parametrize("exists", [False, True], ids=["absent", "existing"])
def test_home_configs_that_name_a_program_to_run_are_kept_from_the_host(vbox: Box, exists: bool) -> None:
    """Issue 32 (the runs-later table from sources): kubectl's exec plugin, the AWS credential_process, docker's
    credential helper, `go env -w`'s GOFLAGS and psql's \\! run what these name; with the home writable, the
    sandbox must not write them (existing: read-only; absent: made, then moved aside after the run)."""
    for name in HOME_PROGRAM_CONFIGS:
        (vbox.home / name).parent.mkdir(parents=True, exist_ok=True)
        if exists:
            (vbox.home / name).write_text("the user's\n")
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{vbox.home}"]\n'
    script = "; ".join(f"echo planted > ~/{name}" for name in HOME_PROGRAM_CONFIGS) + "; echo done > ~/plain.txt"
    result = vbox.run(script, policy=policy)
    kept = [name for name in HOME_PROGRAM_CONFIGS if (vbox.home / name).exists() and (vbox.home / name).read_text() == "planted\n"]
    assert kept == [], f"planted where a host tool runs what it names: {kept}\n{result.stderr}"
    if exists:
        assert all((vbox.home / name).read_text() == "the user's\n" for name in HOME_PROGRAM_CONFIGS)
    assert (vbox.home / "plain.txt").read_text() == "done\n", result  # the home is writable otherwise


def _instance(entry: runs_later.Entry) -> str:
    """A file the entry covers: the path itself, one inside a folder, a name a glob matches."""
    path = entry.path.replace("*", "x")
    return f"{path}/planted" if entry.folder else path


PROTECTED_IN_PROJECT = [e for e in runs_later.TABLE if e.where == "project" and e.cls == runs_later.PROTECTED]
PROTECTED_IN_HOME = [e for e in runs_later.TABLE if e.where == "home" and e.cls == runs_later.PROTECTED and not e.path.startswith("Library/")]
REPORTED_IN_PROJECT = [e for e in runs_later.TABLE if e.where == "project" and e.cls == runs_later.REPORTED]


def test_every_protected_row_of_the_table_planted_in_the_project_is_kept_from_the_host(vbox: Box) -> None:
    """Issue 32 (the runs-later table from sources): each protected row, made or changed by a run in
    the project, is refused or moved aside; one run plants them all."""
    names = [_instance(e) for e in PROTECTED_IN_PROJECT if not e.path.startswith(".git/")]
    script = "; ".join(f"mkdir -p {shlex.quote(os.path.dirname(name) or '.')} 2>/dev/null; echo planted > {shlex.quote(name)}" for name in names)
    vbox.run(script + "; echo ordinary > notes.txt")
    kept = [name for name in names if (vbox.project / name).is_file() and (vbox.project / name).read_text() == "planted\n"]
    assert kept == [], f"planted and left where a host tool reads them: {kept}"
    assert (vbox.project / "notes.txt").read_text() == "ordinary\n"  # control


def test_every_protected_home_row_is_kept_from_the_host_when_the_home_is_writable(vbox: Box) -> None:
    names = [_instance(e) for e in PROTECTED_IN_HOME]
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = ["{vbox.project}", "{vbox.home}"]\n'
    script = "; ".join(f"mkdir -p ~/{shlex.quote(os.path.dirname(name))} 2>/dev/null; echo planted > ~/{shlex.quote(name)}" for name in names)
    result = vbox.run(script + "; echo done > ~/plain.txt", policy=policy)
    kept = [name for name in names if (vbox.home / name).is_file() and (vbox.home / name).read_text() == "planted\n"]
    assert kept == [], f"planted where a host tool runs it: {kept}\n{result.stderr[-2000:]}"
    assert (vbox.home / "plain.txt").read_text() == "done\n", result  # control: the home is writable otherwise


@pytest.mark.parametrize("entry", REPORTED_IN_PROJECT, ids=[e.path for e in REPORTED_IN_PROJECT])
def test_every_reported_row_of_the_table_made_in_the_project_is_named_after_the_run(vbox: Box, entry: runs_later.Entry) -> None:
    name = _instance(entry)
    result = vbox.run(f"mkdir -p {shlex.quote(os.path.dirname(name) or '.')} && echo made > {shlex.quote(name)}")
    assert result.returncode == 0 and (vbox.project / name).read_text() == "made\n", result  # allowed: ordinary work
    assert name in result.stderr, f"the summary does not name {name}: {result.stderr!r}"
