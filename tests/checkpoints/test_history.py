"""A project's checkpoints over time: listed, settled after a kill, pruned, and which one undo takes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from stockade.checkpoints import history, store


def _run(state: Path, project: Path, name: str, kind: str = "run", **meta: object) -> store.Recorder:
    recorder = store.Recorder(store.project_folder(str(state), str(project)), str(project), 1 << 30, {"kind": kind, **meta})
    recorder.changing(str(project / name), store.CREATE)
    (project / name).write_text(name)
    recorder.finish(0)
    return recorder


def test_runs_are_listed_oldest_first_with_their_counts(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    _run(tmp_path, project, "a")
    _run(tmp_path, project, "b")
    found = history.runs(str(tmp_path), str(project))
    assert [run.number for run in found] == [1, 2]
    assert found[0].counts == {"new": 1, "changed": 0, "removed": 0, "lost": 0}
    assert history.latest_undoable(found) is found[1]


def test_a_killed_run_is_settled_when_listed(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "f").write_text("x")
    recorder = store.Recorder(store.project_folder(str(tmp_path), str(project)), str(project), 1 << 30, {"kind": "run"})
    recorder.changing(str(project / "f"), store.REMOVE)
    (project / "f").unlink()
    os.close(recorder.records_fd)  # the stockade process died here: no end written, the lock gone
    (found,) = history.runs(str(tmp_path), str(project))
    assert found.meta.get("killed") is True and found.counts["removed"] == 1


def test_undone_runs_are_skipped_and_a_redo_is_undoable(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    first = _run(tmp_path, project, "a")
    undo = _run(tmp_path, project, "b", kind="undo", undoes=first.number)
    found = history.runs(str(tmp_path), str(project))
    found[0].update(undone_by=undo.number)
    assert history.latest_undoable(history.runs(str(tmp_path), str(project))) is None
    _run(tmp_path, project, "c", kind="undo", undoes=undo.number, redoes=first.number)
    assert history.latest_undoable(history.runs(str(tmp_path), str(project))).number == 3  # type: ignore[union-attr]


def test_pruning_drops_old_and_oversized_checkpoints_but_keeps_the_newest(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    for name in ("a", "b", "c"):
        _run(tmp_path, project, name)
    old = history.runs(str(tmp_path), str(project))[0]
    old.update(started=time.time() - 10 * 86400)
    history.prune(str(tmp_path), str(project), 1 << 30, 7 * 86400, keep=3)
    assert [run.number for run in history.runs(str(tmp_path), str(project))] == [2, 3]
    for run in history.runs(str(tmp_path), str(project)):
        run.update(size=600)
    history.prune(str(tmp_path), str(project), 1000, 7 * 86400, keep=3)
    assert [run.number for run in history.runs(str(tmp_path), str(project))] == [3]


def test_an_undo_s_checkpoint_is_never_pruned_for_size(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    _run(tmp_path, project, "a", kind="undo", undoes=1)
    _run(tmp_path, project, "b")
    _run(tmp_path, project, "c")
    for run in history.runs(str(tmp_path), str(project)):
        run.update(size=600)
    history.prune(str(tmp_path), str(project), 1000, 7 * 86400, keep=3)  # a run that grew past the limit
    assert [run.number for run in history.runs(str(tmp_path), str(project))] == [1, 3]
