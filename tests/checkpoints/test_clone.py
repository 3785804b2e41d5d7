"""macOS checkpoints' plumbing, run here: the project cloned before a run, compared after it, undone.

On macOS the clone is clonefile(2) (APFS copy-on-write); here a copy that
keeps modes, times and links stands in for it. Everything after the clone,
the comparison, the records and the undo, is the code macOS runs.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from stockade.checkpoints import clone, history, restore, store
from tests.treesnap import snapshot


def copy_clone(source: str, target: str) -> None:
    shutil.copytree(source, target, symlinks=True, copy_function=shutil.copy2)


def _project(root: Path) -> Path:
    project = root / "project"
    (project / "src" / "pkg" / "empty").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hello')\n")
    (project / "src" / "pkg" / "data.bin").write_bytes(bytes(range(256)) * 40)
    (project / "src" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (project / "src" / "run.sh").chmod(0o755)
    os.symlink("main.py", project / "src" / "link")
    (project / "README").write_text("readme\n")
    return project


def _cloned(tmp_path: Path, project: Path) -> clone.Cloned:
    meta: dict[str, object] = {"kind": "run", "command": ["agent"], "cwd": str(project), "project": str(project)}
    return clone.Cloned(str(tmp_path / "state"), str(project), 1 << 30, meta, clone=copy_clone)


def _undo(tmp_path: Path, project: Path) -> None:
    found = history.runs(str(tmp_path / "state"), str(project))
    target = history.latest_undoable(found)
    assert target is not None
    folder = store.project_folder(str(tmp_path / "state"), str(project))
    recorder = store.Recorder(folder, str(project), restore.UNLIMITED, {"kind": "undo", "undoes": target.number}, (str(project),))
    outcome = restore.undo(target, recorder)
    recorder.finish(0)
    assert not outcome.failed, outcome.failed


def test_a_run_s_changes_are_recorded_from_the_clone_and_undone_exactly(tmp_path: Path) -> None:
    project = _project(tmp_path)
    before = snapshot(project)
    cloned = _cloned(tmp_path, project)
    assert cloned.take() is None
    time.sleep(0.01)
    shutil.rmtree(project / "src" / "pkg")  # what the run does
    (project / "README").write_text("changed\n")
    (project / "src" / "run.sh").chmod(0o700)
    os.remove(project / "src" / "link")
    os.symlink("run.sh", project / "src" / "link")
    (project / "new" / "deep").mkdir(parents=True)
    (project / "new" / "deep" / "file").write_text("new\n")
    meta = cloned.finish(0)
    assert meta is not None and not os.path.exists(cloned.clone_dir), "the clone goes"
    counts = meta["counts"]
    assert isinstance(counts, dict) and counts.get("removed", 0) >= 3, counts
    assert snapshot(project) != before  # the control: the run's changes are there
    _undo(tmp_path, project)
    assert snapshot(project) == before


def test_a_run_that_changes_nothing_leaves_no_checkpoint(tmp_path: Path) -> None:
    project = _project(tmp_path)
    cloned = _cloned(tmp_path, project)
    assert cloned.take() is None
    assert cloned.finish(0) is None
    assert history.runs(str(tmp_path / "state"), str(project)) == []


def test_a_project_that_cannot_be_cloned_says_why_and_runs_on(tmp_path: Path) -> None:
    project = _project(tmp_path)

    def refuse(source: str, target: str) -> None:
        raise OSError(45, "Operation not supported")

    meta: dict[str, object] = {"kind": "run"}
    cloned = clone.Cloned(str(tmp_path / "state"), str(project), 1 << 30, meta, clone=refuse)
    why = cloned.take()
    assert why is not None and "could not be cloned" in why
    assert cloned.finish(0) is None
    too_many = _cloned(tmp_path, project).take(entries=clone.CLONE_LIMIT + 1)
    assert too_many is not None and "more than" in too_many


def test_the_state_folder_inside_the_project_is_never_cloned_into_itself(tmp_path: Path) -> None:
    project = _project(tmp_path)
    cloned = clone.Cloned(str(project / ".state"), str(project), 1 << 30, {"kind": "run"}, clone=copy_clone)
    why = cloned.take()
    assert why is not None and "inside the project" in why


@pytest.mark.skipif(not hasattr(os, "uname") or os.uname().sysname != "Darwin", reason="clonefile(2) is macOS's")
def test_clonefile_clones_a_folder_on_apfs(tmp_path: Path) -> None:
    project = _project(tmp_path)
    clone.clonefile(str(project), str(tmp_path / "clone"))
    assert snapshot(tmp_path / "clone") == snapshot(project)
