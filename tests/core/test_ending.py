"""stockade ends by the signal that killed its command: seen from a parent, in a child process."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

CHILD = """
import sys
from stockade.core import ending
ending.end_by(int(sys.argv[1]))
ending.end_by(1)  # the first request wins
ending.finish()
sys.exit(7)
"""


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP])
def test_finish_ends_the_process_by_the_signal(number: int) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(number)], capture_output=True, text=True)
    assert done.returncode == -number
    assert "core dumped" not in done.stderr


def test_finish_without_a_request_returns() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from stockade.core import ending; ending.finish(); print(ending.pending())"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == "None"
