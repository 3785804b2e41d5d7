"""The terminal handed to the sandbox and taken back, and a question's hold on the sandbox's processes."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from stockade.bwrap import foreground


def test_no_terminal_when_stdin_is_not_one() -> None:
    read, write = os.pipe()
    try:
        assert foreground.Terminal.of_this_job(read) is None
    finally:
        os.close(read)
        os.close(write)


@pytest.fixture
def tree() -> subprocess.Popen[bytes]:
    """A shell with two children and a grandchild (three below it), all sleeping."""
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait"], start_new_session=True)
    deadline = time.monotonic() + 5
    while len(list(foreground.descendants(proc.pid))) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    os.killpg(proc.pid, 9)
    proc.wait()


def test_descendants_are_listed_parents_first(tree: subprocess.Popen[bytes]) -> None:
    found = list(foreground.descendants(tree.pid))
    assert len(found) == 3
    for pid in found:
        parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        assert parent == tree.pid or found.index(parent) < found.index(pid)


def test_stop_tree_stops_every_descendant_and_release_continues_them(tree: subprocess.Popen[bytes]) -> None:
    hold = foreground.Hold(None)
    hold.attach(tree.pid)
    read, write = os.pipe()
    try:
        assert hold.hold(read) is False  # no terminal here to read an answer from
        assert len(hold.stopped) == 3
        assert {foreground._state(pid) for pid in hold.stopped} == {"T"}
        assert foreground._state(tree.pid) != "T"  # the root (the sandbox's pid 1) goes on reaping
        stopped = list(hold.stopped)
        hold.release(read)
        time.sleep(0.05)
        assert {foreground._state(pid) for pid in stopped} == {"S"}
        assert hold.stopped == []
    finally:
        os.close(read)
        os.close(write)


def test_stop_tree_of_a_missing_root_is_empty() -> None:
    assert foreground.stop_tree(2**22 + 4321) == []
