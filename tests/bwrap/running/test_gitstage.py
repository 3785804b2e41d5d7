"""A git dir's stage: made before a run, carried back after it (bwrap/running/gitstage.py).

These drive the stage without bwrap: the test writes into the stage what git
inside would have written. tests/e2e/test_git_config_writes.py runs real git
in real sandboxes.
"""

from __future__ import annotations

import os
import random
import stat
import subprocess
from pathlib import Path

import pytest

from stockade.bwrap.running import gitstage
from stockade.profiles import gitconfig

GIT = ["git", "-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=project, check=True)
    subprocess.run([*GIT, "commit", "-q", "--allow-empty", "-m", "one"], cwd=project, check=True)
    return project / ".git"


ALIAS = "/run/stockade-git/0"


def _stage(tmp_path: Path, git_dir: Path) -> gitstage.Stage:
    stages = gitstage.prepare(str(tmp_path / "state"), "s1", [(str(git_dir), ALIAS)], str(git_dir.parent))
    assert len(stages) == 1
    return stages[0]


def _staged(stage: gitstage.Stage, name: str) -> Path:
    return Path(stage.staged) / name


def _replace_text(path: Path, text: str) -> None:
    """As git writes: a new file renamed over the old one."""
    temp = path.with_name(path.name + ".lock")
    temp.write_text(text)
    os.replace(temp, path)


def test_config_and_head_are_copied_and_the_rest_linked_to_the_alias(tmp_path: Path, repo: Path) -> None:
    (repo / "rebase-merge").mkdir()
    (repo / "rebase-merge" / "head-name").write_text("refs/heads/main\n")
    stage = _stage(tmp_path, repo)
    for name in ("config", "HEAD", "index"):
        assert _staged(stage, name).read_bytes() == (repo / name).read_bytes()
        assert not _staged(stage, name).is_symlink()
    assert (_staged(stage, "rebase-merge") / "head-name").read_text() == "refs/heads/main\n"
    for name in ("hooks", "description", "logs", "packed-refs"):
        assert os.readlink(_staged(stage, name)) == f"{ALIAS}/{name}"
    assert sorted(stage.bound) == ["objects", "refs"]  # bound: `git clone .` walks objects/ without following a link
    assert [type(piece).__name__ for piece in stage.pieces()] == ["BindFrom", "BindFrom", "Bind", "Bind"]


def test_inert_config_changes_are_carried_back_and_others_named(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    config = _staged(stage, "config")
    _replace_text(
        config,
        config.read_text()
        + '[remote "o2"]\n\turl = https://example.invalid/up.git\n[user]\n\tname = Agent\n[core]\n\tfsmonitor = touch /tmp/pwned\n[alias]\n\tx = !sh\n[include]\n\tpath = /tmp/x\n',
    )
    lines, judged = gitstage.carry_back(stage, "s1")
    entries = gitconfig.read(str(repo / "config"))
    assert entries is not None
    assert ("remote.o2.url", "https://example.invalid/up.git") in entries and ("user.name", "Agent") in entries
    assert not [key for key, _value in entries if key in ("core.fsmonitor", "alias.x", "include.path")]
    assert ("core.repositoryformatversion", "0") in entries  # what was there stays
    assert len(lines) == 1 and all(f"{key} (it can make git run a program" in lines[0] for key in ("core.fsmonitor", "alias.x", "include.path"))
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
    _replace_text(_staged(stage, "ORIG_HEAD"), "1" * 40 + "\n")  # git's lock renamed over the link: a file now
    _staged(stage, "MERGE_HEAD").unlink()  # git removes it by its link
    (_staged(stage, "rebase-merge")).mkdir()
    (_staged(stage, "rebase-merge") / "head-name").write_text("refs/heads/main\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert lines == []
    assert (repo / "HEAD").read_text() == "ref: refs/heads/other\n"
    assert (repo / "ORIG_HEAD").read_text() == "1" * 40 + "\n"
    assert not (repo / "MERGE_HEAD").exists()
    assert (repo / "rebase-merge" / "head-name").read_text() == "refs/heads/main\n"


def test_a_link_made_inside_is_not_carried(tmp_path: Path, repo: Path) -> None:
    """A link at FETCH_HEAD or COMMIT_EDITMSG would make the host's git write where it points."""
    stage = _stage(tmp_path, repo)
    _staged(stage, "description").unlink()
    _staged(stage, "description").symlink_to(os.path.expanduser("~/.bashrc"))
    _staged(stage, "FETCH_HEAD").symlink_to(os.path.expanduser("~/.bashrc"))
    (_staged(stage, "rebase-merge")).mkdir()
    (_staged(stage, "rebase-merge") / "done").symlink_to("/etc/passwd")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert not (repo / "description").is_symlink() and not (repo / "FETCH_HEAD").exists()
    assert not (repo / "rebase-merge").exists()
    assert len(lines) == 3 and all("not kept" in line for line in lines)


def test_a_folder_removed_or_replaced_inside_stays(tmp_path: Path, repo: Path) -> None:
    """`rm -f .git/*` inside removes only the stage's links: the host's objects stay."""
    stage = _stage(tmp_path, repo)
    _staged(stage, "logs").unlink()
    _staged(stage, "info").unlink()
    _staged(stage, "info").mkdir()
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert (repo / "logs" / "HEAD").is_file() and (repo / "info" / "exclude").is_file()
    assert len(lines) == 2


@pytest.mark.parametrize(
    ("name", "text", "kept"),
    [
        ("git-rebase-todo", "pick 0123456 one\nexec touch /tmp/x\n", False),
        ("git-rebase-todo", "pick 0123456 one\nx touch /tmp/x\n", False),
        ("git-rebase-todo", "pick 0123456 one\nbreak\n", True),
        ("strategy", "evil\n", False),
        ("strategy", "ort\n", True),
    ],
)
def test_a_state_folder_with_a_command_is_not_carried(tmp_path: Path, repo: Path, name: str, text: str, kept: bool) -> None:
    stage = _stage(tmp_path, repo)
    (_staged(stage, "rebase-merge")).mkdir()
    (_staged(stage, "rebase-merge") / name).write_text(text)
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert (repo / "rebase-merge").exists() == kept, lines
    if not kept:
        assert "not kept" in lines[0] and os.path.isdir(stage.folder + gitstage.KEPT_SUFFIX)


def test_a_deeply_nested_folder_is_set_aside_not_a_crash(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    deep = _staged(stage, "rebase-merge")
    deep.mkdir()
    current = os.open(deep, os.O_RDONLY)
    for _ in range(gitstage.MAX_COPY_DEPTH + 8):
        os.mkdir("a", dir_fd=current)
        inner = os.open("a", os.O_RDONLY, dir_fd=current)
        os.close(current)
        current = inner
    os.close(current)
    lines, _judged = gitstage.carry_back(stage, "s1")  # moved in one rename, not copied: no depth to mind
    assert lines == [] and (repo / "rebase-merge").is_dir()


def test_a_long_name_does_not_stop_the_rest(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    (_staged(stage, "a" * 250)).write_text("x")
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + "[user]\n\tname = Z\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert lines == [] and ("user.name", "Z") in (gitconfig.read(str(repo / "config")) or [])


@pytest.mark.parametrize(
    ("entry", "kept"),
    [
        ('[remote "x"]\n\turl = https://example.invalid/r.git', True),
        ('[remote "x"]\n\turl = git@example.invalid:r.git', True),
        ('[remote "x"]\n\turl = sub/up.git', False),  # a local path: a folder of the project can become a link later
        ('[remote "x"]\n\turl = /etc', False),
        ('[remote "x"]\n\turl = file:///root/secret', False),
        ('[remote "x"]\n\turl = ../../outside', False),
        ('[remote "x"]\n\turl = ~/secret', False),
        ('[remote "x"]\n\turl = "" -oProxyCommand=x', False),
        ("[core]\n\tworktree = /root", False),
        ("[core]\n\tworktree = ..", False),
        ('[branch "main"]\n\tremote = origin', False),  # no such remote on the host: a new one could point anywhere
        ('[branch "main"]\n\tremote = /root/private', False),
        ('[branch "main"]\n\tpushremote = ../other', False),
        ('[remote "origin"]\n\tmirror = true', False),
        ('[remote "origin"]\n\tpush = :refs/heads/main', False),
        ("[core]\n\tsharedRepository = 0777", False),
        ("[core]\n\tbare = true", False),
        ("[extensions]\n\tobjectFormat = sha256", False),
        ("[extensions]\n\tworktreeConfig = true", True),  # git sparse-checkout sets it; config.worktree is judged too
    ],
)
def test_an_entry_that_reaches_outside_the_project_is_left_out(tmp_path: Path, repo: Path, entry: str, kept: bool) -> None:
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + entry + "\n[user]\n\tname = Z\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    entries = gitconfig.read(str(repo / "config")) or []
    assert ("user.name", "Z") in entries
    assert (len(entries) == len(gitconfig.parse((repo / "config").read_text()))) and (bool(lines) != kept), (lines, entries)


def test_a_state_folder_git_removed_inside_is_removed(tmp_path: Path, repo: Path) -> None:
    (repo / "rebase-merge").mkdir()
    (repo / "rebase-merge" / "done").write_text("x\n")
    stage = _stage(tmp_path, repo)
    assert not _staged(stage, "rebase-merge").is_symlink()
    for child in _staged(stage, "rebase-merge").iterdir():
        child.unlink()
    _staged(stage, "rebase-merge").rmdir()
    gitstage.carry_back(stage, "s1")
    assert not (repo / "rebase-merge").exists()


@pytest.mark.parametrize("name", ["index", "HEAD", "ORIG_HEAD"])
def test_what_the_host_changed_during_the_run_stays(tmp_path: Path, repo: Path, name: str) -> None:
    """A host commit during the run (or while a killed run waited to be carried back) is not undone."""
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, name), "inside\n")
    (repo / name).write_text("outside\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert (repo / name).read_text() == "outside\n"
    assert "the outside one is kept" in lines[0]


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
    assert gitstage.prepare(str(tmp_path / "state"), "s1", [(str(repo), ALIAS)], str(repo.parent)) == []
    assert os.listdir(tmp_path / "state" / gitstage.FOLDER) == []


def test_sockets_and_fifos_are_linked_not_copied(tmp_path: Path, repo: Path) -> None:
    os.mkfifo(repo / "fsmonitor--daemon.ipc")
    stage = _stage(tmp_path, repo)
    assert os.readlink(_staged(stage, "fsmonitor--daemon.ipc")) == f"{ALIAS}/fsmonitor--daemon.ipc"


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


def test_the_plan_knows_what_a_stage_copies() -> None:
    from stockade.bwrap.plan.mounts import STAGED_COPIES

    assert set(STAGED_COPIES) == {*gitstage.CONFIGS, gitstage.HEAD, gitstage.INDEX, *gitstage.STATE_FOLDERS}


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


def test_a_tree_deeper_than_python_recurses_is_removed(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    top.mkdir()
    current = os.open(top, os.O_RDONLY)
    for _ in range(1100):
        os.mkdir("a", dir_fd=current)
        inner = os.open("a", os.O_RDONLY, dir_fd=current)
        os.close(current)
        current = inner
    os.close(current)
    gitstage._remove_tree(str(top))
    assert not top.exists()


def test_config_worktree_is_judged_like_the_config(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    _staged(stage, "config.worktree").write_text("[core]\n\tsparseCheckout = true\n\tfsmonitor = touch /tmp/x\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert gitconfig.read(str(repo / "config.worktree")) == [("core.sparsecheckout", "true")]
    assert "core.fsmonitor" in lines[0]


def test_an_existing_remotes_url_is_kept_and_a_new_remotes_is_carried(tmp_path: Path, repo: Path) -> None:
    subprocess.run(["git", "remote", "add", "origin", "https://example.invalid/mine.git"], cwd=repo.parent, check=True)
    stage = _stage(tmp_path, repo)
    text = _staged(stage, "config").read_text().replace("mine.git", "attacker.git")
    _replace_text(_staged(stage, "config"), text + '[remote "fork"]\n\turl = https://example.invalid/fork.git\n')
    lines, _judged = gitstage.carry_back(stage, "s1")
    entries = gitconfig.read(str(repo / "config")) or []
    assert ("remote.origin.url", "https://example.invalid/mine.git") in entries  # the host's value stays
    assert ("remote.origin.url", "https://example.invalid/attacker.git") not in entries
    assert ("remote.fork.url", "https://example.invalid/fork.git") in entries
    assert "remote.origin.url" in lines[0]


def test_a_carried_config_is_never_writable_by_others(tmp_path: Path, repo: Path) -> None:
    stage = _stage(tmp_path, repo)
    _replace_text(_staged(stage, "config"), _staged(stage, "config").read_text() + "[user]\n\tname = Z\n")
    os.chmod(_staged(stage, "config"), 0o666)
    gitstage.carry_back(stage, "s1")
    assert stat.S_IMODE(os.lstat(repo / "config").st_mode) & 0o022 == 0


def test_the_real_git_dir_is_judged_after_the_run(tmp_path: Path, repo: Path) -> None:
    """Through its alias the sandbox writes the real git dir as it could before the stage: a state
    folder with commands and a link there are moved aside."""
    (repo / "sequencer").mkdir()
    (repo / "sequencer" / "todo").write_text("exec make test\n")  # the user's own, from before the run: stays
    stage = _stage(tmp_path, repo)
    (repo / "rebase-apply").mkdir()
    (repo / "rebase-apply" / "git-rebase-todo").write_text("exec touch /tmp/x\n")
    (repo / "logs" / "refs" / "heads" / "evil").symlink_to(os.path.expanduser("~/.bashrc"))
    os.symlink("/etc/passwd", repo / "packed-refs.tmp")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert not (repo / "rebase-apply").exists() and (repo / "sequencer" / "todo").exists()
    assert not os.path.lexists(repo / "logs" / "refs" / "heads" / "evil") and not os.path.lexists(repo / "packed-refs.tmp")
    assert len(lines) == 3 and all("renamed to" in line for line in lines), lines


def test_the_plan_knows_what_a_stage_binds() -> None:
    from stockade.bwrap.plan.mounts import STAGE_BOUND

    assert set(STAGE_BOUND) == set(gitstage.BOUND)


def test_a_branch_may_track_a_remote_the_host_had(tmp_path: Path, repo: Path) -> None:
    subprocess.run(["git", "remote", "add", "origin", "https://example.invalid/mine.git"], cwd=repo.parent, check=True)
    stage = _stage(tmp_path, repo)
    text = _staged(stage, "config").read_text()
    _replace_text(
        _staged(stage, "config"), text + '[branch "main"]\n\tremote = origin\n\tmerge = refs/heads/main\n[branch "x"]\n\tpushRemote = fork\n'
    )
    lines, _judged = gitstage.carry_back(stage, "s1")
    entries = gitconfig.read(str(repo / "config")) or []
    assert ("branch.main.remote", "origin") in entries and ("branch.x.pushremote", "fork") not in entries
    assert "branch.x.pushremote" in lines[0]


def test_legacy_remotes_alternates_and_object_links_made_by_the_run_are_moved_aside(tmp_path: Path, repo: Path) -> None:
    (repo / "branches").mkdir(exist_ok=True)
    (repo / "branches" / "mine").write_text("https://example.invalid/mine.git\n")  # the user's own: stays
    stage = _stage(tmp_path, repo)
    (repo / "remotes").mkdir()
    (repo / "remotes" / "evil").write_text("URL: /root/private\nPush: refs/heads/main:refs/heads/x\n")
    (repo / "objects" / "info" / "alternates").write_text("/root/private/.git/objects\n")
    fan_out = next(f"{n:02x}" for n in range(256) if not (repo / "objects" / f"{n:02x}").exists())  # one git's objects left free
    os.symlink(str(tmp_path), repo / "objects" / fan_out)
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert not (repo / "remotes" / "evil").exists() and not (repo / "objects" / "info" / "alternates").exists()
    assert not os.path.lexists(repo / "objects" / fan_out) and (repo / "branches" / "mine").exists()
    assert len(lines) == 3, lines


def test_a_nested_submodules_rebase_with_exec_is_moved_aside(tmp_path: Path, repo: Path) -> None:
    nested = repo / "modules" / "a" / "b"
    subprocess.run(["git", "init", "-q", "--bare", str(nested)], check=True)
    stage = _stage(tmp_path, repo)
    (nested / "rebase-merge").mkdir()
    (nested / "rebase-merge" / "git-rebase-todo").write_text("exec touch /tmp/x\\n")
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert not (nested / "rebase-merge").exists() and "renamed to" in lines[0]


def test_a_new_remote_whose_url_is_refused_is_left_out_whole(tmp_path: Path, repo: Path) -> None:
    """A newcomer's finding: the URL dropped and the fetch refspec kept made a broken remote."""
    stage = _stage(tmp_path, repo)
    text = _staged(stage, "config").read_text() + '[remote "loc"]\n\turl = /etc\n\tfetch = +refs/heads/*:refs/remotes/loc/*\n'
    _replace_text(_staged(stage, "config"), text)
    lines, _judged = gitstage.carry_back(stage, "s1")
    assert not [key for key, _value in gitconfig.read(str(repo / "config")) or [] if key.startswith("remote.loc.")]
    assert "remote.loc.url (a local path" in lines[0]
