"""A machine shared with other users: what the sandbox cannot reach never breaks a run."""

from __future__ import annotations

import os
import socket

import pytest

from tests.e2e.boxes import Box

NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_another_users_private_socket_does_not_break_a_unix_socket_policy(vbox: Box) -> None:
    """As root, a listening socket in another user's 0700 folder (their stockade daemon's, say)
    is out of the sandbox's reach: it needs no mask, and bwrap cannot make one there."""
    private = vbox.outside / "other-user"
    private.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(private / "daemon.sock"))
        listener.listen()
        os.chown(private, NOBODY, NOBODY)
        os.chmod(private, 0o700)
        policy = f'extends = ["default"]\n[network]\nunix_sockets = ["{vbox.project}/mine.sock"]\n'
        run = vbox.run("echo ran", policy=policy)
        assert run.returncode == 0 and "ran" in run.stdout, run
        reach = vbox.run(f"ls {private}/ 2>&1; echo done", policy=policy)
        assert "daemon.sock" not in reach.stdout, reach  # closed to the sandbox all the same
    finally:
        listener.close()
        os.chown(private, 0, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_project_of_another_user_as_root_runs_or_says_why(vbox: Box) -> None:
    """A root container on a checkout owned by uid 1000: readable works, closed is exit 125 in one line."""
    (vbox.project / "a.txt").write_text("a\n")
    os.chown(vbox.project, NOBODY, NOBODY)
    try:
        os.chmod(vbox.project, 0o755)
        readable = vbox.run("cat a.txt")
        assert readable.returncode == 0 and readable.stdout == "a\n", readable
        assert "belongs to uid 65534" in readable.stderr and "Traceback" not in readable.stderr, readable
        os.chmod(vbox.project, 0o700)
        closed = vbox.run("cat a.txt")
        assert closed.returncode == 125, closed
        assert closed.stderr.count("\n") == 1 and "run stockade as its owner" in closed.stderr, closed
    finally:
        os.chown(vbox.project, 0, 0)
        os.chmod(vbox.project, 0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_a_shared_folder_holding_another_users_private_repository(vbox: Box) -> None:
    """A working directory like /tmp: other users' private folders (a repository among them) inside."""
    theirs = vbox.project / "theirs"
    (theirs / ".git" / "hooks").mkdir(parents=True)
    os.chown(theirs, NOBODY, NOBODY)
    os.chmod(theirs, 0o700)
    try:
        run = vbox.run("echo ran > mine.txt && cat mine.txt")
        assert run.returncode == 0 and run.stdout == "ran\n", run
    finally:
        os.chown(theirs, 0, 0)
