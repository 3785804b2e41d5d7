"""The plan cache (bwrap/plan/plan_cache.py) through real runs: a second run with unchanged inputs
skips planning, and every change a plan depends on makes the next run plan again.

Each security case runs once to store a plan, changes one input on the host, then attacks:
the attack must fail as it would against a fresh plan, and a control shows the same run works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.escapes import policy_text, q

PLANNED = "stockade.bwrap.plan.planner"  # the planner: imported only when a run plans

# The probe sees only the host sockets of its own box: other tests running beside it (a socket made
# and removed every 10 ms, daemons starting) change the machine's socket list, which makes every
# stored plan stale (plan_cache.py, by design), and these tests are about the filesystem.
PROBE = (
    "import os, sys\n"
    "from stockade.bwrap.parts import host_sockets\n"
    "everywhere = host_sockets.scoped\n"
    "box = os.environ.get('STOCKADE_PROBE_BOX')\n"
    "if box:\n"
    "    host_sockets.scoped = lambda scope: tuple(p for p in everywhere(scope) if p.startswith(box + '/'))\n"
    "from stockade.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    f"print('PLANNED' if {PLANNED!r} in sys.modules else 'CACHED', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def run(
    box: Box, script: str, *, policy: Path | None = None, env: dict[str, str] | None = None, options: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`stockade run` in-process of a small probe that says whether this run planned."""
    words = [sys.executable, "-c", PROBE, "run", *options]
    if policy is not None:
        words += ["--policy", str(policy)]
    return subprocess.run([*words, "--", "/bin/sh", "-c", script], cwd=box.project, env={**box.env, "STOCKADE_PROBE_BOX": str(box.root), **(env or {})},
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def planned(result: subprocess.CompletedProcess[str]) -> bool:
    return "PLANNED" in result.stderr.splitlines()[-1]


def test_second_run_uses_the_stored_plan_and_behaves_the_same(vbox: Box) -> None:
    first = run(vbox, "echo one > made.txt; cat ~/.ssh/id_test 2>/dev/null || echo SSH-DENIED")
    second = run(vbox, "echo two >> made.txt; cat ~/.ssh/id_test 2>/dev/null || echo SSH-DENIED")
    assert planned(first) and not planned(second), (first.stderr, second.stderr)
    assert "SSH-DENIED" in first.stdout and "SSH-DENIED" in second.stdout
    assert (vbox.project / "made.txt").read_text() == "one\ntwo\n"
    off = run(vbox, "true", env={"STOCKADE_NO_PLAN_CACHE": "1"})
    assert planned(off), off.stderr


def test_a_policy_with_process_and_memory_limits_uses_its_stored_plan(vbox: Box) -> None:
    """The cgroup probe belongs to the run, not the plan: planning that read /proc and /sys could not be stored."""
    policy = vbox.policy(policy_text(extra='[limits]\npids = 512\nmemory = "1G"\n'))
    first = run(vbox, "true", policy=policy)
    second = run(vbox, "echo SECOND", policy=policy)
    assert planned(first) and not planned(second), (first.stderr, second.stderr)
    assert second.returncode == 0 and "SECOND" in second.stdout, second


def test_exit_codes_and_summary_are_the_same_from_a_stored_plan(vbox: Box) -> None:
    run(vbox, "true")
    result = run(vbox, "touch Makefile; exit 7")
    assert not planned(result) and result.returncode == 7, result
    assert "Makefile (created)" in result.stderr, result.stderr


def test_a_repository_made_on_the_host_between_runs_is_protected_in_the_next(vbox: Box) -> None:
    """A stale plan would not know sub/.git, so its hooks would be writable in the second run."""
    run(vbox, "true")
    subprocess.run(["git", "init", "-q", str(vbox.project / "sub")], check=True, env={"PATH": "/usr/bin:/bin", "HOME": str(vbox.home)})
    hook = vbox.project / "sub" / ".git" / "hooks" / "pre-commit"
    attack = run(vbox, f"echo evil > {q(str(hook))} && echo WROTE")
    assert planned(attack), attack.stderr
    assert "WROTE" not in attack.stdout and not hook.exists(), attack
    control = run(vbox, "echo ok > sub/file && echo CONTROL")
    assert "CONTROL" in control.stdout and not planned(control), control


def test_a_source_file_created_between_runs_keeps_the_stored_plan(vbox: Box) -> None:
    run(vbox, "true")
    (vbox.project / "new.py").write_text("print(1)\n")
    (vbox.project / "pkg").mkdir()
    again = run(vbox, "cat new.py")
    assert "print(1)" in again.stdout
    assert planned(again), "a new folder is a new part of the walk: plan again"
    (vbox.project / "other.py").write_text("print(2)\n")
    third = run(vbox, "cat other.py")
    assert "print(2)" in third.stdout and not planned(third), third.stderr


def test_a_narrowed_policy_is_enforced_on_the_next_run(vbox: Box) -> None:
    policy = vbox.policy(policy_text(allow_write=[vbox.outside]))
    control = run(vbox, f"echo x > {q(str(vbox.outside / 'w1'))} && echo WROTE", policy=policy)
    assert "WROTE" in control.stdout, control
    policy.write_text(policy_text())
    attack = run(vbox, f"echo x > {q(str(vbox.outside / 'w2'))} && echo WROTE", policy=policy)
    assert planned(attack) and "WROTE" not in attack.stdout and not (vbox.outside / "w2").exists(), attack


def test_a_user_config_written_between_runs_applies_to_the_next(vbox: Box) -> None:
    run(vbox, "true")
    config = vbox.home / ".config" / "stockade" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(policy_text(deny_read=[vbox.outside]))
    attack = run(vbox, f"cat {q(str(vbox.outside / 'secret.txt'))} || echo DENIED")
    assert planned(attack) and "CANARY-O" not in attack.stdout and "DENIED" in attack.stdout, attack


def test_a_secret_in_the_environment_is_withheld_from_a_stored_plan(vbox: Box) -> None:
    run(vbox, "true")
    attack = run(vbox, "echo key=${AWS_SECRET_ACCESS_KEY:-none}", env={"AWS_SECRET_ACCESS_KEY": "CANARY-ENV"})
    assert "CANARY-ENV" not in attack.stdout and "key=none" in attack.stdout, attack
    control = run(vbox, "echo lang=$LANG", env={"AWS_SECRET_ACCESS_KEY": "CANARY-ENV"})
    assert "lang=C.UTF-8" in control.stdout and not planned(control), control


def test_a_floor_file_planted_by_the_first_run_does_not_survive_into_the_second(vbox: Box) -> None:
    """The first run tries to leave a runs-later file for the host; the stored plan must not help it."""
    first = run(vbox, "mkdir -p fresh && git init -q fresh 2>/dev/null; echo evil > fresh/.git/hooks/pre-commit; echo DONE")
    assert "DONE" in first.stdout
    assert not (vbox.project / "fresh" / ".git" / "hooks" / "pre-commit").exists(), first.stderr
    second = run(vbox, "echo evil > fresh/.git/hooks/pre-commit && echo WROTE")
    assert "WROTE" not in second.stdout, second


def test_a_plan_file_that_is_not_private_is_ignored(vbox: Box) -> None:
    run(vbox, "true")
    plans = vbox.home / ".cache" / "stockade" / "plans"
    stored = next(plans.glob("*.plan"))
    stored.chmod(0o644)
    again = run(vbox, "echo RAN")
    assert "RAN" in again.stdout and planned(again), again
    stored.write_bytes(b"\x00garbage")
    stored.chmod(0o600)
    broken = run(vbox, "echo RAN")
    assert "RAN" in broken.stdout and planned(broken), broken


# While a run plans, something outside it (the user, an agent's own file tools, a sandbox running
# alongside) writes into a folder the walk has already listed. The plan does not know the file;
# the stored plan must not outlive that: the next run plans again and protects it.
RACING_PROBE = (
    "import posix, sys\n"
    "from stockade.bwrap.parts import globs\n"
    "target = sys.argv.pop(1)\n"
    "walk = globs.expand\n"
    "def expand(*args, **kwargs):\n"
    "    found = walk(*args, **kwargs)\n"
    "    fd = posix.open(target, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o644)\n"  # not through os: a writer outside
    "    posix.write(fd, b'CANARY-RACE')\n"
    "    posix.close(fd)\n"
    "    globs.expand = walk\n"
    "    return found\n"
    "globs.expand = expand\n" + PROBE
)


def test_a_secret_written_while_a_run_plans_is_hidden_from_the_next(vbox: Box) -> None:
    (vbox.project / "sub").mkdir()
    secret = vbox.project / "sub" / ".env"
    words = [sys.executable, "-c", RACING_PROBE, str(secret), "run", "--", "/bin/sh", "-c", "true"]
    racing = subprocess.run(words, cwd=vbox.project, env=vbox.env, capture_output=True, text=True, timeout=60)
    assert racing.returncode == 0 and secret.read_text() == "CANARY-RACE", racing
    attack = run(vbox, "cat sub/.env || echo DENIED")
    assert "CANARY-RACE" not in attack.stdout and "DENIED" in attack.stdout, attack
    control = run(vbox, "cat sub/.env || echo DENIED")
    assert "DENIED" in control.stdout and not planned(control), control


def test_a_new_file_matching_a_glob_based_in_a_project_folder_is_protected(vbox: Box) -> None:
    """`config/*.key` is walked from project/config, not from the project: a changed folder is
    checked against every glob walked inside the project, or a new key stays readable."""
    keys, dist = vbox.project / "config", vbox.project / "dist"
    keys.mkdir()
    dist.mkdir()
    (keys / "a.key").write_text("CANARY-A\n")
    (dist / "a.js").write_text("old\n")
    policy = vbox.policy(policy_text(deny_read=[f"{keys}/*.key"], deny_write=[f"{dist}/*.js"]))
    run(vbox, "true", policy=policy)
    (keys / "b.key").write_text("CANARY-B\n")
    (dist / "b.js").write_text("old\n")
    attack = run(vbox, "cat config/b.key || echo DENIED; echo evil > dist/b.js || echo RO", policy=policy)
    assert "CANARY-B" not in attack.stdout and "DENIED" in attack.stdout, attack
    assert "RO" in attack.stdout and (dist / "b.js").read_text() == "old\n", attack
    (keys / "notes.txt").write_text("NOTES\n")
    control = run(vbox, "cat config/notes.txt; cat config/b.key || echo DENIED", policy=policy)
    assert "NOTES" in control.stdout and "DENIED" in control.stdout and not planned(control), control


def test_a_link_added_to_a_denied_project_folder_hides_its_target_in_the_next_run(vbox: Box) -> None:
    """A fresh plan hides the real target of every link inside a denied folder (ESCAPES 8); the
    project walk's summary of that folder knows nothing of links, so it must not keep the plan."""
    secrets = vbox.project / "secrets"
    secrets.mkdir()
    target = vbox.outside / "secret.txt"
    policy = vbox.policy(policy_text(deny_read=[secrets]))
    control = run(vbox, f"cat {q(str(target))} || echo DENIED", policy=policy)
    assert "CANARY-O" in control.stdout, control
    (secrets / "prod.key").symlink_to(target)
    attack = run(vbox, f"cat {q(str(target))} || echo DENIED", policy=policy)
    assert "CANARY-O" not in attack.stdout and "DENIED" in attack.stdout, attack
    again = run(vbox, f"cat {q(str(target))} || echo DENIED", policy=policy)
    assert "DENIED" in again.stdout and not planned(again), again


def test_a_file_in_a_denied_project_folder_turned_into_a_link_hides_its_target(vbox: Box) -> None:
    """The same names are not the same entries when a file became a link."""
    secrets = vbox.project / "secrets"
    secrets.mkdir()
    (secrets / "prod.key").write_text("old\n")
    target = vbox.outside / "secret.txt"
    policy = vbox.policy(policy_text(deny_read=[secrets]))
    control = run(vbox, f"cat {q(str(target))} || echo DENIED", policy=policy)
    assert "CANARY-O" in control.stdout, control
    (secrets / "prod.key").unlink()
    (secrets / "prod.key").symlink_to(target)
    attack = run(vbox, f"cat {q(str(target))} || echo DENIED", policy=policy)
    assert "CANARY-O" not in attack.stdout and "DENIED" in attack.stdout, attack


def test_a_runs_later_file_changed_with_its_size_and_mtime_kept_is_moved_aside(vbox: Box) -> None:
    """A submodule's git dir whose working tree is not checked out has no mount over its hooks; a hook
    rewritten in place at the same size, its mtime set back, is still a change (ctime cannot be set back)."""
    hooks = vbox.project / ".git" / "modules" / "x" / "hooks"
    hooks.mkdir(parents=True)
    hook = hooks / "post-checkout"
    hook.write_text("#!/bin/sh\necho good\n")
    hook.chmod(0o755)
    (vbox.project / "Makefile").write_text("all:\n\techo ok\n")
    control = run(vbox, "cat .git/modules/x/hooks/post-checkout")
    assert "good" in control.stdout and hook.read_text() == "#!/bin/sh\necho good\n", control
    script = (
        "for f in .git/modules/x/hooks/post-checkout Makefile; do cp -p $f /tmp/ref;"
        " sed 's/good/EVIL/; s/ok/EV/' /tmp/ref > $f; touch -r /tmp/ref $f; done; echo REWROTE"
    )
    attack = run(vbox, script)
    assert "REWROTE" in attack.stdout and not planned(attack), attack
    assert not hook.exists() or "EVIL" not in hook.read_text(), attack
    assert "Makefile (changed)" in attack.stderr, attack.stderr


def test_a_plan_stored_by_another_install_of_stockade_is_not_used(vbox: Box) -> None:
    """Two installs (a system one and a project's venv, an old and a new release) share the cache
    folder; a plan made by one install's planning must not run under the other, whose planning may
    protect more. Here the other install is a copy that does not hide ~/.ssh."""
    import shutil

    import stockade.bwrap.plan.plan_cache as ours

    source = Path(ours.__file__).resolve().parents[2]
    other = vbox.root / "other-install" / "stockade"
    shutil.copytree(source, other, ignore=shutil.ignore_patterns("__pycache__"))
    mounts = other / "bwrap" / "plan" / "mounts.py"
    weak = '    masked when the run starts, if still there (execute.py)."""\n'
    assert weak in mounts.read_text()
    mounts.write_text(mounts.read_text().replace(weak, weak + '    if path.endswith("/.ssh"):\n        return\n'))
    home = other / "bwrap" / "parts" / "private_home.py"
    shown = '    if mode != "private" or'
    assert shown in home.read_text()
    home.write_text(home.read_text().replace(shown, "    if True or"))  # the real home shows
    other_probe = f"import sys\nsys.path.insert(0, {str(other.parent)!r})\n" + PROBE
    words = [sys.executable, "-c", other_probe, "run", "--", "/bin/sh", "-c", "cat ~/.ssh/id_test || echo SSH-DENIED"]
    weaker = subprocess.run(words, cwd=vbox.project, env=vbox.env, capture_output=True, text=True, timeout=60)
    assert "CANARY-SSH" in weaker.stdout, weaker  # the other install's own run is its business
    attack = run(vbox, "cat ~/.ssh/id_test || echo SSH-DENIED")
    assert planned(attack) and "CANARY-SSH" not in attack.stdout and "SSH-DENIED" in attack.stdout, attack
    control = run(vbox, "cat ~/.ssh/id_test || echo SSH-DENIED")
    assert not planned(control) and "SSH-DENIED" in control.stdout, control


def test_a_folder_made_unreadable_by_one_run_does_not_unmask_its_secrets_in_the_next(vbox: Box) -> None:
    """A run cannot read sub/.env, but it can take the search or read bit off sub, its own folder:
    the next plan's walk (an unprivileged user's) could not look inside, would mask nothing there,
    and that run would put the bit back and read the secret. After the run the locked folder is
    moved aside (its contents cannot be checked); a folder still locked when a run plans (its
    check never ran: stockade was killed) is hidden whole."""
    sub = vbox.project / "sub"
    sub.mkdir()
    (sub / ".env").write_text("CANARY-ENV-FILE\n")
    unlock_all = "for d in sub*; do chmod 755 $d; cat $d/.env; done; echo TRIED"
    try:
        for mode in (0o000, 0o600):
            sub.chmod(mode)  # as a run killed before its check would leave it
            attack = run(vbox, unlock_all)
            assert "TRIED" in attack.stdout and "CANARY-ENV-FILE" not in attack.stdout, attack
            sub.chmod(0o755)
        first = run(vbox, "cat sub/.env || echo DENIED; chmod 000 sub; echo LOCKED")
        assert "DENIED" in first.stdout and "LOCKED" in first.stdout and "CANARY-ENV-FILE" not in first.stdout, first
        if os.geteuid() != 0:  # root's walks look into any folder: nothing to move
            assert not sub.exists() and "renamed to" in first.stderr, first.stderr
        attack = run(vbox, unlock_all)
        assert "TRIED" in attack.stdout and "CANARY-ENV-FILE" not in attack.stdout, attack
    finally:
        for folder in vbox.project.iterdir():
            folder.chmod(0o755)
    control = run(vbox, "ls -a sub*; cat sub*/.env || echo DENIED")
    assert ".env" in control.stdout and "DENIED" in control.stdout, control


def test_a_repository_made_and_locked_during_a_run_is_still_checked_after_it(vbox: Box) -> None:
    """After the run the walk lists the folders that changed; a run that takes read permission off
    its own new folder (search kept, so git still works there) must not hide a hook from that check."""
    script = (
        "git init -q sub && printf '#!/bin/sh\\necho HOOK\\n' > sub/.git/hooks/pre-commit"
        " && chmod +x sub/.git/hooks/pre-commit && chmod 0100 sub && echo PLANTED"
    )
    first = run(vbox, script)
    assert "PLANTED" in first.stdout, first
    hook = vbox.project / "sub" / ".git" / "hooks" / "pre-commit"
    try:
        assert not hook.exists(), first.stderr
    finally:
        for folder in vbox.project.iterdir():
            folder.chmod(0o755)
    control = run(vbox, "git init -q other && echo made > other/file && echo CONTROL")
    assert "CONTROL" in control.stdout and (vbox.project / "other" / "file").read_text() == "made\n", control


def test_a_repository_made_during_a_run_with_its_git_dir_made_read_only_is_still_moved_aside(vbox: Box) -> None:
    """Moving a planted config aside is a rename in its folder: a run that takes write permission off
    that folder must not make the move fail quietly (git status on the host would run fsmonitor)."""
    canary = vbox.outside / "fsmonitor-ran"
    script = f"git init -q sub && git -C sub config core.fsmonitor 'echo RAN > {q(str(canary))}; false' && chmod 0500 sub/.git && echo PLANTED"
    first = run(vbox, script)
    assert "PLANTED" in first.stdout, first
    try:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(vbox.home), "GIT_CONFIG_NOSYSTEM": "1"}
        subprocess.run(["git", "status"], cwd=vbox.project / "sub", env=env, capture_output=True, timeout=30)
        assert not canary.exists(), first.stderr
    finally:
        for folder, subdirs, _files in os.walk(vbox.project):
            for name in subdirs:
                os.chmod(os.path.join(folder, name), 0o755)


