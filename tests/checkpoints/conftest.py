"""The checkpoints' tests' shared world: a project with a stage begun over it (stage.py, accept.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stockade.checkpoints import stage


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(project, state folder, a stage's folder) with a few files made before the stage began."""
    project = tmp_path / "project"
    state = tmp_path / "state"
    (project / "src").mkdir(parents=True)
    (project / "src" / "a.py").write_text("a = 1\n")
    (project / "src" / "same.py").write_text("same\n")
    (project / "old").mkdir()
    (project / "old" / "x").write_text("x\n")
    (project / "keep.txt").write_text("keep\n")
    (project / "gone.txt").write_text("gone\n")
    time.sleep(0.02)  # the project made before the run began, past the coarse clock's tick
    folder, lock = stage.begin(str(state), str(project), {"command": ["t"]})
    os.close(lock)
    return project, state, Path(folder.folder)
