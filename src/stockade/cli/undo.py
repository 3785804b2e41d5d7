"""`stockade runs` and `stockade undo`: every run's changes to the project, and getting them back.

Each run that changes the project (or another writable place) leaves a
checkpoint (checkpoints/store.py). `runs` lists them, newest last; `runs N`
names what run N changed. `undo` puts back the state before the last run not
undone yet; `undo N` one given run, when nothing since changed its paths (it
names those that did, and `--force` goes on anyway). An undo keeps whatever it
replaces in a checkpoint of its own: `undo` of an undo redoes the run.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import TYPE_CHECKING, Annotated

import typer

from stockade.checkpoints import history, restore, store
from stockade.core.errors import UsageError
from stockade.core.locations import locate
from stockade.profiles.text import shown

if TYPE_CHECKING:
    from collections.abc import Callable


def _project(state_dir: str) -> str:
    """The project whose checkpoints to use: the nearest folder from here up that has some."""
    here = os.path.realpath(os.getcwd())
    folder = here
    while True:
        if os.path.isdir(store.project_folder(state_dir, folder)):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return here
        folder = parent


def _when(moment: float) -> str:
    seconds = max(0.0, time.time() - moment)
    if seconds < 60:
        return "just now"
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


def _command_words(run: history.Run) -> str:
    if run.redo:
        return f"(run {run.run} made again)"
    if run.kind == "undo":
        return f"(undo of run {run.run})"
    import shlex

    return shown(shlex.join(run.command)) if run.command else "?"


def _counts(run: history.Run) -> str:
    counts = run.counts
    words = [f"{counts[key]} {key}" for key in ("new", "changed", "removed") if counts.get(key)]
    if counts.get("lost"):
        words.append(f"{counts['lost']} not kept")
    unseen = run.meta.get("unseen")
    if isinstance(unseen, int) and unseen:
        words.append(f"{unseen} not followed")
    return ", ".join(words) or "nothing"


def _relative(path: str, project: str) -> str:
    return shown(os.path.relpath(path, project) if store.within(path, project) else path)


def _number(word: str) -> int:
    if not word.isdigit():
        raise UsageError(f"RUN is a run's number as `stockade runs` lists them, not {word!r}")
    return int(word)


def _find(found: list[history.Run], number: int) -> history.Run:
    for run in found:
        if run.number == number:
            return run
    if not found:
        raise UsageError(f"no run {number}: no run has a checkpoint in this project")
    known = ", ".join(str(run.number) for run in found[-5:])
    raise UsageError(f"no run {number} has a checkpoint in this project (the latest: {known}); `stockade runs` lists them")


RECENT = 20  # runs listed without --all


def runs(
    run: Annotated[str | None, typer.Argument(help="A run's number: what it changed, path by path.", metavar="RUN")] = None,
    every: Annotated[bool, typer.Option("--all", help=f"List every checkpoint kept, not only the last {RECENT}.")] = False,
) -> None:
    state = str(locate().state)
    project = _project(state)
    found = history.runs(state, project)
    if run is not None:
        _show_one(_find(found, _number(run)), project)
        return
    if not found:
        print(f"stockade: no run has changed {shown(project)} yet (or their checkpoints were pruned)")
        return
    print(f"runs that changed {shown(project)}, the newest last:")
    older = 0 if every else max(0, len(found) - RECENT)
    if older:
        print(f"  ({older} older {'run' if older == 1 else 'runs'}: `stockade runs --all` lists them)")
    for entry in found[older:]:
        state_words = "running" if entry.live() else ("undone" if entry.undone_by is not None else "")
        status = entry.meta.get("status")
        exit_words = "killed" if entry.meta.get("killed") else (f"exit {status}" if isinstance(status, int) else "")
        tail = ", ".join(word for word in (exit_words, state_words) if word)
        print(f"{entry.number:>5}  {_when(entry.started):<15} {_counts(entry):<32} {_command_words(entry)}{f'  ({tail})' if tail else ''}")
    print("`stockade runs RUN` names a run's paths; `stockade undo` puts back what the last run not undone changed")


def _show_one(run: history.Run, project: str) -> None:
    print(f"run {run.number}, {_when(run.started)}: {_command_words(run)}")
    after = run.after()
    for path, entry in run.records().items():
        kind = entry.get("k")
        now_there = after.get(path, store.path_stamp(path)) is not None
        if kind == "lost":
            what = f"not kept ({entry.get('why')})"
        elif kind == "absent":
            if not now_there:
                continue
            what = "new"
        else:
            what = "changed" if now_there else "removed"
        print(f"  {what:<10} {_relative(path, project)}")


def undo(
    run: Annotated[
        str | None, typer.Argument(help="The run to undo, or an undo to take back (default: the last run not undone).", metavar="RUN")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Undo even over paths changed since (they are kept in the undo's checkpoint).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what undo would do and what stops it, and do nothing.")] = False,
) -> None:
    state = str(locate().state)
    project = _project(state)
    folder = store.project_folder(state, project)
    if not os.path.isdir(folder):
        print(f"stockade: nothing to undo in {shown(project)}: no run has changed it (or its checkpoints were pruned)")
        raise typer.Exit(1)
    lock = _lock(folder)
    try:
        found = history.runs(state, project)
        target = _find(found, _number(run)) if run is not None else history.latest_undoable(found)
        if target is None:
            last = found[-1] if found else None
            if last is not None and last.kind == "undo" and not last.redo and last.undone_by is None:
                print(
                    f"stockade: nothing left to undo in {shown(project)}: the last change was undo {last.number} of run {last.run}; "
                    f"`stockade undo {last.number}` makes run {last.run}'s changes again"
                )
            else:
                print(f"stockade: nothing to undo in {shown(project)}: every run's checkpoint left is undone")
            raise typer.Exit(1)
        going = [run.number for run in found if run.live()]
        if going:
            numbers = ", ".join(str(number) for number in going)
            raise UsageError(f"a run is still going in this project (run {numbers}); undo once it has ended")
        if target.undone_by is not None:
            print(_already(target, found))
            raise typer.Exit(1)
        _say_pending_stages(state, project)
        problems = restore.conflicts(target, found)
        if dry_run:
            for path, what in restore.plan(target):
                print(f"  {what:<10} {_relative(path, project)}")
        if problems and not force:
            for path, why in problems:
                print(f"  {_relative(path, project)}: {why}")
            paths = f"{len(problems)} path{'s' if len(problems) != 1 else ''}"
            print(
                f"stockade: undo of {_named(target)} {'would stop' if dry_run else 'stopped'}: {paths} changed since; "
                f"`stockade undo {target.number} --force` puts its checkpoint back over them (what is there now is kept in the undo's "
                "own checkpoint, which `stockade undo` of that undo brings back)"
            )
            raise typer.Exit(1)
        if dry_run:
            return
        _undo(target, found, folder, project)
    finally:
        os.close(lock)


def _say_pending_stages(state: str, project: str) -> None:
    """Undo acts on what reached the project; a staged run's changes did not (cli/review.py)."""
    from stockade.checkpoints.stage import pending

    waiting = [str(one.number) for one in pending(state, project)]
    if waiting:
        print(f"stockade: note: stage {', '.join(waiting)} waits for review and is not in the project: undo leaves it; `stockade reject` drops it")


