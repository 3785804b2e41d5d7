"""The plan cache's pure parts: what the recorder notes, stamps, and what makes a plan stale."""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path

from stockade.bwrap.parts import folders
from stockade.bwrap.plan import plan_cache


def test_recorder_notes_every_way_planning_looks_at_paths(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    originals = (os.stat, os.lstat, os.scandir, builtins.open, io.open)
    recorder = plan_cache.Recorder().start()
    try:
        os.path.exists(tmp_path / "absent")
        os.path.isdir(tmp_path / "d")
        os.path.realpath(tmp_path / "f")
        Path(tmp_path / "f").read_text()
        with open(tmp_path / "f"):
            pass
        with os.scandir(tmp_path):
            pass
    finally:
        recorder.stop()
    assert (os.stat, os.lstat, os.scandir, builtins.open, io.open) == originals
    assert {str(tmp_path / "absent"), str(tmp_path / "d"), str(tmp_path / "f")} <= recorder.paths
    assert str(tmp_path) in recorder.listed and recorder.complete


def test_a_lookup_relative_to_a_directory_fd_makes_the_plan_uncacheable(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    recorder = plan_cache.Recorder().start()
    try:
        try:
            os.stat("x", dir_fd=fd)
        except FileNotFoundError:
            pass
    finally:
        recorder.stop()
        os.close(fd)
    assert not recorder.complete


def test_stamps_see_content_type_and_identity_changes(tmp_path: Path) -> None:
    target = tmp_path / "f"
    assert plan_cache.file_stamp(str(target)) is None
    target.write_text("one")
    first = plan_cache.file_stamp(str(target))
    target.write_text("two")  # same size, same second: ctime still moves
    assert plan_cache.file_stamp(str(target)) != first
    folder = tmp_path / "d"
    folder.mkdir()
    identity = plan_cache.file_stamp(str(folder))
    (folder / "new").write_text("")
    assert plan_cache.file_stamp(str(folder)) == identity  # a folder's own stamp ignores its entries
    listed = plan_cache.listing_stamp(str(folder))
    (folder / "newer").write_text("")
    assert plan_cache.listing_stamp(str(folder)) != listed  # a listed folder's does not
    folder.rename(tmp_path / "moved")
    folder.symlink_to(tmp_path / "moved")
    assert plan_cache.file_stamp(str(folder)) != identity


def test_folder_digest_tells_kinds_apart(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("")
    before = folders.listing(str(tmp_path))
    (tmp_path / "a").unlink()
    (tmp_path / "a").mkdir()
    after = folders.listing(str(tmp_path))
    assert before is not None and after is not None
    assert before[0] != after[0] and after[1] == ["a"] and before[1] == []
    (tmp_path / "a").rmdir()
    (tmp_path / "a").symlink_to(tmp_path)
    link = folders.listing(str(tmp_path))
    (tmp_path / "a").unlink()
    (tmp_path / "a@").write_text("")  # a file whose name ends like another kind's mark
    named = folders.listing(str(tmp_path))
    assert link is not None and named is not None
    assert len({before[0], after[0], link[0], named[0]}) == 4 and link[1] == []


def test_keys_are_the_same_in_every_process(tmp_path: Path) -> None:
    """marshal's bytes for equal values differ between processes; the key is hashed into a file name."""
    import subprocess
    import sys

    code = (
        "from stockade.bwrap.plan import plan_cache\n"
        "from stockade.cli.run_command import invocation_of\n"
        "from stockade.cli.run_options import parse_run_args\n"
        "args = parse_run_args(['--profile', 'offline', '--', 'true'])\n"
        "import sys; sys.stdout.buffer.write(plan_cache.run_key(invocation_of(args)))\n"
    )
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(sys.path)}
    keys = {subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, check=True).stdout for _ in range(3)}
    assert len(keys) == 1