def test_a_git_dir_made_unsearchable_in_another_writable_place_is_swept_without_a_crash(vbox: Box) -> None:
    """Floor files whose folder was absent at planning are swept after the run by looking at each
    one; a run that takes search permission off the new folder must not crash that sweep (the
    command's exit status lost, the rest unswept) nor leave the folder where git would use it."""
    policy = vbox.policy(policy_text(allow_write=[vbox.outside]))
    git_dir = vbox.outside / ".git"
    script = f"mkdir -p {q(str(git_dir))}/hooks && echo evil > {q(str(git_dir))}/hooks/pre-commit && chmod 0600 {q(str(git_dir))}; exit 3"
    attack = run(vbox, script, policy=policy)
    for folder in vbox.outside.iterdir():
        folder.chmod(0o755)
    assert attack.returncode == 3 and "Traceback" not in attack.stderr, attack
    assert not (git_dir / "hooks" / "pre-commit").exists() and "renamed to" in attack.stderr, attack.stderr


def test_a_secret_whose_folder_a_run_made_unsearchable_is_not_planned_as_absent(vbox: Box) -> None:
    """With home writable, ~/.docker is not hidden, only its config.json: a run can take search
    permission off ~/.docker, after which the next plan could not tell config.json exists. That
    run must not start with it readable (it stops, saying which permission to give back)."""
    docker = vbox.home / ".docker"
    docker.mkdir()
    (docker / "config.json").write_text("CANARY-DOCKER\n")
    policy = vbox.policy(policy_text(allow_write=[vbox.home]))
    first = run(vbox, "cat ~/.docker/config.json || echo DENIED; chmod 600 ~/.docker; echo LOCKED", policy=policy)
    assert "DENIED" in first.stdout and "LOCKED" in first.stdout, first
    # For a user who cannot search it then, the check after the run cannot tell whether a protected path
    # inside (~/.docker/cli-plugins) was planted: the folder is moved aside at once (root still sees in).
    moved = sorted(vbox.home.glob(".docker.stockade-quarantine-*"))
    assert docker.exists() or (moved and "stockade-quarantine" in first.stderr), first
    locked = docker if docker.exists() else moved[0]
    try:
        attack = run(vbox, "chmod 755 ~/.docker; cat ~/.docker/config.json || echo DENIED", policy=policy)
        assert "CANARY-DOCKER" not in attack.stdout, attack
    finally:
        locked.chmod(0o755)
    control = run(vbox, "cat ~/.docker/config.json || echo DENIED", policy=policy)
    assert "DENIED" in control.stdout and "CANARY-DOCKER" not in control.stdout, control


