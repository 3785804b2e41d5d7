"""Every git layout runs inside, and keeps its protection (issue: everyday work).

Each case builds a layout on the host, lets a sandboxed run do ordinary git work
there (the control: it must succeed) and then try to plant code that the host's
next git command would run (the attack: a hook, core.fsmonitor, a hooks folder
named by core.hooksPath). The host then commits and the payload must not run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.boxes import Box

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.test",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.test",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(box: Box, cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**box.env, **GIT_ENV, "GIT_ALLOW_PROTOCOL": "file"}
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, env=env, capture_output=True, text=True, check=check)


def repository(box: Box, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(box, path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    git(box, path, "add", "a.txt")
    git(box, path, "commit", "-qm", "a")
    return path


def payload(marker: Path) -> str:
    """Shell lines that, if the host ever runs them, leave `marker` behind."""
    return f"#!/bin/sh\ntouch '{marker}'\n"


def plant(hook_dir: str, marker: Path) -> str:
    """A script for inside: put a pre-commit hook into `hook_dir` (any way that works)."""
    body = payload(marker).replace("'", "'\\''")
    return (
        f"mkdir -p {hook_dir} 2>/dev/null; printf '%s' '{body}' > {hook_dir}/pre-commit 2>/dev/null; chmod +x {hook_dir}/pre-commit 2>/dev/null; true"
    )


def host_commit(box: Box, cwd: Path) -> None:
    (cwd / f"host-{os.urandom(3).hex()}.txt").write_text("host\n")
    git(box, cwd, "add", "-A", check=False)  # a nested repository left without its config makes add complain
    git(box, cwd, "commit", "-qm", "host", check=False)


def run_inside(box: Box, cwd: Path, script: str) -> subprocess.CompletedProcess[str]:
    return box.run(script, cwd=cwd, env=GIT_ENV)


def test_worktree_runs_and_its_shared_hooks_stay_protected(vbox: Box) -> None:
    main = repository(vbox, vbox.project / "main")
    git(vbox, main, "worktree", "add", "-q", str(vbox.project / "wt"))
    wt = vbox.project / "wt"
    marker = vbox.outside / "RAN-worktree"
    work = run_inside(vbox, wt, "echo b > b.txt && git add b.txt && git commit -qm b && echo COMMITTED")
    assert "COMMITTED" in work.stdout and "Traceback" not in work.stderr, work
    assert "b" in git(vbox, wt, "log", "--format=%s").stdout.split()
    common = main / ".git"
    attack = run_inside(
        vbox,
        wt,
        plant(str(common / "hooks"), marker) + f"; git config core.fsmonitor 'touch {marker}'; "
        f"printf '../../../evil\\n' > {common}/worktrees/wt/commondir; true",
    )
    host_commit(vbox, wt)
    git(vbox, wt, "status", check=False)
    assert not marker.exists(), attack
    assert (common / "worktrees" / "wt" / "commondir").read_text().strip() == "../.."


def test_worktree_as_its_own_project_with_main_repository_elsewhere(vbox: Box) -> None:
    """The project is the worktree; the main repository is outside it (a sibling folder)."""
    main = repository(vbox, vbox.outside / "main")
    git(vbox, main, "worktree", "add", "-q", str(vbox.project))
    marker = vbox.outside / "RAN-wt-project"
    work = run_inside(vbox, vbox.project, "git status --porcelain && echo c > c.txt && git add -A && git commit -qm c && echo COMMITTED")
    assert "COMMITTED" in work.stdout, work
    attack = run_inside(vbox, vbox.project, plant(str(main / ".git" / "hooks"), marker) + f"; git config core.fsmonitor 'touch {marker}'")
    host_commit(vbox, vbox.project)
    host_commit(vbox, main)
    assert not marker.exists(), attack
    assert not (vbox.outside / "main" / "c.txt").exists()  # the main work tree itself stayed read-only


def test_submodule_checkout_runs_and_its_git_dir_stays_protected(vbox: Box) -> None:
    lib = repository(vbox, vbox.outside / "lib")
    top = repository(vbox, vbox.project / "top")
    git(vbox, top, "submodule", "add", "-q", str(lib), "lib")
    git(vbox, top, "commit", "-qm", "sub")
    sub = top / "lib"
    marker = vbox.outside / "RAN-submodule"
    work = run_inside(vbox, sub, "echo m > m.txt && git add m.txt && git commit -qm m && echo COMMITTED")
    assert "COMMITTED" in work.stdout, work
    module = top / ".git" / "modules" / "lib"
    attack = run_inside(vbox, sub, plant(str(module / "hooks"), marker) + f"; git config core.fsmonitor 'touch {marker}'")
    host_commit(vbox, sub)
    attack_top = run_inside(vbox, top, plant(".git/modules/lib/hooks", marker))
    host_commit(vbox, sub)
    assert not marker.exists(), (attack, attack_top)


def test_husky_hooks_path_is_protected_existing_or_not(vbox: Box) -> None:
    repo = repository(vbox, vbox.project / "app")
    git(vbox, repo, "config", "core.hooksPath", ".husky/_")
    marker = vbox.outside / "RAN-husky"
    attack = run_inside(vbox, repo, plant(".husky/_", marker))
    host_commit(vbox, repo)
    assert not marker.exists(), attack
    (repo / ".husky" / "_").mkdir(parents=True, exist_ok=True)
    (repo / ".husky" / "_" / "h").write_text("#!/bin/sh\n")
    attack = run_inside(vbox, repo, plant(".husky/_", marker))
    host_commit(vbox, repo)
    assert not marker.exists(), attack
    work = run_inside(vbox, repo, "echo x > x.txt && git add x.txt && git commit -qm x && echo COMMITTED")
    assert "COMMITTED" in work.stdout, work  # control: ordinary commits work (the husky shim runs inside)


@pytest.mark.parametrize("where", ["global", "included"])
def test_hooks_path_from_user_config_is_protected(vbox: Box, where: str) -> None:
    repo = repository(vbox, vbox.project / "app")
    gitconfig = vbox.home / ".gitconfig"
    if where == "global":
        gitconfig.write_text("[core]\n\thooksPath = githooks\n")
    else:
        (vbox.home / "extra.inc").write_text("[core]\n\thooksPath = githooks\n")
        gitconfig.write_text("[include]\n\tpath = ~/extra.inc\n")
    marker = vbox.outside / f"RAN-{where}"
    attack = run_inside(vbox, repo, plant("githooks", marker))
    env_with_global = {"GIT_CONFIG_NOSYSTEM": "1"}
    (repo / "h.txt").write_text("h\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, env={**vbox.env, **GIT_ENV, **env_with_global}, check=True)
    subprocess.run(["git", "commit", "-qm", "h"], cwd=repo, env={**vbox.env, **GIT_ENV, **env_with_global}, capture_output=True)
    assert not marker.exists(), attack
    work = run_inside(vbox, repo, "echo y > y.txt && git add y.txt && git commit -qm y && echo COMMITTED")
    assert "COMMITTED" in work.stdout, work


def test_symlinked_dot_git_keeps_its_hooks_protected(vbox: Box) -> None:
    store = repository(vbox, vbox.project / "store")
    app = vbox.project / "app"
    app.mkdir()
    (app / ".git").symlink_to(store / ".git")
    marker = vbox.outside / "RAN-symlink"
    work = run_inside(vbox, app, "git status --porcelain >/dev/null && echo STATUS")
    assert "STATUS" in work.stdout, work
    attack = run_inside(vbox, app, plant(".git/hooks", marker) + f"; git config core.fsmonitor 'touch {marker}'")
    host_commit(vbox, store)
    assert not marker.exists(), attack


def test_git_dir_from_the_environment_is_protected(vbox: Box) -> None:
    bare = vbox.project / "data.git"
    git(vbox, vbox.project, "init", "-q", "--bare", str(bare))
    (bare / "hooks").mkdir(exist_ok=True)
    marker = vbox.outside / "RAN-gitdir"
    attack = vbox.run(
        plant(str(bare / "hooks"), marker) + f"; git --git-dir={bare} config core.fsmonitor 'touch {marker}'", env={**GIT_ENV, "GIT_DIR": str(bare)}
    )
    assert not (bare / "hooks" / "pre-commit").exists(), attack
    assert "fsmonitor" not in (bare / "config").read_text()


def test_fresh_repository_add_and_commit_see_exactly_the_host_files(vbox: Box) -> None:
    """The issue's first 'done when': no phantom entries inside, and the commit works."""
    (vbox.project / "one.txt").write_text("1\n")
    git(vbox, vbox.project, "init", "-q", "-b", "main")
    inside = run_inside(vbox, vbox.project, "git add -A && git commit -qm x && git status --porcelain && echo --- && ls -A")
    assert inside.returncode == 0, inside
    status, listing = inside.stdout.split("---\n")
    host_status = git(vbox, vbox.project, "status", "--porcelain").stdout
    assert status == host_status == ""
    assert sorted(listing.split()) == sorted(os.listdir(vbox.project)) == [".git", "one.txt"]


