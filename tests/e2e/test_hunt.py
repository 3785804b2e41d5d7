"""Holes found by an independent escape hunt against stockade itself (not in ESCAPES.md).

H1: a policy's [env] set reached bwrap's own process on the host (LD_PRELOAD).
H2: an untrusted policy widened allow_write through a symlink committed in the repository.
H3: the after-run quarantine moved host files by path name, racing a concurrent sandbox.
H4: .git/commondir redirected git's repository config to a file the sandbox wrote.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.escapes import q

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.test",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.test",
}

CONSTRUCTOR = r"""
#include <stdio.h>
#include <string.h>
__attribute__((constructor)) static void mark(void) {
    char comm[64] = {0};
    FILE *f = fopen("/proc/self/comm", "r");
    if (f) { fgets(comm, sizeof comm, f); fclose(f); }
    if (strncmp(comm, "bwrap", 5) == 0) { FILE *m = fopen(MARKER, "w"); if (m) fclose(m); }
    FILE *i = fopen(INSIDE, "w"); if (i) fclose(i);
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the preload library")
def test_h1_policy_environment_never_reaches_bwrap_itself(vbox: Box) -> None:
    """A trusted-by-flag policy may set LD_PRELOAD for the sandbox; bwrap (host side) must not load it."""
    marker = vbox.outside / "BWRAP_LOADED_IT"
    inside = vbox.project / "loaded-inside"
    source = vbox.root / "evil.c"
    source.write_text(CONSTRUCTOR)
    library = vbox.project / "evil.so"
    subprocess.run(["gcc", "-shared", "-fPIC", f'-DMARKER="{marker}"', f'-DINSIDE="{inside}"', "-o", str(library), str(source)], check=True)
    policy = f'extends = ["default"]\n[env]\nset = {{ LD_PRELOAD = "{library}" }}\n'
    result = vbox.run("true", policy=policy)
    assert result.returncode == 0, result
    assert not marker.exists(), "bwrap ran the policy's LD_PRELOAD library on the host"
    assert inside.exists(), "control: the library does load inside the sandbox, where the policy asked for it"


def test_h1_untrusted_policy_cannot_set_loader_variables(vbox: Box) -> None:
    (vbox.project / ".stockade.toml").write_text('[env]\nset = { LD_PRELOAD = "./x.so", GREETING = "hi" }\n')
    result = vbox.run('echo "preload=${LD_PRELOAD:-unset} greeting=$GREETING"')
    assert "preload=unset greeting=hi" in result.stdout, result
    assert "env set LD_PRELOAD" in result.stderr


def test_h2_untrusted_symlink_in_allow_write_does_not_widen(vbox: Box) -> None:
    """`allow_write = ["w"]` where the repository commits w -> $HOME must not make $HOME writable."""
    (vbox.project / "w").symlink_to(vbox.home)
    (vbox.project / ".stockade.toml").write_text('[filesystem]\nallow_write = ["w"]\n')
    result = vbox.run("echo pwn > w/PWNED; echo x > ./inside-project")
    assert not (vbox.home / "PWNED").exists(), result
    assert result.returncode in (0, 1, 2, 125), result
    control = vbox.run("echo ok > ./plain")  # a plain project write still works without the symlink rule
    if control.returncode == 125:  # stockade refused the policy's symlinked root outright: also safe
        assert "symlink" in control.stderr, control.stderr
    else:
        assert (vbox.project / "plain").exists() or control.returncode != 0


def test_h2_trusted_policy_symlinked_root_inside_project_is_refused(vbox: Box) -> None:
    """A trusted allow_write entry that a later `git pull` turns into a symlink is refused, not followed."""
    (vbox.project / "build").symlink_to(vbox.outside)
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = ["{vbox.project}/build"]\n'
    result = vbox.run("echo pwn > build/PWNED", policy=policy)
    assert result.returncode == 2 and "symlink" in result.stderr and "policy.toml:3:" in result.stderr, result  # its line
    assert not (vbox.outside / "PWNED").exists()


def test_h3_quarantine_renames_in_place_and_never_follows_a_swapped_parent(vbox: Box) -> None:
    """Files quarantined after a run are renamed inside their own folder (opened without following
    links), so a concurrent sandbox swapping a parent for a symlink cannot aim the move at host files."""
    result = vbox.run("git init -q fresh && printf '#!/bin/sh\\n' > fresh/.git/hooks/pre-commit && chmod +x fresh/.git/hooks/pre-commit", env=GIT_ENV)
    hooks = vbox.project / "fresh" / ".git" / "hooks"
    assert not (hooks / "pre-commit").exists(), result.stderr
    renamed = [p.name for p in hooks.iterdir() if p.name.startswith("pre-commit.stockade-quarantine")]
    assert renamed, (list(hooks.iterdir()), result.stderr)


def test_h3_quarantine_of_a_swapped_path_leaves_the_target_alone(tmp_path: Path) -> None:
    """Unit-level race: the parent became a symlink between walk and move; nothing outside moves."""
    from stockade.bwrap.after.changes import quarantine

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".envrc").write_text("victim\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "v").symlink_to(victim)  # the walk saw project/v as a folder; now it is a link
    moved = quarantine([str(project / "v" / ".envrc")], "s1", [str(project)])
    assert moved == [] and (victim / ".envrc").read_text() == "victim\n"


def test_h4_git_commondir_planted_during_the_run_is_renamed_aside(vbox: Box) -> None:
    """An existing commondir is mounted read-only; an absent one cannot get a placeholder (git dies on an
    empty or unreadable commondir), so one planted during the run is renamed aside after it and the
    host's next git command reads the repository's own config."""
    host_env = {**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(vbox.home)}
    subprocess.run(["git", "init", "-q", str(vbox.project)], check=True, env=host_env)
    marker = vbox.outside / "FSMON"
    attack = vbox.run(
        "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/ && "
        f"printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {marker}; false\"\\n' > evil/config && "
        'echo "$PWD/evil" > .git/commondir && echo PLANTED',
        env=GIT_ENV,
    )
    assert not (vbox.project / ".git" / "commondir").exists(), attack
    assert ".git/commondir" in attack.stderr and "renamed to" in attack.stderr, attack.stderr
    subprocess.run(["git", "status"], cwd=vbox.project, capture_output=True, env=host_env)
    assert not marker.exists()
    control = vbox.run("echo x > tracked && git add tracked && git commit -q -m c && echo COMMITTED", env=GIT_ENV)
    assert "COMMITTED" in control.stdout, control


def test_h4_existing_commondir_is_read_only(vbox: Box) -> None:
    host_env = {**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(vbox.home)}
    subprocess.run(["git", "init", "-q", str(vbox.project)], check=True, env=host_env)
    (vbox.project / ".git" / "commondir").write_text(".\n")  # a valid commondir pointing at the git dir itself
    attack = vbox.run("echo /elsewhere > .git/commondir && echo WROTE")
    assert "WROTE" not in attack.stdout and (vbox.project / ".git" / "commondir").read_text() == ".\n", attack


@pytest.mark.skipif(os.geteuid() != 0, reason="only host root can see into another user's private folder")
def test_root_runs_in_a_project_holding_another_users_private_folder(vbox: Box) -> None:
    """Found running in /tmp as root: a nested repository inside another user's 0700 folder made
    stockade plan mounts that bwrap (uid 0 mapped alone) cannot reach, and every run failed.
    The folder is closed to the sandbox as well, so nothing inside needs a mount."""
    private = vbox.project / "someone-elses"
    (private / "repo" / ".git" / "hooks").mkdir(parents=True)
    (private / "repo" / ".git" / "config").write_text("[core]\n")
    os.chown(private, 65534, 65534)
    private.chmod(0o700)
    result = vbox.run(f"ls {q(str(private))} 2>/dev/null || echo CLOSED; echo RAN")
    assert result.returncode == 0 and "RAN" in result.stdout, result
    assert "CLOSED" in result.stdout, result  # the sandbox cannot enter it either
    private.chmod(0o755)
    control = vbox.run(f"ls {q(str(private))}; echo > {q(str(private / 'repo' / '.git' / 'hooks' / 'pre-commit'))} || echo RO")
    assert "repo" in control.stdout and "RO" in control.stdout, control