def _named(entry: history.Run) -> str:
    if entry.redo:
        return f"run {entry.run} (made again as {entry.number})"
    if entry.kind == "undo":
        return f"undo {entry.number} of run {entry.run}"
    return f"run {entry.number}"


def _already(target: history.Run, found: list[history.Run]) -> str:
    """Where the chain of undos from `target` ends, and the command that goes one step further."""
    end = history.last_of(target, found)
    if end.kind == "undo" and not end.redo:
        return f"stockade: {_named(target)} was undone already (undo {end.number}); `stockade undo {end.number}` makes run {end.run}'s changes again"
    return f"stockade: {_named(target)} was undone and made again since (as {end.number}); `stockade undo {end.number}` undoes it"


def _undo(target: history.Run, found: list[history.Run], folder: str, project: str) -> None:
    meta: dict[str, object] = {"kind": "undo", "undoes": target.number, "run": target.run, "command": ["stockade", "undo", str(target.number)]}
    meta["project"] = project
    redo = target.kind == "undo" and not target.redo
    if redo:  # undoing an undo makes the run's changes again: this checkpoint then stands for that run
        meta["redoes"] = target.run
    roots = target.meta.get("roots")
    places = tuple(str(root) for root in roots) if isinstance(roots, list) and roots else (project,)
    recorder = store.Recorder(folder, project, restore.UNLIMITED, meta, places)
    try:
        outcome = restore.undo(target, recorder, _floor_guard(places, target.floor_before()))
    finally:
        recorder.finish(0)
    target.update(undone_by=recorder.number)
    done = f"{outcome.restored} put back, {outcome.removed} removed"
    if redo:
        print(f"stockade: run {target.run} made again: {done}; `stockade undo` undoes it again")
    else:
        again = f"; `stockade undo {recorder.number}` makes its changes again" if recorder.number else ""
        print(f"stockade: {_named(target)} undone: {done}{again}")
    for path, why in outcome.refused:
        print(f"stockade: not put back: {_relative(path, project)}: {why}")
    unseen = target.meta.get("unseen")
    if isinstance(unseen, int) and unseen:
        print(
            f"stockade: run {target.run} made {unseen} call{'s' if unseen != 1 else ''} its checkpoint could not follow "
            "(a path through a link into /proc, or too long): what they changed is not put back"
        )
    for path in outcome.lost:
        why = outcome.failed.get(path, "the run's checkpoint did not keep it")
        print(f"stockade: could not put back {_relative(path, project)}: {why}")
    for path, why in outcome.failed.items():
        if path not in outcome.lost:
            print(f"stockade: could not move {_relative(path, project)} aside: {why}")


def _floor_guard(places: tuple[str, ...], before: dict[str, list[int]]) -> Callable[[str, dict[str, object]], str | None]:
    """Undo puts back a file that runs code later (a hook, .envrc, an agent's settings: what the
    floor sweeps) only as planning found it before the run (same inode, size and mtime), or as
    stockade itself recorded it (git's config carried back, what an undo moved aside). A sandbox
    that slipped a change past its checkpoint (a race, a path the thread cannot follow, a folder
    renamed over the file's name) and then had it recorded would otherwise have undo plant it
    past the floor's sweep."""
    import re

    from stockade.profiles.floor import swept_patterns
    from stockade.profiles.paths import glob_to_regex

    matchers = [re.compile(glob_to_regex(pattern)) for place in places for pattern in swept_patterns(place)]

    def refuse(path: str, entry: dict[str, object]) -> str | None:
        if entry.get("by") == "stockade" or not any(matcher.match(path) for matcher in matchers):
            return None
        found, recorded = before.get(path), entry.get("s")
        if found is not None and isinstance(recorded, list) and [*recorded, entry.get("t")] == [found[0], found[1], found[2]]:
            return None  # there, as it was, before the run
        return "a file that runs code later which was not there like this before the run"

    return refuse


def _lock(folder: str) -> int:
    """One undo at a time in a project."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(folder, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot open the checkpoints of this project in {folder}: {exc.strerror or exc}") from None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
