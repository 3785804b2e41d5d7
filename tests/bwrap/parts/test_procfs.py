"""A process's state letter and children, as /proc tells them."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from stockade.bwrap.parts import procfs


def test_state_of_a_stopped_a_sleeping_and_a_gone_process() -> None:
    proc = subprocess.Popen(["/bin/sleep", "5"])
    try:
        time.sleep(0.05)
        assert procfs.state(proc.pid) == "S"
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.05)
        assert procfs.state(proc.pid) == "T"
    finally:
        proc.kill()
        proc.wait()
    assert procfs.state(proc.pid) is None


def test_a_name_with_a_parenthesis_and_space_does_not_fool_the_state() -> None:
    proc = subprocess.Popen(["/bin/sh", "-c", "exec -a 'x) R (y' sleep 5"], executable="/bin/bash")
    try:
        time.sleep(0.1)
        assert procfs.state(proc.pid) == "S"
    finally:
        proc.kill()
        proc.wait()


def test_children_of_this_process_and_of_none() -> None:
    proc = subprocess.Popen(["/bin/sleep", "5"])
    try:
        assert proc.pid in (procfs.children(os.getpid()) or [])
    finally:
        proc.kill()
        proc.wait()
    assert procfs.children(2**22 + 99) is None
