"""`stockade review`, `accept` and `reject`: a staged run's changes, seen and then applied or dropped.

A staged run (`stockade run --stage`, or `[checkpoints] stage = true`) leaves
its changes to the project in a stage (checkpoints/stage.py). `review` shows
each stage's changes, the marked ones first (files that run code later,
deny_write matches), with a diff for text; `accept` applies them, all but the
marked unless they are named, and says which ones the host changed meanwhile
(conflicts stay in the stage); `reject` drops them. An accept is a run of its
own for `stockade undo`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from typing import Annotated

import typer

from stockade.checkpoints import accept as applying
from stockade.checkpoints import stage, store
from stockade.cli.undo import _lock, _project, _when
from stockade.core.errors import UsageError
from stockade.core.locations import locate
from stockade.profiles.text import shown

Unit = dict[str, object]
DIFF_LINES = 400  # a file's diff is cut after this many lines (the rest counted)
TEXT_LIMIT = 4 << 20  # larger files are not diffed
TREE_NAMES = 20  # a whole new folder's files named in the review, at most
GIT_DATA = ".git/"

StageOption = Annotated[int | None, typer.Option("--stage", "-s", help="Only this stage (default: every pending one, oldest first).", metavar="N")]
PathsArgument = Annotated[list[str] | None, typer.Argument(help="Only changes at or under these paths.", metavar="PATH")]


def _where() -> tuple[str, str]:
    state = str(locate().state)
    return state, _project(state)


def _stages(state: str, project: str, number: int | None) -> list[stage.Stage]:
    troubles: list[tuple[stage.Stage, str]] = []
    found = stage.pending(state, project, troubles)
    for one, why in troubles:
        print(f"stockade: stage {one.number} is left as it is: {why} ({one.folder}; remove that folder to drop it)")
    if number is not None:
        found = [one for one in found if one.number == number]
        if not found:
            live = [one.number for one in stage.stages(state, project) if one.live()]
            why = "its run is still going" if number in live else "no such stage pending (see `stockade review`)"
            raise UsageError(f"stage {number} in {shown(project)}: {why}")
    return found


def _asked(paths: list[str] | None, number: int | None) -> tuple[str, str, list[str], list[stage.Stage]]:
    """(state folder, project, the paths as absolute ones, the stages asked for); a line when none is pending."""
    state, project = _where()
    wanted = _absolute(paths, project)
    found = _stages(state, project, number)
    if not found:
        _nothing(project, state)
    return state, project, wanted, found


def _absolute(paths: list[str] | None, project: str) -> list[str]:
    out: list[str] = []
    for given in paths or []:
        if not given:
            raise UsageError("an empty path names nothing: give the project's folder (.) to mean all of it")
        path = os.path.normpath(os.path.join(os.getcwd(), given))
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path)) if path != "/" else path
        for candidate in (path, real):
            if candidate == project or candidate.startswith(project.rstrip("/") + "/"):
                out.append(candidate)
                break
        else:
            raise UsageError(f"{given} is outside the project {shown(project)}: a stage holds only the project's changes")
    return out


def _nothing(project: str, state: str) -> None:
    live = [one.number for one in stage.stages(state, project) if one.live()]
    if live:
        print(f"stockade: nothing staged yet in {shown(project)}: the run of stage {live[0]} is still going")
    else:
        print(f"stockade: nothing staged in {shown(project)}")


# -- review -------------------------------------------------------------------------------------


def review(
    paths: PathsArgument = None,
    number: StageOption = None,
    names: Annotated[bool, typer.Option("--names", help="Only name the changed paths, no diffs.")] = False,
) -> None:
    state, project, wanted, found = _asked(paths, number)
    if not found:
        return
    for one in found:
        units, _unmatched = stage.select(one.units, one.upper, wanted, project)
        units = [unit for unit in units if not wanted or stage.named(unit, wanted, project)]
        if not units:
            continue
        conflicts = applying.conflicts(units, project, one.began)
        _show_stage(one, units, conflicts, project, names)


def _show_stage(one: stage.Stage, units: list[Unit], conflicts: dict[str, str], project: str, names: bool) -> None:
    marked = [unit for unit in units if unit.get("mark")]
    command = shlex.join(one.command) if one.command else "?"
    started = one.meta.get("started")
    when = _when(float(started)) if isinstance(started, (int, float)) else "?"
    count = f"{len(units)} change{'s' if len(units) != 1 else ''}" + (f", {len(marked)} marked" if marked else "")
    print(f"stage {one.number}: {shown(command)} ({when}), {count}")
    if conflicts:
        print(f"  {len(conflicts)} changed on the host since the run began: accept leaves them unless named with --force")
    git = [unit for unit in units if str(unit["p"]).startswith(GIT_DATA) and not unit.get("mark")]
    for unit in [*marked, *(unit for unit in units if not unit.get("mark") and unit not in git)]:
        print(_line(unit, conflicts))
    if git:
        print(f"    git data: {_git_summary(git)}")
    if names:
        return
    for unit in [*marked, *(unit for unit in units if not unit.get("mark") and unit not in git)]:
        for text in _detail(one.upper, unit, project):
            print(text)


def _line(unit: Unit, conflicts: dict[str, str]) -> str:
    path = str(unit["p"])
    flag = "!" if unit.get("mark") else " "
    what = _what(unit)
    notes = []
    if unit.get("mark"):
        notes.append(str(unit["mark"]))
    if path in conflicts:
        notes.append("conflict: " + conflicts[path])
    if unit["a"] == stage.SKIP:
        notes.append(str(unit.get("why", "never applied")))
    shown_path = shown(path) + ("/" if unit["k"] in ("dir", "tree") else "")
    return f"  {flag} {what:<9} {shown_path}" + (f"  ({'; '.join(notes)})" if notes else "")


def _what(unit: Unit) -> str:
    if unit["a"] == stage.REMOVE:
        return "removed"
    if unit["a"] == stage.SKIP:
        return "skipped"
    if unit["k"] == "tree":
        return "new tree"
    if unit["k"] == "dir":
        return "mode" if unit.get("was") == "dir" else "new dir"
    if unit.get("was") is None:
        return "new"
    return "changed" if unit.get("was") == unit["k"] else "replaced"


def _git_summary(units: list[Unit]) -> str:
    objects = sum(int(str(unit.get("files", 1))) for unit in units if str(unit["p"]).startswith(".git/objects/"))
    refs = [str(unit["p"])[len(".git/") :] for unit in units if str(unit["p"]).startswith((".git/refs/", ".git/packed-refs"))]
    other = [str(unit["p"])[len(".git/") :] for unit in units if not str(unit["p"]).startswith((".git/objects/", ".git/refs/", ".git/logs/"))]
    parts = []
    if objects:
        parts.append(f"{objects} object file{'s' if objects != 1 else ''}")
    if refs:
        parts.append("refs " + ", ".join(refs[:6]) + (" ..." if len(refs) > 6 else ""))
    if other:
        parts.append(", ".join(other[:6]) + (" ..." if len(other) > 6 else ""))
    return "; ".join(parts) or f"{len(units)} paths"


def _detail(upper: str, unit: Unit, project: str) -> list[str]:
    path = str(unit["p"])
    host = os.path.join(project, path)
    staged = os.path.join(upper, path)
    if unit["a"] == stage.SKIP:
        return []
    if unit["k"] == "tree":
        files = list(stage.files_of(upper, unit))
        out = [f"--- {shown(path)}/: a new folder of {len(files)} file{'s' if len(files) != 1 else ''}"]
        out += [f"    {shown(name)}" for name in files[:TREE_NAMES]]
        if len(files) > TREE_NAMES:
            out.append(f"    ... and {len(files) - TREE_NAMES} more")
        return out
    if unit["k"] == "dir":
        return []
    if unit["a"] == stage.REMOVE:
        return [f"--- {shown(path)}: removed" + (" (a whole folder)" if unit.get("k") == "dir" else "")]
    if unit["k"] == "link":
        try:
            target = os.readlink(staged)
        except OSError:
            return []
        before = _readlink(host) if unit.get("was") == "link" else None
        return [f"--- {shown(path)}: a link to {shown(target)}" + (f" (was to {shown(before)})" if before is not None else "")]
    old = _text(host) if unit.get("was") == "file" else ("" if unit.get("was") is None else None)
    new = _text(staged)
    header = [f"--- a/{shown(path)}", f"+++ b/{shown(path)}"]
    mode = _mode_change(host, unit)
    if old is None or new is None:
        sizes = f"{_size(host)} -> {_size(staged)} bytes" if unit.get("was") == "file" else f"{_size(staged)} bytes"
        return [f"--- {shown(path)}: binary or large, {sizes}" + (f"; {mode}" if mode else "")]
    import difflib

    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3))[2:]
    if not lines and mode:
        return [f"--- {shown(path)}: {mode}"]
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more lines"]
    return [*header, *([f"# {mode}"] if mode else []), *(_diff_line(line) for line in lines)]


def _diff_line(line: str) -> str:
    """A diff line as the terminal may print it: the staged file chose its bytes, so every control
    character (an escape that clears the screen or hides the marked lines above) is shown escaped;
    a tab stays a tab."""
    if line.isprintable():
        return line
    return "".join(ch if ch == "\t" or ch.isprintable() else shown(ch) for ch in line)


def _mode_change(host: str, unit: Unit) -> str:
    try:
        before = os.lstat(host).st_mode & 0o7777
    except OSError:
        return ""
    after = int(str(unit.get("m", before)))
    return f"mode {before:o} -> {after:o}" if after != before else ""


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _text(path: str) -> str | None:
    """The file as text, or None for binary or large (a NUL, not UTF-8, over TEXT_LIMIT)."""
    try:
        if os.lstat(path).st_size > TEXT_LIMIT:
            return None
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# -- accept and reject --------------------------------------------------------------------------


def accept(
    paths: PathsArgument = None,
    number: StageOption = None,
    marked: Annotated[bool, typer.Option("--marked", help="Apply marked changes too (files that run code later, deny_write).")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Apply over what the host changed since the run began (kept in the accept's checkpoint).")
    ] = False,
) -> None:
    from stockade.checkpoints.restore import UNLIMITED

    state, project, wanted, found = _asked(paths, number)
    if not found:
        raise typer.Exit(1)
    folder = store.project_folder(state, project)
    lock = _lock(folder)
    trouble = False
    matched: set[str] = set()
    try:
        words = ["stockade", "accept", *(["--stage", str(number)] if number is not None else []), *(["--marked"] if marked else [])]
        words += [*(["--force"] if force else []), *(paths or [])]
        meta: dict[str, object] = {"kind": "run", "command": words, "cwd": os.getcwd(), "project": project}
        recorder = store.Recorder(folder, project, UNLIMITED, meta, (project,))
        for one, units, chosen in _chosen(state, project, found, wanted, matched):
            held = [unit for unit in chosen if unit.get("mark") and not marked and not stage.named_exactly(unit, wanted, project)]
            chosen = [unit for unit in chosen if unit not in held and unit["a"] != stage.SKIP]
            if not chosen:
                _say_held(one, held)
                continue
            outcome = applying.accept(one, project, units, applying.with_parents(chosen, units), recorder, force)
            trouble |= _report(one, outcome, held, project)
        recorder.finish(0)
    finally:
        os.close(lock)
    unmatched = [given for given in wanted if given not in matched]
    if unmatched:
        print(f"stockade: nothing staged at {', '.join(shown(os.path.relpath(p)) for p in unmatched)}")
        trouble = True
    if trouble:
        raise typer.Exit(1)


def _chosen(
    state: str, project: str, found: list[stage.Stage], wanted: list[str], matched: set[str]
) -> Iterator[tuple[stage.Stage, list[Unit], list[Unit]]]:
    """Each of the found stages, read again under the project's lock: (stage, its units with any tree a
    path names split, the units the paths name); the paths some unit answers are added to `matched`."""
    numbers = {item.number for item in found}
    for one in stage.pending(state, project):
        if one.number not in numbers:
            continue
        units, _unmatched = stage.select(one.units, one.upper, wanted, project)
        chosen = [unit for unit in units if not wanted or stage.named(unit, wanted, project)]
        matched |= {given for given in wanted if any(stage.named(unit, [given], project) for unit in chosen)}
        yield one, units, chosen


def _say_held(one: stage.Stage, held: list[Unit]) -> None:
    if held:
        names = ", ".join(shown(str(unit["p"])) for unit in held[:5]) + (" ..." if len(held) > 5 else "")
        print(
            f"stockade: stage {one.number}: held {len(held)} marked change{'s' if len(held) != 1 else ''} ({names}): "
            "name them (`stockade accept PATH`) or give --marked to apply them"
        )


def _report(one: stage.Stage, outcome: applying.Outcome, held: list[Unit], project: str) -> bool:
    if outcome.applied:
        count = len(outcome.applied)
        them = "them" if count != 1 else "it"
        print(f"stockade: stage {one.number}: applied {count} change{'s' if count != 1 else ''} (`stockade undo` takes {them} back)")
    for path, why in outcome.conflicts:
        print(f"  conflict: {shown(path)}: {why}")
    for path, why in outcome.failed:
        print(f"  failed: {shown(path)}: {why}")
    if outcome.conflicts:
        print(
            f"stockade: stage {one.number}: {len(outcome.conflicts)} change{'s' if len(outcome.conflicts) != 1 else ''} left in the stage; "
            "`stockade review` shows them; `stockade accept --force PATH` applies one over the host's (kept in a checkpoint)"
        )
    _say_held(one, held)
    return bool(outcome.conflicts or outcome.failed)


def reject(paths: PathsArgument = None, number: StageOption = None) -> None:
    state, project, wanted, found = _asked(paths, number)
    if not found:
        raise typer.Exit(1)
    lock = _lock(store.project_folder(state, project))
    matched: set[str] = set()
    try:
        for one, units, chosen in _chosen(state, project, found, wanted, matched):
            if chosen:
                dropped = applying.reject(one, units, chosen)
                print(f"stockade: stage {one.number}: dropped {len(dropped)} change{'s' if len(dropped) != 1 else ''}")
    finally:
        os.close(lock)
    unmatched = [given for given in wanted if given not in matched]
    if unmatched:
        print(f"stockade: nothing staged at {', '.join(shown(os.path.relpath(p)) for p in unmatched)}")
        raise typer.Exit(1)