def test_git_data_made_inside_survives_when_inert(vbox: Box) -> None:
    """clone, init, worktree add and submodule update inside: the host can use each after the run."""
    lib = repository(vbox, vbox.outside / "lib")
    top = repository(vbox, vbox.project / "top")
    git(vbox, top, "submodule", "add", "-q", str(lib), "lib")
    git(vbox, top, "commit", "-qm", "sub")
    copy = vbox.project / "copy"
    git(vbox, vbox.project, "clone", "-q", str(top), str(copy))
    git(vbox, copy, "submodule", "init", "-q")  # writes the repository's own config: stays a host step
    work = run_inside(
        vbox,
        copy,
        f"git -c protocol.file.allow=always clone -q {lib} cloned && git init -q fresh && "
        "git worktree add -q wt2 && git -c protocol.file.allow=always submodule update -q && echo DONE",
    )
    assert "DONE" in work.stdout and "renamed to" not in work.stderr, work
    assert git(vbox, copy / "cloned", "log", "--format=%s").stdout.split() == ["a"]
    assert git(vbox, copy / "wt2", "status", "--porcelain").returncode == 0
    assert "prunable" not in git(vbox, copy, "worktree", "list").stdout
    assert git(vbox, copy / "lib", "log", "--format=%s").stdout.split() == ["a"]
    git(vbox, copy / "fresh", "status")


