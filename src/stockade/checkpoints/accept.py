"""Applying a stage's units to the project (`stockade accept`), or dropping them (`reject`).

Every unit is checked before any is applied: a host entry it would replace or
remove that changed after the run began (its ctime, or anything's in a folder,
at or after the stage's `began`) is a conflict, reported and left in the stage,
never overwritten unless forced. What accept replaces or removes is first
taken into a checkpoint of its own (store.Recorder.take_away), so `stockade
undo` takes an accept back like any run, forced or not.

The project is reached one real folder at a time from its root (beneath.py):
a link on the host where the stage has a folder is replaced only by the unit
that says so, never followed. The stage's entries move into place by rename
(one call for a whole new tree, `node_modules` included), or are copied where
the stage lies on another filesystem.
"""

from __future__ import annotations

import errno
import os
import stat

from stockade.checkpoints import beneath, stage, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

Unit = dict[str, object]


class Outcome:
    """What one accept did: applied, left as conflicts (path, why), failed (path, why)."""

    def __init__(self) -> None:
        self.applied: list[str] = []
        self.conflicts: list[tuple[str, str]] = []
        self.failed: list[tuple[str, str]] = []


def with_parents(chosen: Sequence[Unit], units: Sequence[Unit]) -> list[Unit]:
    """`chosen` and every folder unit above one of them: a file is put in place only with the folder
    the stage made for it (or put where the host had a file or link)."""
    paths = {str(unit["p"]) for unit in chosen}
    folders = {str(unit["p"]): unit for unit in units if unit["a"] == stage.PUT and unit["k"] == "dir"}
    wanted = set(paths)
    for path in paths:
        parent = os.path.dirname(path)
        while parent and parent not in ("/", "."):
            if parent in folders:
                wanted.add(parent)
            parent = os.path.dirname(parent)
    return [unit for unit in units if str(unit["p"]) in wanted]


def conflicts(chosen: Sequence[Unit], project: str, began: int) -> dict[str, str]:
    """Each chosen unit's conflict with what the host did after the run began, by path."""
    found: dict[str, str] = {}
    making = {str(unit["p"]) for unit in chosen if unit["a"] == stage.PUT and unit["k"] in ("dir", "tree")}
    for unit in chosen:
        if unit["a"] == stage.SKIP:
            continue
        why = _conflict(unit, project, began, making)
        if why:
            found[str(unit["p"])] = why
    return found


def _conflict(unit: Unit, project: str, began: int, making: set[str]) -> str:
    path = str(unit["p"])
    host = os.path.join(project, path)
    try:
        folder, name = beneath.open_parent(host, (project,))
    except OSError as exc:
        if any(path.startswith(made + "/") for made in making):
            return ""  # its folder is one this accept makes
        if exc.errno == errno.ENOENT:
            return "" if unit["a"] == stage.REMOVE else "its folder is gone from the project"
        return "a link or file on the host stands where its folder was"
    try:
        try:
            info: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is None:
            if unit["a"] == stage.PUT and unit.get("was") is not None:
                return "removed on the host after the run began"
            if unit["a"] == stage.PUT and unit.get("origin") and os.fstat(folder).st_ctime_ns >= began:
                return "its folder changed on the host after the run began (removed there?)"
            return ""
        if unit["a"] == stage.PUT and unit["k"] == "dir" and stat.S_ISDIR(info.st_mode):
            if unit.get("was") == "dir" and info.st_ctime_ns >= began:  # its mode: the run's, or the host's chmod since?
                return "the folder changed on the host after the run began (its mode may be the host's own)"
            return ""  # a folder already there: its entries are units of their own
        if unit.get("was") is None and unit["a"] == stage.PUT:
            return "made on the host after the run began"
        if _changed_since(folder, name, info, began):
            return "changed on the host after the run began"
        return ""
    finally:
        os.close(folder)


def _changed_since(folder: int, name: str, info: os.stat_result, began: int) -> bool:
    if info.st_ctime_ns >= began:
        return True
    if not stat.S_ISDIR(info.st_mode):
        return False
    try:
        listing = beneath.open_listing(name, folder)
    except OSError:
        return True
    try:
        for _path, inner, _folder, _name in store.walk(listing, name):
            if inner.st_ctime_ns >= began:
                return True
    finally:
        os.close(listing)
    return False


