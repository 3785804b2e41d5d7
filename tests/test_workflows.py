"""The CI files that run elsewhere (a Mac runner, GitHub Actions) are at least valid and say what they should."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_macos_workflow_installs_and_runs_the_mac_suite() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "macos.yml").read_text())
    job = workflow["jobs"]["seatbelt"]
    assert job["runs-on"] == "${{ matrix.os }}" and "macos-latest" in job["strategy"]["matrix"]["os"]
    commands = " ".join(step.get("run", "") for step in job["steps"])
    assert "pip install -e" in commands and "pytest" in commands and "tests/macos" in commands
    assert any(step.get("env", {}).get("STOCKADE_MACOS_MUST_RUN") == "1" for step in job["steps"])


def test_composite_action_wraps_a_step_in_stockade() -> None:
    yaml = pytest.importorskip("yaml")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    script = " ".join(step.get("run", "") for step in action["runs"]["steps"])
    assert "run --ci --report" in script and "stockade" in script
