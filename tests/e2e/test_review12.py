"""Review of issue 12's changes: absent protected paths swept after the run, git layouts,
git data kept when inert, fresh homes. Each case is an attack on the host (a hook or an rc
file that the host runs later) with a control that ordinary work still works.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.test_git_layouts import GIT_ENV, git, host_commit, repository, run_inside


def hook_script(marker: Path) -> str:
    return f"#!/bin/sh\ntouch '{marker}'\n"


def write_hook(folder: str, marker: Path) -> str:
    """Shell lines for inside: a pre-commit hook at FOLDER/pre-commit."""
    body = hook_script(marker).replace("'", "'\\''")
    return f"mkdir -p {folder} && printf '%s' '{body}' > {folder}/pre-commit && chmod +x {folder}/pre-commit"


@pytest.mark.parametrize("layout", ["modules", "worktrees"])
def test_a_kept_pointer_never_leads_to_hooks_the_run_wrote(vbox: Box, layout: str) -> None:
    """gitcheck kept a new `.git` file into any folder named `modules/X` or `worktrees/X`
    with an inert config, and never looked at the hooks of the git dir it leads to (outside
    any `.git`, so in no pattern of the walk): the host's next commit there ran them."""
    repo = repository(vbox, vbox.project / "repo")
    marker = vbox.outside / f"RAN-{layout}"
    if layout == "modules":
        script = (
            "mkdir -p modules/evil sub && git init -q --bare modules/evil && git -C modules/evil config core.bare false && "
            + write_hook("modules/evil/hooks", marker)
            + " && printf 'gitdir: ../modules/evil\\n' > sub/.git"
        )
    else:
        script = (
            "mkdir -p fake sub && git init -q --bare fake && git -C fake config core.bare false && "
            + write_hook("fake/hooks", marker)
            + " && mkdir -p fake/worktrees/w && printf '../..\\n' > fake/worktrees/w/commondir && "
            "git -C fake rev-parse HEAD >/dev/null 2>&1; cp fake/HEAD fake/worktrees/w/HEAD && "
            "printf 'gitdir: ../fake/worktrees/w\\n' > sub/.git"
        )
    attack = run_inside(vbox, repo, script)
    assert attack.returncode == 0, attack
    host_commit(vbox, repo / "sub")
    assert not marker.exists(), attack
    assert "renamed to" in attack.stderr, attack


def test_a_new_worktree_of_a_repository_with_its_own_hooks_stays(vbox: Box) -> None:
    """Control for the above: the user's own hooks (there before the run) do not make a
    worktree added inside look planted."""
    repo = repository(vbox, vbox.project / "repo")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    work = run_inside(vbox, repo, "git worktree add -q wt2 && echo DONE")
    assert "DONE" in work.stdout and "renamed to" not in work.stderr, work
    assert git(vbox, repo / "wt2", "status", "--porcelain").returncode == 0


def test_a_nul_in_a_planted_pointer_moves_everything_aside_and_plans_again(vbox: Box) -> None:
    """A `.git` file `gitdir: <NUL>` made os.path raise in the check after the run: a traceback,
    and every other planting of the run (a new repository's hook) stayed; every later run
    ended in the same traceback while planning."""
    repo = repository(vbox, vbox.project / "repo")
    marker = vbox.outside / "RAN-nul"
    attack = run_inside(
        vbox, repo, "git init -q evil && " + write_hook("evil/.git/hooks", marker) + " && mkdir z && printf 'gitdir: \\000\\n' > z/.git"
    )
    assert "Traceback" not in attack.stderr, attack
    host_commit(vbox, repo / "evil")
    assert not marker.exists(), attack
    again = run_inside(vbox, repo, "echo ok")
    assert again.returncode == 0 and "ok" in again.stdout and "Traceback" not in again.stderr, again