def accept(the_stage: stage.Stage, project: str, units: Sequence[Unit], chosen: Sequence[Unit], recorder: store.Recorder, force: bool) -> Outcome:
    """Apply `chosen` (of `units`, the stage's with any tree split by stage.select; with_parents
    already added), removals first, then puts parents first; the manifest keeps the rest."""
    outcome = Outcome()
    done: set[str] = set()
    for unit in chosen:  # put in place already by an accept killed halfway: nothing left to move
        if unit["a"] == stage.PUT and unit["k"] != "dir" and not os.path.lexists(os.path.join(the_stage.upper, str(unit["p"]))):
            done.add(str(unit["p"]))
    chosen = [unit for unit in chosen if str(unit["p"]) not in done]
    found = {} if force else conflicts(chosen, project, the_stage.began)
    order = sorted(chosen, key=lambda unit: (unit["a"] != stage.REMOVE, str(unit["p"]).count("/"), str(unit["p"])))
    blocked: list[str] = []
    for unit in order:
        path = str(unit["p"])
        if unit["a"] == stage.SKIP:
            continue
        if path in found:
            outcome.conflicts.append((path, found[path]))
            if not (unit["k"] == "dir" and unit.get("was") == "dir"):  # a folder's mode alone: what is in it goes on
                blocked.append(path)
            continue
        if any(path.startswith(other + "/") for other in blocked):
            outcome.conflicts.append((path, "its folder is in conflict"))
            continue
        try:
            _apply(the_stage.upper, project, unit, recorder)
        except (OSError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            outcome.failed.append((path, why))
            blocked.append(path)
            continue
        done.add(path)
        outcome.applied.append(path)
    the_stage.save([unit for unit in units if str(unit["p"]) not in done])
    return outcome


def _apply(upper: str, project: str, unit: Unit, recorder: store.Recorder) -> None:
    path = str(unit["p"])
    host = os.path.join(project, path)
    if unit["a"] == stage.REMOVE:
        recorder.take_away(host)
        return
    folder, name = _host_parent(host, project, recorder)
    try:
        try:
            there: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        mode = int(unit.get("m", 0o755))  # type: ignore[call-overload]
        if unit["k"] == "dir":
            if there is not None and stat.S_ISDIR(there.st_mode):
                recorder.changing(host, store.META_CHANGE)
            else:
                recorder.take_away(host)
                os.mkdir(name, 0o700, dir_fd=folder)
            _chmod_folder(folder, name, mode)
            return
        source_folder, source_name = beneath.open_parent(os.path.join(upper, path), (upper,))
        try:
            os.stat(source_name, dir_fd=source_folder, follow_symlinks=False)  # FileNotFoundError: applied already
            _strip_marks(source_folder, source_name)
            recorder.take_away(host)
            try:
                os.rename(source_name, name, src_dir_fd=source_folder, dst_dir_fd=folder)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                store.copy_at(source_folder, source_name, folder, name)
                store.remove_at(source_folder, source_name)
        finally:
            os.close(source_folder)
    finally:
        os.close(folder)


def _host_parent(host: str, project: str, recorder: store.Recorder) -> tuple[int, str]:
    """The host folder that holds `host`, its missing folders made (recorded absent first, so undo
    takes them away again)."""
    try:
        return beneath.open_parent(host, (project,))
    except FileNotFoundError:
        pass
    missing = os.path.dirname(host)
    while not os.path.lexists(os.path.dirname(missing)) and os.path.dirname(missing) != project:
        missing = os.path.dirname(missing)
    recorder.changing(missing, store.CREATE)
    return beneath.open_parent(host, (project,), make=True)


def _chmod_folder(folder: int, name: str, mode: int) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _strip_marks(folder: int, name: str) -> None:
    """Overlay's own attributes off the entry (and all of a tree): they mean nothing in the project."""
    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        return
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_DIRECTORY if stat.S_ISDIR(info.st_mode) else 0), dir_fd=folder)
    try:
        for attribute in os.listxattr(fd):
            if attribute.startswith(stage.OVERLAY_XATTR):
                os.removexattr(fd, attribute)
        if stat.S_ISDIR(info.st_mode):
            for entry in list(os.scandir(fd)):
                _strip_marks(fd, entry.name)
    finally:
        os.close(fd)


def reject(the_stage: stage.Stage, units: Sequence[Unit], chosen: Sequence[Unit]) -> list[str]:
    """Drop `chosen` (of `units`, as for accept) from the stage, their files with them; the paths dropped."""
    dropped = {str(unit["p"]) for unit in chosen}
    for unit in chosen:
        if unit["a"] == stage.PUT and unit["k"] != "dir":
            try:
                store.remove_any(os.path.join(the_stage.upper, str(unit["p"])))
            except OSError:
                pass  # the manifest is the truth: a leftover file goes with the stage
    the_stage.save([unit for unit in units if str(unit["p"]) not in dropped])
    return sorted(dropped)