@pytest.mark.parametrize(
    "script",
    [
        "git init -q evil && git -C evil config core.fsmonitor 'touch {marker}'",
        "git init -q evil && git -C evil config include.path ../inc && printf '[core]\\n\\tfsmonitor = touch {marker}\\n' > evil/.git/inc",
        "git worktree add -q evil && printf '../../../../x\\n' > .git/worktrees/evil/commondir && "
        "mkdir -p x/hooks && git init -q --bare x && git -C x config core.fsmonitor 'touch {marker}'",
        "git -c protocol.file.allow=always clone -q {lib} evil && git -C evil config remote.origin.uploadpack 'touch {marker}; git-upload-pack'",
    ],
    ids=["fsmonitor", "include", "worktree-commondir", "uploadpack"],
)
def test_git_data_made_inside_that_runs_programs_is_moved_aside(vbox: Box, script: str) -> None:
    lib = repository(vbox, vbox.outside / "lib")
    repo = repository(vbox, vbox.project / "repo")
    marker = vbox.outside / "RAN-made-inside"
    attack = run_inside(vbox, repo, script.format(marker=marker, lib=lib))
    assert "renamed to" in attack.stderr, attack
    for folder in ("evil", "."):
        if (repo / folder).is_dir():
            git(vbox, repo / folder, "status", check=False)
            git(vbox, repo / folder, "fetch", "-q", check=False)
    host_commit(vbox, repo)
    assert not marker.exists(), attack


def test_a_submodule_git_dir_planted_in_a_linked_common_dir_is_not_kept(vbox: Box) -> None:
    """The project is a worktree whose main repository lies outside it: its common dir is writable,
    but a new modules/NAME there (hooks of its own) would escape the check after the run."""
    main = repository(vbox, vbox.outside / "main")
    git(vbox, main, "worktree", "add", "-q", str(vbox.project))
    module = main / ".git" / "modules" / "evil"
    attack = run_inside(vbox, vbox.project, f"mkdir -p {module}/hooks && printf '#!/bin/sh\\ntouch x\\n' > {module}/hooks/pre-commit; true")
    assert not (module / "hooks" / "pre-commit").exists(), attack
    work = run_inside(vbox, vbox.project, "echo d > d.txt && git add d.txt && git commit -qm d && echo COMMITTED")
    assert "COMMITTED" in work.stdout, work


