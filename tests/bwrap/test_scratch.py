"""An agent session's /tmp and the host /tmp files a command names (bwrap/scratch.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stockade.bwrap import scratch


def test_a_session_gets_one_private_folder_kept_between_commands(tmp_path: Path) -> None:
    first = scratch.session_tmp(str(tmp_path), "sess-1")
    assert first is not None and os.stat(first).st_mode & 0o777 == 0o700
    Path(first, "left").write_text("x")
    assert scratch.session_tmp(str(tmp_path), "sess-1") == first and Path(first, "left").exists()
    assert scratch.session_tmp(str(tmp_path), "sess-2") != first
    assert scratch.session_tmp(str(tmp_path), None) is None and scratch.session_tmp(str(tmp_path), "../..") is None


def test_a_session_folder_unused_for_a_day_is_removed_when_another_starts(tmp_path: Path) -> None:
    old = scratch.session_tmp(str(tmp_path), "old")
    assert old is not None
    Path(old, "f").write_text("x")
    then = time.time() - scratch.KEEP_SECONDS - 60
    os.utime(old, (then, then))
    scratch.session_tmp(str(tmp_path), "new")
    assert not os.path.exists(old)


@pytest.mark.parametrize(
    ("place", "applies"), [("/home/u/p", True), ("/tmp/p", False), ("/tmp", False), ("/tmpx/p", True)]
)
def test_no_folder_over_tmp_where_the_project_lies_under_it(place: str, applies: bool) -> None:
    assert scratch.applies(place, place, []) is applies
    assert scratch.applies("/home/u/p", "/home/u/p", [place]) is applies


def test_named_files_only_the_users_world_readable_regular_files(tmp_path: Path) -> None:
    folder = Path("/tmp") / f"stockade-scratch-test-{os.getpid()}"
    folder.mkdir()
    try:
        shared, private, link = folder / "script.py", folder / "krb5cc", folder / "link.py"
        shared.write_text("print(1)")
        shared.chmod(0o644)
        private.write_text("ticket")
        private.chmod(0o600)
        link.symlink_to(shared)
        command = ["/bin/sh", "-c", f"python3 {shared}; cat {private}|wc; cat {link}; ls /tmpother/x --out={shared} /var{shared}"]
        found, refused = scratch.named_files(command)
        assert found == [str(shared)]
        assert refused == [str(private), str(link)]
        assert scratch.named_files([f"{folder}/absent"]) == ([], [])
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def test_a_link_an_earlier_command_left_in_the_session_folder_is_not_mounted_through(tmp_path: Path) -> None:
    folder = scratch.session_tmp(str(tmp_path), "s")
    assert folder is not None
    os.symlink(str(tmp_path), os.path.join(folder, "out"))
    os.symlink("/etc/passwd", os.path.join(folder, "file.py"))
    assert scratch.inside_folder(folder, "/tmp/fine.py") and scratch.inside_folder(folder, "/tmp/new/fine.py")
    assert not scratch.inside_folder(folder, "/tmp/out/x.py") and not scratch.inside_folder(folder, "/tmp/file.py")
