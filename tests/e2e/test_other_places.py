"""The floor in every writable place, not only the project (issue 32, item 1; ESCAPES 89).

With `allow_write = [".", SRC]`, SRC is walked at planning as the project is:
the git dirs there have their hooks and config kept read-only, and after the
run the folders that changed there are listed again, so a repository made
during the run, or a runs-later file planted at any depth, is judged and
moved aside. Each attack is checked on the host the way a user would meet it
(`git status` there); each has a control that ordinary work there stays.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.boxes import Box

pytestmark = pytest.mark.e2e

PAYLOAD = '#!/bin/sh\necho PWNED > "$MARK"\n'
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test"}  # fmt: skip


def _policy(box: Box, src: Path) -> str:
    return f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{src}"]\n'


def _src(box: Box) -> Path:
    """Another writable place outside the project, holding a repository the user works in."""
    src = box.outside / "src"
    other = src / "other"
    other.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(other)], check=True, env={**box.env, **GIT_ENV})
    (other / "README").write_text("other\n")
    return src


def _host_git(box: Box, folder: Path, mark: Path, *words: str) -> subprocess.CompletedProcess[str]:
    env = {**box.env, **GIT_ENV, "MARK": str(mark), "GIT_CEILING_DIRECTORIES": str(folder.parent)}
    return subprocess.run(["git", *(words or ("status",))], cwd=folder, env=env, capture_output=True, text=True, timeout=30)


def _payload(box: Box) -> Path:
    payload = box.outside / "payload.sh"
    payload.write_text(PAYLOAD)
    payload.chmod(0o755)
    return payload


def test_a_hook_in_a_repository_of_another_writable_place_is_refused(vbox: Box) -> None:
    src = _src(vbox)
    payload, mark = _payload(vbox), vbox.root / "mark"
    hook = src / "other" / ".git" / "hooks" / "pre-commit"
    attack = vbox.run(f"cp {payload} {hook}; git -C {src}/other config core.fsmonitor {payload}; echo done", policy=_policy(vbox, src))
    assert "done" in attack.stdout, attack
    assert not hook.exists()
    _host_git(vbox, src / "other", mark, "add", "README")
    _host_git(vbox, src / "other", mark, "commit", "-qm", "x")
    assert not mark.exists(), "a host git in the other place ran what the sandbox planted"
    control = vbox.run(f"echo changed > {src}/other/README && echo more > {src}/other/notes", policy=_policy(vbox, src))
    assert control.returncode == 0, control
    assert (src / "other" / "README").read_text() == "changed\n" and (src / "other" / "notes").read_text() == "more\n"


def test_a_repository_made_during_the_run_in_another_place_keeps_no_hook(vbox: Box) -> None:
    src = _src(vbox)
    payload, mark = _payload(vbox), vbox.root / "mark"
    attack = vbox.run(
        f"git init -q {src}/new && cp {payload} {src}/new/.git/hooks/post-checkout "
        f"&& git -C {src}/new config core.fsmonitor {payload} && echo PLANTED",
        policy=_policy(vbox, src),
    )
    assert "PLANTED" in attack.stdout, attack
    _host_git(vbox, src / "new", mark)
    assert not mark.exists(), "a host git status in the new repository ran the sandbox's fsmonitor"
    assert "stockade-quarantine" in attack.stderr, attack
    # Control: a repository made there, with nothing planted, is a working repository on the host.
    control = vbox.run(f"git init -q {src}/clean && echo x > {src}/clean/f && git -C {src}/clean add f && echo MADE", policy=_policy(vbox, src))
    assert "MADE" in control.stdout and "quarantine" not in control.stderr, control
    assert _host_git(vbox, src / "clean", mark).returncode == 0


@pytest.mark.parametrize("name", [".envrc", ".pdbrc", ".vscode/tasks.json", ".git/hooks/pre-push"])
def test_a_runs_later_file_planted_deep_in_another_place_is_moved_aside(vbox: Box, name: str) -> None:
    src = _src(vbox)
    target = src / "deep" / "er" / name
    attack = vbox.run(f"mkdir -p {target.parent} && echo planted > {target} && echo PLANTED", policy=_policy(vbox, src))
    assert "PLANTED" in attack.stdout, attack
    assert not target.exists(), f"{name} planted in another writable place stays where the host reads it"
    assert "stockade-quarantine" in attack.stderr, attack
    control = vbox.run(f"mkdir -p {src}/deep/work && echo kept > {src}/deep/work/notes.txt", policy=_policy(vbox, src))
    assert control.returncode == 0 and (src / "deep" / "work" / "notes.txt").read_text() == "kept\n", control


def test_a_package_cache_the_profile_opens_is_not_walked(vbox: Box) -> None:
    """The caches built-in profiles open are not other places to walk (issue 32's cache layer judges them):
    the plan does not walk ~/.npm, and a run writing there works as before."""
    npm = vbox.home / ".npm"
    npm.mkdir()
    result = vbox.run("echo cached > ~/.npm/entry && cat ~/.npm/entry", options=["--profile", "npm", "--dry-run"])
    assert result.returncode == 0, result
    run = vbox.run("echo cached > ~/.npm/entry && cat ~/.npm/entry", options=["--profile", "npm"])
    assert run.returncode == 0 and run.stdout == "cached\n", run


def test_a_file_made_where_a_deny_write_glob_matches_is_moved_aside(vbox: Box) -> None:
    """deny_write globs held only the files that existed at planning: `**/.env` made in a new folder
    (of the project or another writable place) stayed."""
    src = _src(vbox)
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{src}"]\ndeny_write = ["{vbox.root}/**/.env"]\n'
    attack = vbox.run(f"mkdir -p {src}/newdir new && echo TOKEN=x > {src}/newdir/.env && echo TOKEN=x > new/.env && echo MADE", policy=policy)
    assert "MADE" in attack.stdout, attack
    assert not (src / "newdir" / ".env").exists() and not (vbox.project / "new" / ".env").exists(), attack.stderr
    assert "stockade-quarantine" in attack.stderr, attack
    control = vbox.run(f"echo kept > {src}/newdir/env.txt && echo kept > new/env.txt", policy=policy)
    assert control.returncode == 0, control
    assert (src / "newdir" / "env.txt").read_text() == "kept\n" and (vbox.project / "new" / "env.txt").read_text() == "kept\n"


def test_a_bare_repositorys_hooks_folder_swapped_for_a_link_is_moved_aside(vbox: Box) -> None:
    """Review of issue 32: `mv hooks hooks.orig; ln -s ../tools hooks` in a bare repository (found by no `.git`)
    made a host `git push` to it run the sandbox's post-receive."""
    src = _src(vbox)
    bare = src / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True, env={**vbox.env, **GIT_ENV})
    attack = vbox.run(
        f"mkdir {src}/tools && cp {_payload(vbox)} {src}/tools/post-receive && mv {bare}/hooks {bare}/hooks.orig "
        f"&& ln -s ../tools {bare}/hooks && echo SWAPPED",
        policy=_policy(vbox, src),
    )
    assert "SWAPPED" in attack.stdout, attack
    assert not (bare / "hooks").is_symlink(), "the link to the sandbox's hooks stays where git looks"
    assert "stockade-quarantine" in attack.stderr, attack