@pytest.mark.parametrize("layout", ["worktrees", "modules"])
def test_a_pointer_into_a_git_dir_under_another_name_with_hooks_is_moved_aside(vbox: Box, layout: str) -> None:
    """A bare repository made inside under another name (its hooks outside any `.git`, where the
    walk after the run does not look) and a `.git` file pointing into it."""
    repo = repository(vbox, vbox.project / "repo")
    marker = vbox.outside / f"RAN-{layout}"
    admin = "docs/notes/worktrees/w" if layout == "worktrees" else "docs/modules/m"
    script = (
        f"git init -q --bare docs/notes 2>/dev/null; mkdir -p {admin} && "
        f"printf '#!/bin/sh\\ntouch {marker}\\n' > docs/notes/hooks/pre-commit && chmod +x docs/notes/hooks/pre-commit && "
        f"{'git init -q --bare ' + admin + ' && cp docs/notes/hooks/pre-commit ' + admin + '/hooks/ && ' if layout == 'modules' else ''}"
        f"echo ref: refs/heads/main > {admin}/HEAD && echo ../.. > {admin}/commondir && "
        f"mkdir sub && echo 'gitdir: ../{admin}' > sub/.git; true"
    )
    if layout == "modules":
        script = script.replace(f" && echo ../.. > {admin}/commondir", "")
    attack = run_inside(vbox, repo, script)
    assert not (repo / "sub" / ".git").is_file(), attack
    subprocess.run(["git", "commit", "--allow-empty", "-qm", "x"], cwd=repo / "sub", env={**vbox.env, **GIT_ENV}, capture_output=True)
    assert not marker.exists(), attack


@pytest.mark.parametrize("hooks_path", ["githooks", "ABSOLUTE"])
def test_a_global_hooks_path_covers_repositories_made_inside(vbox: Box, hooks_path: str) -> None:
    """core.hooksPath in ~/.gitconfig names a folder for every repository, one the run makes too."""
    shared = vbox.project / "shared-hooks"
    value = str(shared) if hooks_path == "ABSOLUTE" else hooks_path
    (vbox.home / ".gitconfig").write_text(f"[core]\n\thooksPath = {value}\n")
    marker = vbox.outside / f"RAN-global-{hooks_path}"
    folder = str(shared) if hooks_path == "ABSOLUTE" else "evil/githooks"
    attack = vbox.run(
        f"git init -q evil && mkdir -p {folder} && printf '#!/bin/sh\\ntouch {marker}\\n' > {folder}/pre-commit && "
        f"chmod +x {folder}/pre-commit; true",
        env=GIT_ENV,
    )
    env = {
        **vbox.env,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.test",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.test",
    }  # the global config applies: no GIT_CONFIG_NOSYSTEM needed
    if (vbox.project / "evil" / ".git").is_dir():
        (vbox.project / "evil" / "f.txt").write_text("f\n")
        subprocess.run(["git", "add", "-A"], cwd=vbox.project / "evil", env=env, capture_output=True)
        subprocess.run(["git", "commit", "-qm", "f"], cwd=vbox.project / "evil", env=env, capture_output=True)
    assert not marker.exists(), attack
    control = vbox.run("git init -q fine && echo ok", env=GIT_ENV)
    assert "ok" in control.stdout and (vbox.project / "fine" / ".git" / "config").exists(), control


def test_a_writable_place_inside_a_git_dir_keeps_its_hooks_and_config(vbox: Box) -> None:
    """Issue 32: allow_write naming a git dir, or its hooks folder, made hooks and config writable."""
    repo = vbox.outside / "x"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    before = (repo / ".git" / "config").read_bytes()
    for place in (repo / ".git", repo / ".git" / "hooks"):
        policy = f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{place}"]\n'
        result = vbox.run(
            f"echo evil > {repo}/.git/hooks/pre-commit; echo '[core] fsmonitor = evil' >> {repo}/.git/config;"
            f" echo data > {repo}/.git/objects/probe && echo WROTE-OBJECTS; true",
            policy=policy,
        )
        assert not (repo / ".git" / "hooks" / "pre-commit").exists(), result
        assert (repo / ".git" / "config").read_bytes() == before, result
        if place.name == ".git":
            assert "WROTE-OBJECTS" in result.stdout, result  # control: the rest of the git dir is writable as asked
