"""A host socket that comes and goes while runs start never shows (issue 31, item 5).

stockade masks each host socket the sandbox could see; one can vanish in the
milliseconds bwrap takes to set up, and bwrap then fails. The run is started
again (bwrap/execute.py), and what bwrap said about the lost start goes to a
pipe of stockade's, never to the command's stderr.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from tests.e2e.boxes import Box

pytestmark = pytest.mark.e2e

RUNS = 200
# How long each path stays, and stays gone: a daemon restarting, an editor's swap file. Faster than a
# start of a run (tens of ms), so that starts meet it coming and going, as a busy machine's do.
CHURN = 0.01


def _churn(path: str, stop: threading.Event) -> None:
    while not stop.is_set():
        server = socket.socket(socket.AF_UNIX)
        try:
            server.bind(path)
        except OSError:
            pass
        time.sleep(CHURN)
        try:
            os.unlink(path)
        except OSError:
            pass
        server.close()
        time.sleep(CHURN)


def test_a_socket_made_and_removed_in_a_loop_never_fails_a_run_nor_adds_a_line(vbox: Box) -> None:
    place = vbox.outside / "sockets"
    place.mkdir()
    stop = threading.Event()
    churn = threading.Thread(target=_churn, args=(str(place / "b.sock"), stop))
    churn.start()
    results = []
    try:
        for _ in range(RUNS):
            results.append(vbox.run("echo to-stderr >&2; echo to-stdout; ls /proc/self/fd", options=["--profile", "offline"]))
    finally:
        stop.set()
        churn.join()
    failed = [result for result in results if result.returncode != 0]
    stray = [result.stderr for result in results if result.stderr != "to-stderr\n"]
    assert not failed, failed[0]
    assert not stray, f"{len(stray)} of {RUNS} runs said more than the command: {stray[0]!r}"
    fds = {line for result in results for line in result.stdout.split()[1:]}
    assert fds <= {"0", "1", "2", "3"}, fds  # ls's own folder fd: nothing of stockade's is left open
    assert all(result.stdout.startswith("to-stdout\n") for result in results)

