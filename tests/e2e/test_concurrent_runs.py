"""Runs at once in one project are independent: no false reports, no leftovers, no setup failures."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.e2e.boxes import Box

RUNS = 20
ROUNDS = 3


def test_twenty_runs_at_once_in_one_repository(vbox: Box) -> None:
    subprocess.run(["git", "init", "-q"], cwd=vbox.project, check=True)
    (vbox.project / "a.txt").write_text("a\n")
    before = sorted(os.listdir(vbox.project))
    command = [sys.executable, "-m", "stockade.cli.main", "run", "--", "/bin/sh", "-c", "ls -A >/dev/null; echo ok"]
    for _round in range(ROUNDS):
        runs = [
            subprocess.Popen(command, cwd=vbox.project, env=vbox.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(RUNS)
        ]
        results = [(run.wait(timeout=120), *run.communicate()) for run in runs]
        failed = [r for r in results if r[0] != 0 or r[1] != "ok\n" or r[2] != ""]
        assert not failed, failed[:3]
    assert sorted(os.listdir(vbox.project)) == before  # nothing left behind, nothing moved aside
    control = vbox.run("echo x > b.txt && echo ok")
    assert control.stdout == "ok\n" and (vbox.project / "b.txt").exists(), control