SMALL_WALK_PROBE = "from stockade.bwrap.parts import globs\nglobs.MAX_ENTRIES = 50\n" + PROBE  # 500000 entries, scaled down


@pytest.mark.xfail(
    strict=True,
    reason="HOLE: bwrap/parts/globs.py stops the project walk after MAX_ENTRIES (500000) entries and plans with what it "
    "found so far (a note says so): a run that fills the project's top folder with that many empty files leaves "
    "every later fresh plan without the **/.env masks, nested repositories' mounts and the post-run check below it; "
    "failing closed would stop legitimately huge trees (node_modules), so the choice is the maintainers'",
)
def test_a_run_that_floods_the_project_does_not_unmask_secrets_below_it(vbox: Box) -> None:
    sub = vbox.project / "sub"
    sub.mkdir()
    (sub / ".env").write_text("CANARY-FLOOD\n")

    def small(script: str) -> subprocess.CompletedProcess[str]:
        words = [sys.executable, "-c", SMALL_WALK_PROBE, "run", "--", "/bin/sh", "-c", script]
        return subprocess.run(words, cwd=vbox.project, env={**vbox.env, "STOCKADE_NO_PLAN_CACHE": "1"}, capture_output=True, text=True, timeout=60)

    first = small("cat sub/.env || echo DENIED; for i in $(seq 60); do : > junk$i; done; echo FLOODED")
    assert "DENIED" in first.stdout and "FLOODED" in first.stdout, first
    attack = small("cat sub/.env || echo DENIED")
    assert "CANARY-FLOOD" not in attack.stdout, attack


