"""stockade inside stockade: the inner run uses the sandbox it is in (issue: everyday work)."""

from __future__ import annotations

import sys

import pytest

from tests.e2e.boxes import Box


def _inner(vbox: Box) -> list[str]:
    return [sys.executable, "-m", "stockade.cli.main", "run", "--"]


@pytest.mark.skipif(
    sys.executable.startswith(("/tmp/", "/var/tmp/")), reason="this stockade is installed under /var/tmp, which is private inside the sandbox"
)
def test_stockade_run_inside_runs_the_command_as_is_with_its_status(vbox: Box) -> None:
    inner = " ".join(_inner(vbox))
    result = vbox.run(f"{inner} sh -c 'echo inner-ran; echo x > made.txt; exit 7'")
    assert result.returncode == 7 and "inner-ran" in result.stdout, result
    assert "already inside a stockade sandbox" in result.stderr and "Traceback" not in result.stderr, result
    assert (vbox.project / "made.txt").exists()
    walls = vbox.run(f"{inner} sh -c 'cat ~/.ssh/id_test; echo x > {vbox.outside}/escaped'")
    assert "CANARY-SSH" not in walls.stdout and not (vbox.outside / "escaped").exists(), walls  # the outer walls hold


def test_a_faked_variable_outside_does_not_skip_the_sandbox(vbox: Box) -> None:
    result = vbox.run(f"echo x > {vbox.outside}/escaped; cat ~/.ssh/id_test", env={"STOCKADE_SANDBOX": "1"})
    assert "already inside" not in result.stderr, result
    assert "CANARY-SSH" not in result.stdout and not (vbox.outside / "escaped").exists(), result
    control = vbox.run("echo ok", env={"STOCKADE_SANDBOX": "1"})
    assert control.stdout == "ok\n", control
