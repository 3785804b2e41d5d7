"""A question's hold on a sandbox that writes to the terminal itself: every process stopped, and only those continued."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from stockade.bwrap.running import freeze


@pytest.fixture
def tree() -> subprocess.Popen[bytes]:
    """A shell with two children and a grandchild (three below it), all sleeping."""
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait"], start_new_session=True)
    deadline = time.monotonic() + 5
    while len(list(freeze.descendants(proc.pid))) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    os.killpg(proc.pid, 9)
    proc.wait()


def test_descendants_are_listed_parents_first(tree: subprocess.Popen[bytes]) -> None:
    found = list(freeze.descendants(tree.pid))
    assert len(found) == 3
    for pid in found:
        parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        assert parent == tree.pid or found.index(parent) < found.index(pid)


def test_stop_tree_stops_every_descendant_and_release_continues_them(tree: subprocess.Popen[bytes]) -> None:
    hold = freeze.Freeze()
    hold.attach(tree.pid)
    read, write = os.pipe()
    try:
        assert hold.hold(read) is False  # no terminal here to read an answer from
        assert len(hold.stopped) == 3
        assert {freeze._state(pid) for pid in hold.stopped} == {"T"}
        assert freeze._state(tree.pid) != "T"  # the root (the sandbox's pid 1) goes on reaping
        stopped = list(hold.stopped)  # pids
        hold.release(read)
        time.sleep(0.05)
        assert {freeze._state(pid) for pid in stopped} == {"S"}
        assert hold.stopped == {}
    finally:
        os.close(read)
        os.close(write)


def test_stop_tree_of_a_missing_root_is_empty() -> None:
    assert freeze.stop_tree(2**22 + 4321) == {}


def test_a_process_stopped_before_the_question_stays_stopped(tree: subprocess.Popen[bytes]) -> None:
    first = next(iter(freeze.descendants(tree.pid)))
    os.kill(first, 19)  # SIGSTOP: a stopped job of a shell inside
    time.sleep(0.05)
    hold = freeze.Freeze()
    hold.attach(tree.pid)
    hold.hold(-1)
    assert first not in hold.stopped and len(hold.stopped) == 2
    hold.release(-1)
    time.sleep(0.05)
    assert freeze._state(first) == "T"


def test_processes_that_continue_each_other_are_all_stopped() -> None:
    """Each of four loops sends SIGCONT to its whole group over and over: one pass cannot hold them."""
    script = "import os, signal, time\nfor _ in range(2): os.fork()\nwhile True:\n    os.killpg(0, signal.SIGCONT)\n    time.sleep(0.0005)\n"
    proc = subprocess.Popen(["/bin/sh", "-c", f"python3 -c '{script}'"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(list(freeze.descendants(proc.pid))) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        hold = freeze.Freeze()
        hold.attach(proc.pid)
        hold.hold(-1)
        time.sleep(0.2)
        states = {pid: freeze._state(pid) for pid in freeze.descendants(proc.pid)}
        assert states and set(states.values()) <= {"T", "Z"} and "T" in states.values(), states
        hold.release(-1)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
