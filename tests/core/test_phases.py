"""The run's phase marks: silent unless asked for, in order and relative to the first when asked."""

from __future__ import annotations

import pytest

from stockade.core import phases


def test_off_by_default_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(phases, "ENABLED", False)
    monkeypatch.setattr(phases, "_marks", [])
    phases.mark("start")
    assert phases._marks == [] and phases.said() == ""


def test_on_says_each_mark_since_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(phases, "ENABLED", True)
    monkeypatch.setattr(phases, "_marks", [])
    clock = iter([10.0, 10.0025, 10.0100])
    monkeypatch.setattr(phases.time, "perf_counter", lambda: next(clock))
    for name in ("start", "plan", "after"):
        phases.mark(name)
    assert phases.said() == "stockade-phases: clock=10.000000 start=0.00 plan=2.50 after=10.00"


def test_a_run_with_marks_on_has_a_first_mark_from_its_import(tmp_path: object) -> None:
    import subprocess
    import sys

    code = "import time; before = time.perf_counter(); from stockade.core import phases; print(phases._marks[0][0], phases._marks[0][1] >= before)"
    done = subprocess.run(
        [sys.executable, "-c", code], env={"STOCKADE_PHASES": "1", "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["loaded", "True"]