def test_a_git_pointer_made_during_a_run_is_moved_aside(vbox: Box) -> None:
    """`sub/.git` may be a file naming the git dir elsewhere (submodules, worktrees): a run that
    writes one, pointing at a git dir it made where nothing checks (another writable place, or a
    folder of the project not named .git), would have the host's next commit in sub run its hook."""
    policy = vbox.policy(policy_text(allow_write=[".", vbox.outside]).replace('"."', json.dumps(str(vbox.project))))
    canary = vbox.root / "hook-ran"
    hook = f"#!/bin/sh\\necho RAN > {canary}\\n"
    script = " && ".join((
        f"git init -q --bare {q(str(vbox.outside / 'gd'))} && git init -q --bare gd2",
        f"printf {q(hook)} > {q(str(vbox.outside / 'gd' / 'hooks' / 'pre-commit'))} && printf {q(hook)} > gd2/hooks/pre-commit",
        f"chmod +x {q(str(vbox.outside / 'gd' / 'hooks' / 'pre-commit'))} gd2/hooks/pre-commit",
        f"mkdir a b && echo 'gitdir: {vbox.outside / 'gd'}' > a/.git && echo 'gitdir: ../gd2' > b/.git",
        "git -C a config core.bare false && git -C b config core.bare false && echo PLANTED",
    ))  # fmt: skip
    first = run(vbox, script, policy=policy)
    assert "PLANTED" in first.stdout, first
    for name in ("a", "b"):
        host_commit(vbox, vbox.project / name)
        assert not canary.exists(), (name, first.stderr)
    control = run(vbox, "git init -q c && echo made > c/file && echo CONTROL", policy=policy)
    assert "CONTROL" in control.stdout and (vbox.project / "c" / ".git").is_dir(), control


