"""A stage's upper folder read into units, and units applied, dropped and checked for conflicts.

The upper folders here are made by hand as overlay makes them (a whiteout is a
character device 0/0, a replaced folder carries `user.overlay.opaque`); the
end-to-end tests (tests/e2e/test_staging.py) make them with real overlays.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from stockade.checkpoints import stage
from stockade.profiles.floor import stage_marks
from tests.checkpoints.stagefiles import whiteout as _whiteout


def _units(project: Path, upper: Path, deny_write: tuple[str, ...] = ()) -> list[dict[str, object]]:
    return stage.read_upper(str(upper), str(project), stage_marks(str(project), deny_write))


def test_the_upper_folder_reads_as_one_unit_per_change(world: tuple[Path, Path, Path]) -> None:
    project, _state, folder = world
    upper = folder / "upper"
    (upper / "src").mkdir()
    (upper / "src" / "a.py").write_text("a = 2\n")
    (upper / "src" / "same.py").write_text("same\n")  # copied up, unchanged: no unit
    os.chmod(upper / "src" / "same.py", os.stat(project / "src" / "same.py").st_mode & 0o777)
    _whiteout(upper / "gone.txt")
    _whiteout(upper / "never-there")  # removed what the host does not have: no unit
    (upper / "new" / "deep").mkdir(parents=True)
    (upper / "new" / "deep" / "f").write_text("f\n")
    (upper / "old").mkdir()
    os.setxattr(upper / "old", stage.OPAQUE, b"y")
    (upper / "old" / "y").write_text("y\n")
    units = {str(u["p"]): u for u in _units(project, upper)}
    assert set(units) == {"src/a.py", "gone.txt", "new", "old/x", "old/y"}, units
    assert units["src/a.py"]["a"] == "put" and units["src/a.py"]["was"] == "file"
    assert units["gone.txt"]["a"] == "remove"
    assert units["new"]["k"] == "tree" and units["new"]["files"] == 1
    assert units["old/x"]["a"] == "remove" and units["old/y"]["a"] == "put"


def test_files_that_run_code_later_and_deny_write_matches_are_marked(world: tuple[Path, Path, Path]) -> None:
    project, _state, folder = world
    upper = folder / "upper"
    (upper / ".git" / "hooks").mkdir(parents=True)
    (upper / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (upper / ".git" / "index").write_bytes(b"DIRC")
    (upper / ".vscode").mkdir()
    (upper / ".vscode" / "tasks.json").write_text("{}")
    (upper / "src").mkdir()
    (upper / "src" / "secret.cfg").write_text("x")
    (upper / "src" / "tool").write_text("#!/bin/sh\n")
    os.chmod(upper / "src" / "tool", 0o4755)
    units = {str(u["p"]): u for u in _units(project, upper, (f"{project}/src/*.cfg",))}
    assert "git" in str(units[".git"]["mark"]) or units[".git"]["k"] == "dir"  # a new git dir is named itself
    assert "hooks" in str(units[".git/hooks/pre-commit"]["mark"])
    assert not units[".git/index"]["mark"]
    assert ".vscode" in str(units[".vscode/tasks.json"]["mark"])
    assert units["src/secret.cfg"]["mark"] == "deny_write"
    assert units["src/tool"]["mark"] == "setuid or setgid"
    # the control: an ordinary new file in the same folder is not marked
    (upper / "src" / "plain.py").write_text("x")
    assert not {str(u["p"]): u for u in _units(project, upper)}["src/plain.py"]["mark"]


def test_marks_match_only_what_they_name() -> None:
    marks = [(re.compile(p), w) for p, w in stage_marks("/p", ("/p/locked/*",))]

    def mark(path: str) -> str:
        return next((w for p, w in marks if p.fullmatch(path)), "")

    assert mark("/p/sub/.git/hooks/post-checkout") and mark("/p/.envrc") and mark("/p/a/b/.envrc") and mark("/p/locked/x")
    assert mark("/p/.claude/settings.json") and mark("/p/.git/config") and mark("/p/.stockade.toml")
    assert not mark("/p/src/config") and not mark("/p/.git/index") and not mark("/p/.git/objects/ab/cd") and not mark("/p/locked")
    assert not mark("/p/src/hooks/x.py") and not mark("/p/README.md")