def test_a_runs_later_file_changed_in_another_place_is_named(vbox: Box) -> None:
    """Review of issue 32: a Makefile or .husky hook changed in another place went unsaid (the project's are named)."""
    src = _src(vbox)
    (src / "other" / "Makefile").write_text("all:\n\ttrue\n")
    result = vbox.run(f"printf '\\tcurl evil\\n' >> {src}/other/Makefile", policy=_policy(vbox, src))
    assert result.returncode == 0, result
    assert "Makefile" in result.stderr, result.stderr
    quiet = vbox.run(f"echo x > {src}/other/notes.txt", policy=_policy(vbox, src))
    assert "notes.txt" not in quiet.stderr, quiet.stderr


def test_what_the_host_changes_behind_a_wall_during_the_run_is_not_moved_aside(vbox: Box) -> None:
    """Review of issue 32: with the home writable, an agent's login the host rewrote during the run (a file the
    sandbox could not even see) was renamed as if the run had planted it."""
    login = vbox.home / ".claude" / "settings.json"
    login.parent.mkdir(parents=True)
    login.write_text("{}\n")
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{vbox.home}"]\ndeny_read = ["{login.parent}"]\n'
    proc = subprocess.Popen(
        [*vbox.command_words(["--policy", str(vbox.policy(policy))]), "--", "sh", "-c", "echo started; sleep 2"],
        cwd=vbox.project, env=vbox.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    login.write_text('{"theme": "dark"}\n')  # the host's own agent, while the run goes on
    _out, err = proc.communicate(timeout=60)
    assert login.read_text() == '{"theme": "dark"}\n', err
    assert "quarantine" not in err, err
