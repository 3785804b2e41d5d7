"""stockade inside stockade: the inner run uses the sandbox it is in (issue: everyday work)."""

from __future__ import annotations

import sys
from pathlib import Path

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


SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stockade"


@pytest.mark.skipif(str(SCRIPT).startswith(("/tmp/", "/var/tmp/")), reason="this checkout is under /var/tmp, which is private inside the sandbox")
def test_the_command_runs_as_is_where_stockades_own_code_cannot_be_imported(vbox: Box) -> None:
    """A newcomer's nested run crashed with a traceback (its code's folder was hidden inside): the script
    itself now runs `run -- COMMAND` as is inside a sandbox, and says in one line why it cannot do more."""
    bare = f"/usr/bin/python3 -I -S {SCRIPT}"  # no site, no .pth: stockade cannot be imported
    inner = vbox.run(f"{bare} run -- sh -c 'echo inner-ran; exit 7'")
    assert inner.returncode == 7 and "inner-ran" in inner.stdout and "already inside a stockade sandbox" in inner.stderr, inner
    other = vbox.run(f"{bare} doctor")
    assert other.returncode == 125 and "stockade's own code cannot be imported here" in other.stderr and "Traceback" not in other.stderr
    missing = vbox.run(f"{bare} run -- no-such-program-here")
    assert missing.returncode == 127 and "Traceback" not in missing.stderr, missing
    planned = vbox.run(f"{bare} run --dry-run -- sh -c 'echo x > dry-ran'")  # hostile review 16: --dry-run ran it
    assert planned.returncode == 0 and "would run sh" in planned.stdout and not (vbox.project / "dry-ran").exists(), planned
    quiet = vbox.run(f"{bare} run --quiet -- true")
    assert quiet.returncode == 0 and "already inside" not in quiet.stderr, quiet


def test_outside_a_sandbox_the_script_never_runs_the_command_bare() -> None:
    """Control: the fallback is for the inside only; outside, the command is not run unsandboxed."""
    import subprocess

    result = subprocess.run(["/usr/bin/python3", "-I", "-S", str(SCRIPT), "run", "--", "echo", "ran-bare"], capture_output=True, text=True)
    assert result.returncode == 125 and "ran-bare" not in result.stdout and "cannot be imported" in result.stderr, result
