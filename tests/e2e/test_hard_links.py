"""A write inside the project never reaches another place through a hard link (uv, pnpm stores).

The layout is uv's: a store outside the project and two projects' venvs, each
installed file a hard link to the store's. The attack rewrites the module in
place inside one project; the other project and the store must keep theirs.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.boxes import Box

MODULE = ".venv/lib/python3/site-packages/pkg/__init__.py"
GOOD = "VALUE = 'good'\n"


def _uv_layout(box: Box) -> tuple[Path, Path, Path]:
    store = box.outside / "uv-cache" / "pkg" / "__init__.py"
    store.parent.mkdir(parents=True)
    store.write_text(GOOD)
    other = box.outside / "other-project" / MODULE
    mine = box.project / MODULE
    for path in (other, mine):
        path.parent.mkdir(parents=True)
        os.link(store, path)
    return store, other, mine


def test_a_write_in_place_changes_only_the_project_s_own_copy(vbox: Box) -> None:
    store, other, mine = _uv_layout(vbox)
    assert os.stat(mine).st_nlink == 3
    attack = vbox.run(f"printf 'import os; os.system(\"id\")\\n' > {MODULE} && echo WROTE")
    assert "WROTE" in attack.stdout, attack
    assert store.read_text() == GOOD and other.read_text() == GOOD
    assert "import os" in mine.read_text()  # the project's own file took the write
    assert os.stat(store).st_nlink == 2 and os.stat(mine).st_nlink == 1
    assert "made 1 file of the project its own: it was a hard link shared with other places" in attack.stderr, attack


def test_the_copy_keeps_mode_and_times_and_a_second_run_copies_nothing(vbox: Box) -> None:
    _store, _other, mine = _uv_layout(vbox)
    os.chmod(mine, 0o640)
    os.utime(mine, (1_000_000_000, 1_000_000_000))
    first = vbox.run(f"cat {MODULE}")
    assert first.stdout == GOOD, first
    info = os.stat(mine)
    assert (info.st_nlink, oct(info.st_mode & 0o777), int(info.st_mtime)) == (1, "0o640", 1_000_000_000)
    again = vbox.run("true")
    assert "hard links" not in again.stderr, again


def test_a_kept_plan_is_not_used_once_the_project_gains_hard_links(vbox: Box) -> None:
    for _ in range(2):
        assert vbox.run("true").returncode == 0  # a stored plan, then its use
    store, other, mine = _uv_layout(vbox)  # `uv sync` on the host, after the plan was stored
    vbox.run(f"echo changed > {MODULE}")
    assert store.read_text() == GOOD and other.read_text() == GOOD


def test_git_objects_shared_by_a_local_clone_are_made_the_clones_own(vbox: Box) -> None:
    """A review's finding: a sandbox rewrote a shared object in place, and the source repository's
    next checkout ran it. The clone's objects are its own after the first run."""
    import subprocess

    source = vbox.outside / "source"
    env = {**vbox.env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.test", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.test"}
    subprocess.run(["git", "init", "-q", str(source)], check=True, env=env)
    (source / "f").write_text("x\n")
    subprocess.run(["git", "-C", str(source), "add", "f"], check=True, env=env)
    subprocess.run(["git", "-C", str(source), "commit", "-qm", "x"], check=True, env=env)
    subprocess.run(["git", "clone", "-q", str(source), str(vbox.project / "clone")], check=True, env=env)
    objects = [p for p in (vbox.project / "clone" / ".git" / "objects").rglob("*") if p.is_file()]
    assert objects and all(os.stat(p).st_nlink == 2 for p in objects)
    result = vbox.run("git -C clone log --oneline | wc -l")
    assert result.stdout.strip() == "1" and "hard links" in result.stderr, result
    assert all(os.stat(p).st_nlink == 1 for p in objects)
    assert subprocess.run(["git", "-C", str(source), "fsck", "--no-progress"], env=env).returncode == 0


def test_a_sparse_file_linked_many_times_inside_costs_the_next_run_nothing(vbox: Box) -> None:
    """Issue 33: five links of a 100 MiB sparse file made the next run write 400 MB on the host."""
    made = vbox.run("truncate -s 100M big && for n in 1 2 3 4; do ln big big$n; done && echo MADE")
    assert "MADE" in made.stdout, made
    before = sum(os.lstat(path).st_blocks for path in vbox.project.iterdir())
    second = vbox.run("true")
    assert second.returncode == 0 and "made" not in second.stderr, second
    assert os.lstat(vbox.project / "big").st_nlink == 5
    assert sum(os.lstat(path).st_blocks for path in vbox.project.iterdir()) == before
