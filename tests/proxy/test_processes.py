"""A process described from /proc: its pid inside, executable, bounded and redacted arguments, parents."""

from __future__ import annotations

import os
import subprocess
import sys

from stockade.proxy import processes


def test_a_live_process_is_described() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--token=sk-live-abcdef123456", "x" * 5000])
    try:
        described = processes.describe(child.pid, [processes.parent_entry(os.getpid())])
    finally:
        child.kill()
        child.wait()
    assert described["pid"] == child.pid  # no namespace of its own: the same number
    assert described["exe"] == os.path.realpath(sys.executable)
    assert described["argv"][0] == sys.executable and "sk-live-abcdef123456" not in str(described["argv"])
    assert sum(len(word) for word in described["argv"]) <= processes.ARG_CHARS
    assert described["parents"][0]["pid"] == os.getpid()
    assert processes.status(os.getpid())[1] == os.getppid()


def test_a_gone_process_says_nothing_rather_than_failing() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert processes.exe(child.pid) == "" and processes.argv(child.pid) == []
    assert processes.status(child.pid) == (-1, -1)