def test_a_fifo_left_as_git_config_does_not_hang_the_check(vbox: Box) -> None:
    """A FIFO as a new repository's config: the check after the run opened it and waited for
    ever; whoever killed stockade then kept the run's other plantings (a hook elsewhere)."""
    repo = repository(vbox, vbox.project / "repo")
    marker = vbox.outside / "RAN-fifo"
    try:
        attack = vbox.run(
            "git init -q bb && " + write_hook("bb/.git/hooks", marker) + " && git init -q aa && rm aa/.git/config && mkfifo aa/.git/config",
            cwd=repo,
            env=GIT_ENV,
            timeout=30,
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"stockade hung after the run: {hung}")
    assert "Traceback" not in attack.stderr, attack
    host_commit(vbox, repo / "bb")
    assert not marker.exists(), attack
    again = vbox.run("echo ok", cwd=repo, env=GIT_ENV, timeout=30)
    assert "ok" in again.stdout, again


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_pointer_planted_by_a_running_sandbox_does_not_make_home_writable(vbox: Box, kind: str) -> None:
    """A linked worktree's git dir is made writable when its work tree is. A run that is still
    going (an agent's background command) wrote `sub/.git` naming the home folder; a second
    run planned meanwhile took HOME for a linked git dir and bound it writable, with no floor
    in it: it wrote ~/.bashrc."""
    rc = vbox.home / ".bashrc"
    rc.write_text("# rc\n")
    plant = f"printf 'gitdir: {vbox.home}\\n' > sub/.git" if kind == "file" else f"ln -s {vbox.home} sub/.git"
    first = subprocess.Popen(
        [*_run_words(vbox), "--", "/bin/sh", "-c", f"mkdir sub && {plant} && touch planted && sleep 8"],
        cwd=vbox.project,
        env={**vbox.env, **GIT_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(100):
            if (vbox.project / "planted").exists():
                break
            time.sleep(0.1)
        second = vbox.run(f"echo 'touch {vbox.outside}/RAN-rc' >> ~/.bashrc; echo tried")
    finally:
        first.communicate(timeout=60)
    assert "tried" in second.stdout, second
    assert rc.read_text() == "# rc\n", second


def _run_words(box: Box) -> list[str]:
    import sys

    return [sys.executable, "-m", "stockade.cli.main", "run"]


def test_worktree_as_project_still_commits(vbox: Box) -> None:
    """Control for the above: a real worktree (its git dir names it back) stays writable."""
    main = repository(vbox, vbox.outside / "main")
    git(vbox, main, "worktree", "add", "-q", str(vbox.project))
    work = run_inside(vbox, vbox.project, "echo c > c.txt && git add -A && git commit -qm c && echo COMMITTED")
    assert "COMMITTED" in work.stdout, work
    lib = repository(vbox, vbox.outside / "lib")
    top = repository(vbox, vbox.project / "top")
    git(vbox, top, "submodule", "add", "-q", str(lib), "lib")
    sub = run_inside(vbox, top / "lib", "echo m > m.txt && git add m.txt && git commit -qm m && echo COMMITTED")
    assert "COMMITTED" in sub.stdout, sub
    assert os.path.isfile(vbox.project / "top" / "lib" / ".git")


def test_hooks_path_in_a_user_config_with_crlf_lines_is_protected(vbox: Box) -> None:
    """git reads a config with CRLF line ends (a dotfile edited on Windows) as usual; the
    in-process reader refused the whole file, so its core.hooksPath named no protected folder
    and a run wrote the hooks the host's next commit ran."""
    repo = repository(vbox, vbox.project / "app")
    (vbox.home / ".gitconfig").write_bytes(b"[user]\r\n\tname = t\r\n[core]\r\n\thooksPath = githooks\r\n")
    marker = vbox.outside / "RAN-crlf"
    attack = run_inside(vbox, repo, write_hook("githooks", marker) + "; true")
    (repo / "h.txt").write_text("h\n")
    env = {**vbox.env, **GIT_ENV}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "h"], cwd=repo, env=env, capture_output=True)
    assert not marker.exists(), attack
    work = run_inside(vbox, repo, "echo y > y.txt && git add y.txt && git commit -qm y && echo COMMITTED")
    assert "COMMITTED" in work.stdout, work


def test_a_killed_run_still_has_its_plantings_moved_aside(vbox: Box) -> None:
    repository(vbox, vbox.project)
    marker = vbox.outside / "RAN-killed"
    proc = subprocess.Popen(
        [*_run_words(vbox), "--", "/bin/sh", "-c", f"echo 'touch {marker}' > .envrc; trap '' TERM; touch planted; sleep 30"],
        cwd=vbox.project,
        env={**vbox.env, **GIT_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for _ in range(100):
        if (vbox.project / "planted").exists():
            break
        time.sleep(0.1)
    proc.kill()  # what a caller's timeout does in the end
    proc.communicate(timeout=30)
    time.sleep(0.5)
    later = vbox.run("echo ok")
    assert "ok" in later.stdout, later  # control: the next run works
    assert not (vbox.project / ".envrc").exists(), later


def test_relative_global_hooks_path_in_a_repository_made_inside(vbox: Box) -> None:
    repo = repository(vbox, vbox.project / "app")
    (vbox.home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    marker = vbox.outside / "RAN-relative"
    attack = run_inside(vbox, repo, "git init -q sub && " + write_hook("sub/.githooks", marker))
    assert attack.returncode == 0, attack
    env = {**vbox.env, **GIT_ENV}
    (repo / "sub" / "f.txt").write_text("f\n")
    subprocess.run(["git", "add", "-A"], cwd=repo / "sub", env=env, capture_output=True)
    subprocess.run(["git", "commit", "-qm", "f"], cwd=repo / "sub", env=env, capture_output=True)
    assert not marker.exists(), attack
