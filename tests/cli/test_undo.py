"""`stockade runs` and `stockade undo` on checkpoints made here: listing, a path's words, exit statuses."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stockade.checkpoints import store
from stockade.cli.main import main
from stockade.cli.undo import _when
from stockade.core.locations import Locations


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _changed(locations: Locations, project: Path, command: list[str]) -> None:
    """A run that removed `gone` and made `new`, as the sandbox's thread would record it."""
    recorder = store.Recorder(store.project_folder(str(locations.state), str(project)), str(project), 1 << 30, {"kind": "run", "command": command})
    recorder.changing(str(project / "gone"), store.REMOVE)
    (project / "gone").unlink()
    recorder.changing(str(project / "new"), store.CREATE)
    (project / "new").write_text("new")
    recorder.finish(0)


def test_runs_lists_and_undo_puts_back(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "gone").write_text("kept")
    _changed(locations, project, ["rm", "gone"])
    code, out, _err = run_cli(capsys, "runs")
    assert code == 0 and "    1  just now        1 new, 1 removed" in out and "rm gone  (exit 0)" in out, out
    code, out, _err = run_cli(capsys, "runs", "1")
    assert code == 0 and "  removed    gone\n" in out and "  new        new\n" in out, out
    code, out, _err = run_cli(capsys, "undo", "--dry-run")
    assert code == 0 and "put back   gone" in out and (project / "new").exists()
    code, out, _err = run_cli(capsys, "undo")
    assert code == 0 and out.startswith("stockade: run 1 undone: 1 put back, 1 removed"), out
    assert (project / "gone").read_text() == "kept" and not (project / "new").exists()
    code, out, _err = run_cli(capsys, "undo", "1")
    assert code == 1 and out == "stockade: run 1 was undone already (undo 2); `stockade undo 2` makes run 1's changes again\n", out
    code, out, _err = run_cli(capsys, "undo")
    assert code == 1 and "the last change was undo 2 of run 1; `stockade undo 2` makes run 1's changes again" in out, out
    code, out, _err = run_cli(capsys, "undo", "2")  # the redo
    assert code == 0 and out == "stockade: run 1 made again: 1 put back, 1 removed; `stockade undo` undoes it again\n", out
    assert not (project / "gone").exists() and (project / "new").read_text() == "new"
    code, out, _err = run_cli(capsys, "runs")
    assert "(undo of run 1)  (exit 0, undone)" in out and "(run 1 made again)  (exit 0)" in out, out
    code, out, _err = run_cli(capsys, "undo", "1")
    assert code == 1 and "run 1 was undone and made again since (as 3); `stockade undo 3` undoes it" in out, out
    code, out, _err = run_cli(capsys, "undo")  # the redo is the last change: undone like a run
    assert code == 0 and out.startswith("stockade: run 1 (made again as 3) undone: 1 put back, 1 removed"), out
    assert (project / "gone").read_text() == "kept" and not (project / "new").exists()


def test_a_dry_run_names_what_would_stop_undo(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "gone").write_text("kept")
    _changed(locations, project, ["rm", "gone"])
    (project / "new").write_text("the user's edit")
    code, out, _err = run_cli(capsys, "undo", "--dry-run")
    assert code == 1 and "  new: changed since the run" in out and "would stop" in out and "`stockade undo 1 --force`" in out, out
    assert (project / "new").read_text() == "the user's edit"  # a dry run changes nothing
    code, out, _err = run_cli(capsys, "undo", "--dry-run", "--force")
    assert code == 0 and "put back   gone" in out


def test_runs_from_a_subfolder_finds_the_project(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "gone").write_text("kept")
    _changed(locations, project, ["true"])
    (project / "sub").mkdir()
    os.chdir(project / "sub")
    code, out, _err = run_cli(capsys, "runs")
    assert code == 0 and f"runs that changed {project}" in out


def test_bad_input_is_one_line_and_the_right_status(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "undo")
    assert code == 1 and "nothing to undo" in out
    code, out, _err = run_cli(capsys, "runs")
    assert code == 0 and "no run has changed" in out
    (project / "gone").write_text("kept")
    _changed(locations, project, ["true"])
    code, _out, err = run_cli(capsys, "undo", "7")
    assert code == 2 and err.count("\n") == 1 and "no run 7 has a checkpoint" in err, err
    code, _out, err = run_cli(capsys, "undo", "seven")
    assert code == 2 and "RUN is a run's number as `stockade runs` lists them, not 'seven'" in err, err


def test_when_says_how_long_ago() -> None:
    now = time.time()
    assert _when(now) == "just now" and _when(now - 125) == "2 minutes ago" and _when(now - 3 * 86400) == "3 days ago"


def test_undo_puts_back_a_runs_later_file_only_as_planning_found_it(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".envrc").write_text("the user's own\n")
    (project / ".mise.toml").write_text("[tasks]\nx = 'ok'\n")
    stamps = {name: (project / name).stat() for name in (".envrc", ".mise.toml")}
    before = {str(project / name): [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns] for name, info in stamps.items()}
    folder = store.project_folder(str(locations.state), str(project))
    recorder = store.Recorder(folder, str(project), 1 << 30, {"kind": "run"}, floor_before=before)
    recorder.changing(str(project / ".envrc"), store.REMOVE)  # there before the run: its record is put back
    (project / ".envrc").unlink()
    (project / ".mise.toml").unlink()  # the run removed it past its record (a race, say)...
    (project / "stash").mkdir()
    (project / "stash" / "mise.toml").write_text("[tasks]\nx = 'id'\n")
    os.rename(project / "stash" / "mise.toml", project / ".mise.toml")  # ...and put its own there (an old ctime)
    recorder.changing(str(project / ".mise.toml"), store.REMOVE)  # then had it recorded as if it had been there
    (project / ".mise.toml").unlink()
    recorder.finish(0)
    code, out, _err = run_cli(capsys, "undo")
    assert code == 0 and (project / ".envrc").read_text() == "the user's own\n", out
    assert not (project / ".mise.toml").exists()
    assert "not put back: .mise.toml: a file that runs code later which was not there like this before the run" in out, out
