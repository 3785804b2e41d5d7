"""Units of a stage applied to a project, dropped, and checked for what the host changed since (accept.py).

The upper folders are made by hand as overlay makes them (a whiteout is a
character device 0/0); tests/e2e/test_staging.py makes them with real overlays.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from stockade.checkpoints import accept, stage, store
from stockade.checkpoints.restore import UNLIMITED
from tests.checkpoints.stagefiles import whiteout as _whiteout
from tests.treesnap import snapshot


def test_accept_applies_and_undo_takes_it_back(world: tuple[Path, Path, Path]) -> None:
    project, state, folder = world
    upper = folder / "upper"
    before = snapshot(project)
    (upper / "src").mkdir()
    (upper / "src" / "a.py").write_text("a = 2\n")
    _whiteout(upper / "gone.txt")
    (upper / "new" / "deep").mkdir(parents=True)
    (upper / "new" / "deep" / "f").write_text("f\n")
    os.symlink("/etc/passwd", upper / "link")
    the_stage = stage.Stage(str(folder))
    stage.finish(the_stage, str(project), [])
    the_stage = stage.Stage(str(folder))
    recorder = store.Recorder(store.project_folder(str(state), str(project)), str(project), UNLIMITED, {"kind": "run"}, (str(project),))
    outcome = accept.accept(the_stage, str(project), the_stage.units, the_stage.units, recorder, force=False)
    recorder.finish(0)
    assert sorted(outcome.applied) == ["gone.txt", "link", "new", "src/a.py"] and not outcome.conflicts
    assert (project / "src" / "a.py").read_text() == "a = 2\n" and not (project / "gone.txt").exists()
    assert os.readlink(project / "link") == "/etc/passwd" and (project / "new" / "deep" / "f").read_text() == "f\n"
    assert not os.path.exists(folder), "an applied stage goes"
    assert not [a for a in os.listxattr(project / "new") if a.startswith("user.overlay.")]
    from stockade.checkpoints import history, restore

    runs = history.runs(str(state), str(project))
    undo_recorder = store.Recorder(store.project_folder(str(state), str(project)), str(project), UNLIMITED, {"kind": "undo"}, (str(project),))
    restore.undo(runs[-1], undo_recorder)
    undo_recorder.finish(0)
    assert snapshot(project) == before


def test_a_host_change_after_the_run_began_is_a_conflict_never_overwritten(world: tuple[Path, Path, Path]) -> None:
    project, state, folder = world
    upper = folder / "upper"
    (upper / "src").mkdir()
    (upper / "src" / "a.py").write_text("a = 2\n")
    (upper / "keep.txt").write_text("stage's\n")
    the_stage = stage.Stage(str(folder))
    stage.finish(the_stage, str(project), [])
    the_stage = stage.Stage(str(folder))
    time.sleep(0.02)  # past the coarse clock's tick
    (project / "keep.txt").write_text("host's own edit\n")
    recorder = store.Recorder(store.project_folder(str(state), str(project)), str(project), UNLIMITED, {"kind": "run"}, (str(project),))
    outcome = accept.accept(the_stage, str(project), the_stage.units, the_stage.units, recorder, force=False)
    assert outcome.applied == ["src/a.py"], outcome.applied  # the control: the other change lands
    assert outcome.conflicts == [("keep.txt", "changed on the host after the run began")]
    assert (project / "keep.txt").read_text() == "host's own edit\n"
    left = stage.Stage(str(folder)).units
    assert [u["p"] for u in left] == ["keep.txt"], "the conflicting change stays in the stage"
    forced = accept.accept(stage.Stage(str(folder)), str(project), left, left, recorder, force=True)
    recorder.finish(0)
    assert forced.applied == ["keep.txt"] and (project / "keep.txt").read_text() == "stage's\n"
    from stockade.checkpoints import history

    records = [entry for run in history.runs(str(state), str(project)) for entry in run.records()]
    assert any(str(project / "keep.txt") == entry for entry in records), "the host's edit is kept in the accept's checkpoint"


def test_a_link_on_the_host_where_the_stage_has_a_folder_is_never_followed(world: tuple[Path, Path, Path], tmp_path: Path) -> None:
    project, state, folder = world
    upper = folder / "upper"
    outside = tmp_path / "outside"
    outside.mkdir()
    (upper / "out").mkdir()
    (upper / "out" / "f").write_text("planted\n")
    the_stage = stage.Stage(str(folder))
    stage.finish(the_stage, str(project), [])
    the_stage = stage.Stage(str(folder))
    os.symlink(outside, project / "out")  # made on the host after the stage was read
    recorder = store.Recorder(store.project_folder(str(state), str(project)), str(project), UNLIMITED, {"kind": "run"}, (str(project),))
    outcome = accept.accept(the_stage, str(project), the_stage.units, the_stage.units, recorder, force=False)
    recorder.finish(0)
    assert not (outside / "f").exists()
    assert outcome.conflicts and not outcome.applied


def test_naming_part_of_a_new_tree_splits_it(world: tuple[Path, Path, Path]) -> None:
    project, state, folder = world
    upper = folder / "upper"
    (upper / "t" / "a").mkdir(parents=True)
    (upper / "t" / "a" / "one").write_text("1")
    (upper / "t" / "two").write_text("2")
    the_stage = stage.Stage(str(folder))
    stage.finish(the_stage, str(project), [])
    the_stage = stage.Stage(str(folder))
    wanted = [str(project / "t" / "a" / "one")]
    units, unmatched = stage.select(the_stage.units, the_stage.upper, wanted, str(project))
    assert not unmatched and [u["p"] for u in units] == ["t", "t/a", "t/a/one", "t/two"]
    chosen = accept.with_parents([u for u in units if stage.named(u, wanted, str(project))], units)
    recorder = store.Recorder(store.project_folder(str(state), str(project)), str(project), UNLIMITED, {"kind": "run"}, (str(project),))
    outcome = accept.accept(the_stage, str(project), units, chosen, recorder, force=False)
    recorder.finish(0)
    assert sorted(outcome.applied) == ["t", "t/a", "t/a/one"]
    assert (project / "t" / "a" / "one").read_text() == "1" and not (project / "t" / "two").exists()
    assert [u["p"] for u in stage.Stage(str(folder)).units] == ["t/two"]


def test_reject_drops_units_and_an_empty_stage_goes(world: tuple[Path, Path, Path]) -> None:
    project, _state, folder = world
    upper = folder / "upper"
    (upper / "n.txt").write_text("n")
    _whiteout(upper / "gone.txt")
    the_stage = stage.Stage(str(folder))
    stage.finish(the_stage, str(project), [])
    the_stage = stage.Stage(str(folder))
    accept.reject(the_stage, the_stage.units, [u for u in the_stage.units if u["p"] == "n.txt"])
    assert [u["p"] for u in stage.Stage(str(folder)).units] == ["gone.txt"]
    left = stage.Stage(str(folder))
    accept.reject(left, left.units, left.units)
    assert not folder.exists() and (project / "gone.txt").exists() and not (project / "n.txt").exists()