def test_a_floor_folder_made_as_a_link_during_a_run_is_moved_aside(vbox: Box) -> None:
    """The check after the run looks inside floor folders (`.git/hooks/*`, `.vscode/*`) but does not
    follow links: a new repository whose hooks folder is a link to hooks kept elsewhere would run
    them on the host's next commit."""
    policy = vbox.policy(policy_text(allow_write=[vbox.outside]))
    canary = vbox.root / "hook-ran"
    hooks = vbox.outside / "hooks"
    script = " && ".join((
        f"mkdir -p {q(str(hooks))} && printf {q(f'#!/bin/sh{chr(92)}necho RAN > {canary}{chr(92)}n')} > {q(str(hooks / 'pre-commit'))}",
        f"chmod +x {q(str(hooks / 'pre-commit'))} && git init -q sub && rm -rf sub/.git/hooks && ln -s {q(str(hooks))} sub/.git/hooks",
        f"mkdir -p sub2 && ln -s {q(str(hooks))} sub2/.vscode && echo PLANTED",
    ))  # fmt: skip
    first = run(vbox, script, policy=policy)
    assert "PLANTED" in first.stdout, first
    host_commit(vbox, vbox.project / "sub")
    assert not canary.exists(), first.stderr
    assert not (vbox.project / "sub2" / ".vscode").is_symlink(), first.stderr
    control = run(vbox, "git init -q c && mkdir -p d/.vscode && echo '{}' > d/.vscode/x.json && echo CONTROL", policy=policy)
    assert "CONTROL" in control.stdout and (vbox.project / "c" / ".git" / "hooks").is_dir(), control
    assert (vbox.project / "d" / ".vscode").is_dir(), control.stderr


