"""A git dir's stage: made before a run, carried back after it (bwrap/gitstage.py).

These drive the stage without bwrap: the test writes into the stage what git
inside would have written. tests/e2e/test_git_config_writes.py runs real git
in real sandboxes.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from stockade.bwrap import gitstage
from stockade.profiles import gitconfig

GIT = ["git", "-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=project, check=True)
    subprocess.run([*GIT, "commit", "-q", "--allow-empty", "-m", "one"], cwd=project, check=True)
    return project / ".git"


def _stage(tmp_path: Path, git_dir: Path) -> gitstage.Stage:
    stages = gitstage.prepare(str(tmp_path / "state"), "s1", [str(git_dir)])
    assert len(stages) == 1
    return stages[0]


def _staged(stage: gitstage.Stage, name: str) -> Path:
    return Path(stage.staged) / name


def _replace_text(path: Path, text: str) -> None:
    """As git writes: a new file renamed over the old one."""
    temp = path.with_name(path.name + ".lock")
    temp.write_text(text)
    os.replace(temp, path)


def test_files_are_copied_and_folders_bound(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    assert {"objects", "refs", "hooks", "info"} <= set(stage.bound)
    assert {"HEAD", "config"} <= set(stage.copied)
    assert _staged(stage, "config").read_bytes() == (repo / "config").read_bytes()
    assert not os.path.samefile(_staged(stage, "config"), repo / "config")
    assert [type(piece).__name__ for piece in stage.pieces()][0] == "BindFrom"


def test_inert_config_changes_are_carried_back_and_others_named(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    config = _staged(stage, "config")
    _replace_text(
        config,
        config.read_text()
        + '[remote "o2"]\n\turl = ../up\n[user]\n\tname = Agent\n[core]\n\tfsmonitor = touch /tmp/pwned\n[alias]\n\tx = !sh\n[include]\n\tpath = /tmp/x\n',
    )
    lines, judged = gitstage.carry_back(stage, "s1")
    entries = gitconfig.read(str(repo / "config"))
    assert entries is not None
    assert ("remote.o2.url", "../up") in entries and ("user.name", "Agent") in entries
    assert not [key for key, _value in entries if key in ("core.fsmonitor", "alias.x", "include.path")]
    assert ("core.repositoryformatversion", "0") in entries  # what was there stays
    assert len(lines) == 1 and "core.fsmonitor, alias.x, include.path" in lines[0]
    assert judged == [str(repo / "config")]
    assert not os.path.exists(stage.folder)


def test_a_key_that_was_there_before_stays_even_if_it_runs_a_program(tmp_path: Path, repo: Path) -> None:
    subprocess.run(["git", "config", "core.editor", "vim"], cwd=repo.parent, check=True)
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + "[user]\n\temail = a@b.invalid\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert lines == []
    entries = gitconfig.read(str(repo / "config")) or []
    assert ("core.editor", "vim") in entries and ("user.email", "a@b.invalid") in entries


def test_a_config_the_host_changed_during_the_run_is_kept(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + "[user]\n\tname = Inside\n")
    subprocess.run(["git", "config", "user.name", "Outside"], cwd=repo.parent, check=True)
    lines, judged = gitstage.carry_back(stage, "s1")
    assert ("user.name", "Outside") in (gitconfig.read(str(repo / "config")) or [])
    assert judged == [] and "outside one is kept" in lines[0]


def test_a_config_that_is_no_longer_a_file_is_not_carried(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    before = (repo / "config").read_bytes()
    _staged(stage, "config").unlink()
    _staged(stage, "config").symlink_to("/etc/shadow")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert (repo / "config").read_bytes() == before and not (repo / "config").is_symlink()
    assert "not kept" in lines[0]


def test_other_files_and_state_folders_are_carried_as_git_left_them(tmp_path: Path, repo: Path) -> None:
    (repo / "MERGE_HEAD").write_text("0" * 40 + "\n")
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "HEAD"), "ref: refs/heads/other\n")
    _staged(stage, "MERGE_HEAD").unlink()
    (_staged(stage, "rebase-merge")).mkdir()
    (_staged(stage, "rebase-merge") / "head-name").write_text("refs/heads/main\n")
    _staged(stage, "description").unlink()
    _staged(stage, "description").symlink_to(os.path.expanduser("~/.ssh/id_rsa"))  # a link, carried as a link
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert lines == []
    assert (repo / "HEAD").read_text() == "ref: refs/heads/other\n"
    assert not (repo / "MERGE_HEAD").exists()
    assert (repo / "rebase-merge" / "head-name").read_text() == "refs/heads/main\n"
    assert os.readlink(repo / "description") == os.path.expanduser("~/.ssh/id_rsa")


def test_a_state_folder_git_removed_inside_is_removed(tmp_path: Path, repo: Path) -> None:
    (repo / "rebase-merge").mkdir()
    (repo / "rebase-merge" / "done").write_text("x\n")
    stage = _stage(tmp_path, repo)
    assert "rebase-merge" in stage.copied
    for child in _staged(stage, "rebase-merge").iterdir():
        child.unlink()
    _staged(stage, "rebase-merge").rmdir()
    gitstage.carry_back(stage, "s1")
    assert not (repo / "rebase-merge").exists()


def test_the_newer_of_two_changed_files_stays(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "ORIG_HEAD"), "inside\n")
    os.utime(_staged(stage, "ORIG_HEAD"), (1, 1))
    (repo / "ORIG_HEAD").write_text("outside\n")
    gitstage.carry_back(stage, "s1")
    assert (repo / "ORIG_HEAD").read_text() == "outside\n"


def test_commondir_changed_inside_is_never_carried(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    _staged(stage, "commondir").write_text("/elsewhere\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert not (repo / "commondir").exists()
    assert "commondir" in lines[0] and "not kept" in lines[0]


def test_a_replaced_git_dir_gets_nothing_and_the_stage_is_kept(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "HEAD"), "ref: refs/heads/x\n")
    os.rename(repo, repo.with_name("moved"))
    repo.mkdir()
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert os.listdir(repo) == []
    assert "were not carried back" in lines[0]
    kept = stage.folder + gitstage.KEPT_SUFFIX
    assert (Path(kept) / "git" / "HEAD").read_text() == "ref: refs/heads/x\n"
    assert gitstage.finish_abandoned(str(tmp_path / "state"), "s2") == []  # set aside: not tried again


def test_a_killed_runs_stage_is_carried_back_by_the_next_run(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + "[user]\n\tname = Killed\n")
    state = str(tmp_path / "state")
    assert gitstage.finish_abandoned(state, "s2") == []  # its run still holds the lock
    os.close(stage.lock_fd)  # the run dies
    lines = gitstage.finish_abandoned(state, "s2")
    assert ("user.name", "Killed") in (gitconfig.read(str(repo / "config")) or [])
    assert len(lines) == 1 and "killed" in lines[0]  # nothing left out: the one line
    assert os.listdir(os.path.join(state, gitstage.FOLDER)) == []


def test_a_git_dir_over_the_copy_budget_is_not_staged(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitstage, "MAX_COPY_BYTES", 10)
    assert gitstage.prepare(str(tmp_path / "state"), "s1", [str(repo)]) == []
    assert os.listdir(tmp_path / "state" / gitstage.FOLDER) == []


def test_sockets_and_fifos_are_bound_not_copied(tmp_path: Path, repo: Path) -> None:
    os.mkfifo(repo / "fsmonitor--daemon.ipc")
    stage = _stage(tmp_path, repo)
    assert "fsmonitor--daemon.ipc" in stage.bound


ALPHABET = ["a", "B", " ", "#", ";", '"', "\\", "\n", "\t", "=", "é", "x"]


@pytest.mark.parametrize("seed", range(50))
def test_render_reads_back_to_the_same_entries(seed: int) -> None:
    rng = random.Random(seed)
    entries = []
    for _ in range(rng.randint(1, 8)):
        section = rng.choice(["core", "user", "remote", "branch", "x-y"])
        sub = "".join(rng.choice(ALPHABET[:7] + [".", "x"]) for _ in range(rng.randint(0, 4))).replace("\n", "")
        name = rng.choice(["url", "name", "a-b", "k9"])
        value = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6)))
        entries.append((f"{section}.{sub}.{name}" if sub else f"{section}.{name}", value))
    assert gitconfig.parse(gitstage.render(entries)) == entries


def test_the_plan_leaves_the_stage_its_config() -> None:
    from stockade.bwrap.backend import STAGED_HERE

    assert STAGED_HERE == {gitstage.CONFIG}


def test_added_keys_keep_the_host_text_and_a_refused_only_change_leaves_it_untouched(tmp_path: Path, repo: Path) -> None:
    (repo / "config").write_text((repo / "config").read_text() + "# the user's comment\n")
    before = (repo / "config").read_bytes()
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + "[core]\n\tpager = evil\n")
    gitstage.carry_back(stage, "s1")
    assert (repo / "config").read_bytes() == before
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + "[core]\n\tpager = evil\n[user]\n\tname = A\n")
    gitstage.carry_back(stage, "s1")
    assert (repo / "config").read_bytes() == before + b"[user]\n\tname = A\n"
