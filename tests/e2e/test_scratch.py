"""/tmp for agents, through real runs: a session's scratch persists, another's is not seen, and a
host /tmp file the command names is readable when every user may read it, never writable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.boxes import Box

SESSION = ["--agent-session"]


@pytest.fixture
def host_files() -> Iterator[tuple[Path, Path]]:
    folder = Path("/tmp") / f"stockade-e2e-scratch-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    shared, private = folder / "script.py", folder / "private.txt"
    shared.write_text("print('written by the agent')\n")
    shared.chmod(0o644)
    private.write_text("PRIVATE-CANARY\n")
    private.chmod(0o600)
    yield shared, private
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


def test_a_named_host_tmp_file_is_readable_not_writable_and_a_private_one_stays_hidden(vbox: Box, host_files: tuple[Path, Path]) -> None:
    shared, private = host_files
    result = vbox.run(f"python3 {shared}; echo more >> {shared}; echo write=$?; cat {private}; echo read=$?")
    assert "written by the agent" in result.stdout and "write=0" not in result.stdout and "read=1" in result.stdout, result
    assert "PRIVATE-CANARY" not in result.stdout and f"{private} is not shown inside" in result.stderr
    assert shared.read_text() == "print('written by the agent')\n"
    control = vbox.run(f"cat {shared}", policy='extends = ["default"]\n')  # the same file, named: shown under any policy
    assert control.stdout == "print('written by the agent')\n", control


def test_an_agent_sessions_tmp_persists_between_its_commands_and_no_other_sees_it(vbox: Box) -> None:
    first = vbox.run("echo kept > /tmp/left-by-first; ls /tmp", options=[*SESSION, "day-a"])
    assert first.returncode == 0 and "left-by-first" in first.stdout, first
    again = vbox.run("cat /tmp/left-by-first", options=[*SESSION, "day-a"])
    assert again.stdout == "kept\n", again
    other = vbox.run("cat /tmp/left-by-first", options=[*SESSION, "day-b"])
    assert other.returncode == 1 and other.stdout == "", other
    plain = vbox.run("cat /tmp/left-by-first")  # control: without a session, /tmp is fresh as before
    assert plain.returncode == 1, plain