@pytest.mark.parametrize("cache", [False, True], ids=["place", "cache"])
def test_a_repository_made_in_another_writable_place_and_linked_from_the_project_keeps_no_hook(vbox: Box, cache: bool) -> None:
    place = vbox.home / ".cache" / "pip" if cache else vbox.outside
    place.mkdir(parents=True, exist_ok=True)
    policy = vbox.policy(policy_text(allow_write=[place]))
    canary = vbox.root / "hook-ran"
    repo = place / "repo"
    hook = repo / ".git" / "hooks" / "pre-commit"
    script = (
        f"git init -q {q(str(repo))} && printf {q(f'#!/bin/sh{chr(92)}necho RAN > {canary}{chr(92)}n')} > {q(str(hook))}"
        f" && chmod +x {q(str(hook))} && ln -s {q(str(repo))} sub && echo PLANTED"
    )
    first = run(vbox, script, policy=policy)
    assert "PLANTED" in first.stdout, first
    if cache:  # a package cache is written through the project's layer (bwrap/parts/layers.py): nothing reached the host's
        assert not repo.exists(), first.stderr
        return
    host_commit(vbox, vbox.project / "sub")
    assert not canary.exists(), first.stderr


def host_commit(box: Box, folder: Path) -> None:
    """What the user does after the run: a commit on the host, which runs the repository's hooks."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(box.home), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-c", "user.email=u@h", "-c", "user.name=u", "commit", "-q", "--allow-empty", "-m", "x"],
                   cwd=folder, env=env, capture_output=True, timeout=30)  # fmt: skip
