"""An agent session's /tmp and the host /tmp files a command names (bwrap/running/scratch.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stockade.bwrap.running import scratch


def test_a_session_gets_one_private_folder_kept_between_commands(tmp_path: Path) -> None:
    first = scratch.session_tmp(str(tmp_path), "sess-1")
    assert first is not None and os.stat(first).st_mode & 0o777 == 0o700
    Path(first, "left").write_text("x")
    assert scratch.session_tmp(str(tmp_path), "sess-1") == first and Path(first, "left").exists()
    assert scratch.session_tmp(str(tmp_path), "sess-2") != first
    assert scratch.session_tmp(str(tmp_path), None) is None and scratch.session_tmp(str(tmp_path), "../..") is None


def test_a_session_is_forgotten_a_day_after_its_last_command_whatever_its_folder_says(tmp_path: Path) -> None:
    old = scratch.session_tmp(str(tmp_path), "old")
    assert old is not None
    Path(old, "f").write_text("x")
    future = time.time() + 10 * scratch.KEEP_SECONDS
    os.utime(old, (future, future))  # the sandbox may set its /tmp's times (touch -d 2099 /tmp)
    then = time.time() - scratch.KEEP_SECONDS - 60
    os.utime(old + scratch.LAST_USE, (then, then))
    scratch.session_tmp(str(tmp_path), "new")
    assert not os.path.exists(old) and not os.path.exists(old + scratch.LAST_USE)


@pytest.mark.parametrize(("place", "applies"), [("/home/u/p", True), ("/tmp/p", False), ("/tmp", False), ("/tmpx/p", True)])
def test_no_folder_over_tmp_where_the_project_lies_under_it(place: str, applies: bool) -> None:
    assert scratch.applies(place, place, []) is applies
    assert scratch.applies("/home/u/p", "/home/u/p", [place]) is applies


def test_a_plan_that_hides_something_under_tmp_gets_no_copies_there() -> None:
    assert scratch.hides_under_tmp({"hidden": [["/tmp/p/.env", "deny_read"]]})
    assert not scratch.hides_under_tmp({"hidden": [["/home/u/.ssh", "deny_read"]]}) and not scratch.hides_under_tmp({})


@pytest.fixture
def host_tmp() -> Iterator[Path]:
    folder = Path("/tmp") / f"stockade-scratch-test-{os.getpid()}"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    yield folder
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o700)
            path.rmdir()
        else:
            path.unlink()
    folder.rmdir()


def test_named_files_only_the_users_files_every_user_may_read_and_through_no_link(host_tmp: Path) -> None:
    shared, private, link = host_tmp / "script.py", host_tmp / "krb5cc", host_tmp / "link.py"
    shared.write_text("print(1)")
    shared.chmod(0o644)
    private.write_text("ticket")
    private.chmod(0o600)
    link.symlink_to(shared)
    closed = host_tmp / "closed"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)
    (closed / "tok").write_text("T")
    (closed / "tok").chmod(0o644)
    hop = host_tmp / "hop"
    hop.symlink_to(host_tmp)
    command = [
        "/bin/sh",
        "-c",
        f"python3 {shared}; cat {private}|wc; cat {link} {closed}/tok {hop}/script.py; ls /tmpother/x --out={shared} /var{shared} {host_tmp}",
    ]
    found, refused = scratch.named_files(command)
    assert found == [(str(shared), b"print(1)")]
    assert refused == [str(private), str(link), f"{closed}/tok", f"{hop}/script.py"]
    assert scratch.named_files([f"{host_tmp}/absent"]) == ([], [])


def test_a_mount_point_is_removed_through_no_link(tmp_path: Path) -> None:
    folder = scratch.session_tmp(str(tmp_path / "state"), "s")
    assert folder is not None
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "__init__.py").write_text("")
    os.symlink(str(victim), os.path.join(folder, "sub"))
    scratch.remove_mount_point(folder, "/tmp/sub/__init__.py")
    assert (victim / "__init__.py").exists()  # the link was not followed
    Path(folder, "made.py").write_text("")
    scratch.remove_mount_point(folder, "/tmp/made.py")
    assert not Path(folder, "made.py").exists()


def test_a_link_an_earlier_command_left_in_the_session_folder_is_not_mounted_through(tmp_path: Path) -> None:
    folder = scratch.session_tmp(str(tmp_path), "s")
    assert folder is not None
    os.symlink(str(tmp_path), os.path.join(folder, "out"))
    os.symlink("/etc/passwd", os.path.join(folder, "file.py"))
    assert scratch.inside_folder(folder, "/tmp/fine.py") and scratch.inside_folder(folder, "/tmp/new/fine.py")
    assert not scratch.inside_folder(folder, "/tmp/out/x.py") and not scratch.inside_folder(folder, "/tmp/file.py")
