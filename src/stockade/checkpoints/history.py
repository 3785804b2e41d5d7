"""A project's checkpoints: listed, read, settled after a killed run, and pruned to the limits."""

from __future__ import annotations

import json
import os
import shutil
import time

from stockade.checkpoints import store


class Run:
    """One checkpoint: a run's (kind "run") or an undo's (kind "undo")."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.number = int(os.path.basename(folder))
        self.meta = store.read_meta(folder)

    @property
    def kind(self) -> str:
        return str(self.meta.get("kind", "run"))

    @property
    def run(self) -> int:
        """The run whose changes this checkpoint is about: its own number, or the run an undo undid
        or a redo made again."""
        value = self.meta.get("run", self.meta.get("redoes", self.meta.get("undoes")))
        return value if isinstance(value, int) and self.kind == "undo" else self.number

    @property
    def redo(self) -> bool:
        """An undo of an undo: the run's changes made again."""
        return self.kind == "undo" and self.meta.get("redoes") is not None

    @property
    def undone_by(self) -> int | None:
        value = self.meta.get("undone_by")
        return value if isinstance(value, int) else None

    @property
    def started(self) -> float:
        value = self.meta.get("started")
        return float(value) if isinstance(value, (int, float)) else _mtime(self.folder)

    @property
    def size(self) -> int:
        value = self.meta.get("size")
        return value if isinstance(value, int) else 0

    @property
    def counts(self) -> dict[str, int]:
        value = self.meta.get("counts")
        return {str(k): int(v) for k, v in value.items() if isinstance(v, int)} if isinstance(value, dict) else {}

    @property
    def command(self) -> list[str]:
        value = self.meta.get("command")
        return [str(word) for word in value] if isinstance(value, list) else []

    def live(self) -> bool:
        """A run still going (its stockade holds the lock on its records)."""
        return store.held(os.path.join(self.folder, store.RECORDS))

    def records(self) -> dict[str, dict[str, object]]:
        """Each path's record, in the order first recorded; a later record of the same path (a folder
        recorded again whole) replaces the earlier one's kind. A last line cut short is left out: the
        change it was written for never went on."""
        return {str(entry["p"]): entry for entry in _entries(os.path.join(self.folder, store.RECORDS))}

    def after(self) -> dict[str, list[int] | None]:
        """Each recorded path's state when the run ended (None: absent)."""
        found: dict[str, list[int] | None] = {}
        for entry in _entries(os.path.join(self.folder, store.AFTER)):
            stamp = entry.get("s")
            found[str(entry["p"])] = stamp if isinstance(stamp, list) else None
        return found

    def floor_before(self) -> dict[str, list[int]]:
        """The runs-later files planning found before the run, path: [inode, size, mtime, ctime]."""
        try:
            with open(os.path.join(self.folder, store.FLOOR_BEFORE), "rb") as handle:
                data = json.loads(handle.read().decode("utf-8", "surrogateescape"))
        except (OSError, ValueError):
            return {}
        return {str(path): stamp for path, stamp in data.items() if isinstance(stamp, list)} if isinstance(data, dict) else {}

    def data(self, name: str) -> str:
        return os.path.join(self.folder, store.DATA, name)

    @property
    def pack(self) -> str:
        return os.path.join(self.folder, store.PACK)

    def update(self, **values: object) -> None:
        self.meta.update(values)
        store.write_meta(self.folder, self.meta)


def runs(state_dir: str, project: str) -> list[Run]:
    """The project's checkpoints, oldest first; a killed run's is settled on the way."""
    folder = store.project_folder(state_dir, project)
    try:
        names = [name for name in os.listdir(folder) if name.isdigit()]
    except OSError:
        return []
    found = []
    for name in sorted(names, key=int):
        run = Run(os.path.join(folder, name))
        if "ended" not in run.meta and not run.live():
            settle(run)
        found.append(run)
    return found


def settle(run: Run) -> None:
    """A run killed before it finished (its stockade gone): its states after taken now, counted."""
    after, counts = store.states_after((path, str(entry.get("k"))) for path, entry in run.records().items())
    try:
        store.write_atomic(os.path.join(run.folder, store.AFTER), after)
        run.update(ended=_mtime(os.path.join(run.folder, store.RECORDS)), status=None, counts=counts, killed=True)
    except OSError:
        pass


def latest_undoable(history: list[Run]) -> Run | None:
    """The last change nobody undid: a run's, or a redo's (an undo of an undo, which made a run's
    changes again; the run's own checkpoint went back into the project at its undo)."""
    for run in reversed(history):
        if (run.kind == "run" or run.redo) and run.undone_by is None and not run.live():
            return run
    return None


def last_of(run: Run, history: list[Run]) -> Run:
    """Where a chain of undos and redos from `run` ends: the entry nobody undid."""
    by_number = {entry.number: entry for entry in history}
    seen = {run.number}
    while run.undone_by is not None and run.undone_by in by_number and run.undone_by not in seen:
        run = by_number[run.undone_by]
        seen.add(run.number)
    return run


def prune(state_dir: str, project: str, max_size: int, max_age: float, keep: int = 0) -> None:
    """Checkpoints older than `max_age`, then the oldest until the rest fit in `max_size`; never a
    live run's or `keep`'s."""
    history = runs(state_dir, project)
    now = time.time()
    total = sum(run.size for run in history)
    for run in history:
        if run.number == keep or run.live():
            continue
        # an undo's checkpoint holds what the user had before the undo: only age removes it (a run
        # cannot grow its own checkpoint to have them pruned)
        if now - run.started > max_age or (total > max_size and run.kind != "undo"):
            total -= run.size
            shutil.rmtree(run.folder, ignore_errors=True)


def _entries(path: str) -> list[dict[str, object]]:
    """The JSON objects with a path ("p") of a file of lines; a line cut short is left out."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    found = []
    for line in data.split(b"\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("p"), str):
            found.append(entry)
    return found


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
