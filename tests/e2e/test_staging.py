"""Staged runs: real sandboxes write a stage, never the project, until `stockade accept`.

Each test runs real tools in a staged sandbox, checks that they saw their own
writes (the control), that the host's project did not change (the protection),
and then reviews, accepts or rejects, comparing the project with what the
sandbox saw. The conflict tests change the host while a stage is pending and
check that nothing is lost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.treesnap import snapshot

STAGE = ["--stage"]


def stockade(box: Box, *words: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", *words], cwd=cwd or box.project, env=box.env, capture_output=True, text=True, timeout=120
    )


def _git(box: Box, *words: str) -> str:
    env = {**box.env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(["git", *words], cwd=box.project, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done
    return done.stdout


def _project(box: Box) -> None:
    src = box.project / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "main.py").write_text("print('hello')\n")
    (src / "pkg" / "data.bin").write_bytes(bytes(range(256)) * 40)
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    (src / "run.sh").chmod(0o755)
    os.symlink("main.py", src / "link-to-main")
    (box.project / "README").write_text("readme\n")
    time.sleep(0.02)  # made before the runs begin, past the coarse clock's tick


def test_a_staged_rm_rf_leaves_the_project_and_accept_applies_it(vbox: Box) -> None:
    _project(vbox)
    before = snapshot(vbox.project)
    run = vbox.run("rm -rf src && ls; echo more >> README; cat README", options=STAGE)
    assert run.returncode == 0 and "src" not in run.stdout.split() and "more" in run.stdout, run  # the control: it saw its writes
    assert snapshot(vbox.project) == before, "the host's project is untouched"
    assert "changes to the project are staged" in run.stderr, run
    review = stockade(vbox, "review")
    assert review.returncode == 0 and "removed   src/" in review.stdout and "+more" in review.stdout, review
    accepted = stockade(vbox, "accept")
    assert accepted.returncode == 0, accepted
    assert not (vbox.project / "src").exists() and (vbox.project / "README").read_text() == "readme\nmore\n"
    undo = stockade(vbox, "undo")
    assert undo.returncode == 0, undo
    assert snapshot(vbox.project) == before
    assert "nothing staged" in stockade(vbox, "review").stdout


def test_an_editor_s_atomic_save_and_a_mode_change_are_staged_exactly(vbox: Box) -> None:
    _project(vbox)
    script = "printf 'print(1)\\n' > src/.main.py.swp && mv src/.main.py.swp src/main.py && chmod 700 src/run.sh && echo OK"
    run = vbox.run(script, options=STAGE)
    assert run.stdout == "OK\n", run
    assert (vbox.project / "src/main.py").read_text() == "print('hello')\n"
    review = stockade(vbox, "review")
    assert "mode 755 -> 700" in review.stdout and "+print(1)" in review.stdout, review
    assert stockade(vbox, "accept").returncode == 0
    assert (vbox.project / "src/main.py").read_text() == "print(1)\n"
    assert (vbox.project / "src/run.sh").stat().st_mode & 0o777 == 0o700


def test_a_git_checkout_of_another_branch_lands_whole(vbox: Box) -> None:
    _project(vbox)
    _git(vbox, "init", "-q", "-b", "main")
    _git(vbox, "add", "-A")
    _git(vbox, "commit", "-qm", "one")
    _git(vbox, "checkout", "-qb", "other")
    (vbox.project / "src/main.py").write_text("print('other')\n")
    (vbox.project / "added.txt").write_text("added\n")
    _git(vbox, "add", "-A")
    _git(vbox, "commit", "-qm", "two")
    _git(vbox, "checkout", "-q", "main")
    time.sleep(0.02)
    run = vbox.run("git checkout -q other && git status --porcelain && cat src/main.py", options=STAGE)
    assert run.returncode == 0 and run.stdout == "print('other')\n", run
    assert _git(vbox, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main", "the host's checkout stays"
    assert stockade(vbox, "accept").returncode == 0
    assert _git(vbox, "rev-parse", "--abbrev-ref", "HEAD").strip() == "other"
    assert _git(vbox, "status", "--porcelain") == "", "the working tree and git's data landed together"
    assert (vbox.project / "added.txt").read_text() == "added\n"


def test_git_writes_its_own_config_in_a_stage_and_the_review_marks_what_runs_later(vbox: Box) -> None:
    _project(vbox)
    _git(vbox, "init", "-q", "-b", "main")
    time.sleep(0.02)
    hooks = vbox.project / ".git/hooks"
    run = vbox.run(
        "git config core.fsmonitor 'touch /tmp/ran' && echo '#!/bin/sh' > .git/hooks/pre-commit && "
        "mkdir -p .vscode && echo '{}' > .vscode/tasks.json && echo code > src/new.py && echo OK",
        options=STAGE,
    )
    assert run.stdout == "OK\n", run  # the control: inside, git's config and the hooks folder are writable
    assert "fsmonitor" not in (vbox.project / ".git/config").read_text() and not (hooks / "pre-commit").exists()
    review = stockade(vbox, "review", "--names")
    lines = review.stdout.splitlines()
    marked = [line for line in lines if line.startswith("  !")]
    assert any(".git/hooks/pre-commit" in line for line in marked) and any(".git/config" in line for line in marked), review
    assert any(".vscode/tasks.json" in line for line in marked), review
    assert lines.index(marked[-1]) < next(i for i, line in enumerate(lines) if line.startswith("   ") and "src/new.py" in line), "marked first"
    accepted = stockade(vbox, "accept")
    assert accepted.returncode == 0 and "held 3 marked changes" in accepted.stdout, accepted
    assert (vbox.project / "src/new.py").exists() and not (hooks / "pre-commit").exists()
    assert "fsmonitor" not in (vbox.project / ".git/config").read_text()
    named = stockade(vbox, "accept", ".git/config")
    assert named.returncode == 0 and "fsmonitor" in (vbox.project / ".git/config").read_text(), named
    assert stockade(vbox, "reject").returncode == 0
    assert not (hooks / "pre-commit").exists() and "nothing staged" in stockade(vbox, "review").stdout


def test_git_s_ordinary_config_writes_need_no_review(vbox: Box) -> None:
    _project(vbox)
    _git(vbox, "init", "-q", "-b", "main")
    time.sleep(0.02)
    policy = '[checkpoints]\nstage = true\naccept = "unmarked"\n[filesystem]\nallow_write = ["."]\n'
    run = vbox.run("git remote add origin https://example.invalid/x.git && git init -q sub && echo OK", policy=policy)
    assert run.stdout == "OK\n", run
    assert "origin" in (vbox.project / ".git/config").read_text(), run
    assert (vbox.project / "sub/.git/config").exists() and _git(vbox, "-C", "sub", "config", "--local", "--list")
    assert not [p for p in (vbox.project / "sub/.git/hooks").iterdir() if not p.name.endswith(".sample")]
    assert "held for review" not in run.stderr, run


def test_a_build_writing_node_modules_lands_in_one_move(vbox: Box) -> None:
    _project(vbox)
    script = (
        'python3 -c "import os\n'
        "for i in range(300):\n"
        "    d = f'node_modules/pkg{i}/lib'; os.makedirs(d)\n"
        "    open(f'{d}/index.js', 'w').write(f'module.exports = {i}')\n\" && echo BUILT"
    )
    run = vbox.run(script, options=STAGE)
    assert run.stdout == "BUILT\n", run
    assert not (vbox.project / "node_modules").exists()
    names = stockade(vbox, "review", "--names")
    assert "new tree  node_modules/" in names.stdout, names
    assert stockade(vbox, "accept").returncode == 0
    assert len(list((vbox.project / "node_modules").glob("*/lib/index.js"))) == 300
    assert (vbox.project / "node_modules/pkg7/lib/index.js").read_text() == "module.exports = 7"


def test_a_host_edit_while_the_run_goes_is_a_conflict_and_is_kept(vbox: Box) -> None:
    _project(vbox)
    process = subprocess.Popen(
        [*vbox.command_words(STAGE), "--", "/bin/sh", "-c", "sleep 1; echo sandbox > README; echo sandbox > src/main.py"],
        cwd=vbox.project, env=vbox.env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(0.3)
    (vbox.project / "README").write_text("host edit\n")  # the user keeps working while the agent runs
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    accepted = stockade(vbox, "accept")
    assert accepted.returncode == 1 and "conflict: README" in accepted.stdout, accepted
    assert (vbox.project / "README").read_text() == "host edit\n", "never lost"
    assert (vbox.project / "src/main.py").read_text() == "sandbox\n", "the control: the rest lands"
    forced = stockade(vbox, "accept", "--force", "README")
    assert forced.returncode == 0 and (vbox.project / "README").read_text() == "sandbox\n", forced
    assert stockade(vbox, "undo").returncode == 0
    assert (vbox.project / "README").read_text() == "host edit\n", "a forced accept is undone like any run"


def test_two_staged_runs_at_once_conflict_on_the_same_file_only(vbox: Box) -> None:
    _project(vbox)
    first = subprocess.Popen(
        [*vbox.command_words(STAGE), "--", "/bin/sh", "-c", "echo first > README; echo one > one.txt; sleep 1"],
        cwd=vbox.project, env=vbox.env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    second = vbox.run("echo second > README; echo two > two.txt", options=STAGE)
    assert second.returncode == 0, second
    first.communicate(timeout=60)
    review = stockade(vbox, "review", "--names")
    assert review.stdout.count("stage ") == 2, review
    accepted = stockade(vbox, "accept")
    assert accepted.returncode == 1, accepted
    assert accepted.stdout.count("conflict: README") == 1, accepted
    assert (vbox.project / "one.txt").exists() and (vbox.project / "two.txt").exists()
    assert (vbox.project / "README").read_text() in ("first\n", "second\n")


def test_a_staged_run_killed_halfway_leaves_the_project_and_a_readable_stage(vbox: Box) -> None:
    _project(vbox)
    before = snapshot(vbox.project)
    process = subprocess.Popen(
        [*vbox.command_words(STAGE), "--", "/bin/sh", "-c", "rm -rf src; echo x > new.txt; sleep 30"],
        cwd=vbox.project, env=vbox.env, start_new_session=True,
    )  # fmt: skip
    time.sleep(2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    time.sleep(0.5)
    assert snapshot(vbox.project) == before
    review = stockade(vbox, "review", "--names")
    assert "removed   src/" in review.stdout and "new.txt" in review.stdout, review
    assert stockade(vbox, "accept").returncode == 0
    assert not (vbox.project / "src").exists() and (vbox.project / "new.txt").read_text() == "x\n"


def test_unmarked_changes_are_applied_at_once_where_the_policy_says(vbox: Box) -> None:
    _project(vbox)
    policy = '[checkpoints]\nstage = true\naccept = "unmarked"\n[filesystem]\nallow_write = ["."]\n'
    (vbox.project / ".stockade.toml").write_text(policy)
    assert stockade(vbox, "trust").returncode == 0
    run = vbox.run("echo edited > README && echo 'use flake' > .envrc && echo OK")
    assert run.stdout == "OK\n", run
    assert (vbox.project / "README").read_text() == "edited\n", "the control: ordinary work lands at once"
    assert not (vbox.project / ".envrc").exists(), "a file that runs code later waits"
    assert "held for review" in run.stderr and ".envrc" in run.stderr, run
    assert stockade(vbox, "accept", ".envrc").returncode == 0
    assert (vbox.project / ".envrc").exists()


def test_the_sandbox_cannot_reach_its_stage(vbox: Box) -> None:
    _project(vbox)
    assert vbox.run("echo staged-secret > README", options=STAGE).returncode == 0
    stages = vbox.home / ".local/state/stockade/checkpoints"
    kept = [path for path in stages.rglob("README") if "upper" in path.parts]
    assert kept and kept[0].read_text() == "staged-secret\n", "control: the stage is on the host"
    probe = vbox.run(f"cat {kept[0]} 2>&1; echo planted > {kept[0]} 2>&1; echo END", options=STAGE)
    assert "staged-secret" not in probe.stdout and "END" in probe.stdout, probe
    assert kept[0].read_text() == "staged-secret\n"


def test_stage_commands_exit_codes(vbox: Box) -> None:
    _project(vbox)
    assert stockade(vbox, "accept").returncode == 1
    assert stockade(vbox, "reject").returncode == 1
    nothing = stockade(vbox, "review")
    assert nothing.returncode == 0 and "nothing staged" in nothing.stdout
    assert vbox.run("echo x > README", options=STAGE).returncode == 0
    outside = stockade(vbox, "accept", "/etc/passwd")
    assert outside.returncode == 2 and "outside the project" in outside.stderr and "Traceback" not in outside.stderr, outside
    missing = stockade(vbox, "accept", "no-such-path")
    assert missing.returncode == 1 and "nothing staged at no-such-path" in missing.stdout, missing
    assert stockade(vbox, "review", "--stage", "99").returncode == 2
    assert (vbox.project / "README").read_text() == "readme\n"


@pytest.mark.parametrize("name", ["a b.txt", "ünï.txt", "-dash"])
def test_odd_names_go_through_the_stage(vbox: Box, name: str) -> None:
    _project(vbox)
    run = vbox.run(f"echo odd > ./'{name}'", options=STAGE)
    assert run.returncode == 0, run
    assert stockade(vbox, "accept").returncode == 0
    assert (vbox.project / name).read_text() == "odd\n"


def test_a_run_started_while_a_stage_waits_does_not_see_it_and_says_so(vbox: Box) -> None:
    _project(vbox)
    assert vbox.run("echo staged > README", options=STAGE).returncode == 0
    plain = vbox.run("cat README")
    assert plain.stdout == "readme\n", plain
    assert "wait for review in this project (stage 1)" in plain.stderr, plain
    quiet = vbox.run("cat README", options=["--quiet"])
    assert "wait for review" not in quiet.stderr, quiet


def test_accept_after_the_user_edited_other_files_then_undo_twice(vbox: Box) -> None:
    _project(vbox)
    assert vbox.run("echo staged > README && rm src/main.py", options=STAGE).returncode == 0
    time.sleep(0.02)
    (vbox.project / "src/run.sh").write_text("#!/bin/sh\necho mine\n")  # another file: no conflict
    before_accept = snapshot(vbox.project)
    accepted = stockade(vbox, "accept")
    assert accepted.returncode == 0, accepted
    after_accept = snapshot(vbox.project)
    assert (vbox.project / "README").read_text() == "staged\n" and not (vbox.project / "src/main.py").exists()
    assert (vbox.project / "src/run.sh").read_text() == "#!/bin/sh\necho mine\n"
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == before_accept
    again = stockade(vbox, "undo")
    assert again.returncode == 1 and "`stockade undo 2` makes run 1's changes again" in again.stdout, again
    redo = stockade(vbox, "undo", "2")
    assert redo.returncode == 0, redo
    assert snapshot(vbox.project) == after_accept, "undoing the undo makes the accept again"
