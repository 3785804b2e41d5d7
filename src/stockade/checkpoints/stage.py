"""A staged run's changes to the project, kept apart until `stockade accept` applies them.

A staged run sees the project as an overlay (bwrap/parts/layers.py): the host's
project is the lower layer, read as it is; the upper layer is this stage's
`upper` folder, hidden from every sandbox, where the run's writes land. The
host's project never changes during the run.

After the run, the upper folder is read once into units, each one change to one
path, compared with the project as it is then, and written into the stage's
manifest: `put` (the stage's file, link, new folder, whole new tree, or a
folder's mode) or `remove` (the host's entry, a whole tree for a folder). The
manifest is the truth from then on: accept applies units and drops them,
reject drops them, and the stage goes when none is left.

Overlay's own marks are read here and never reach the project: a whiteout (a
character device 0/0) is a removal, a folder marked opaque replaced the host's
folder whole (so each host entry it no longer holds is a removal), and
`user.overlay.*` attributes are stripped from whatever accept moves in.

A unit is marked when the host would run it later without asking (a git hook
or config, an editor's or agent's settings, `.envrc`, a policy file, a setuid
bit) or a deny_write rule matches it: the caller passes the patterns (the
floor's, profiles/floor.py), and `accept` without paths, or an agent's
automatic accept, leaves marked units for review.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import time

from stockade.checkpoints import store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

FOLDER = "stages"
MOUNT = "mount"  # one empty folder per project: each staged run mounts its overlay there, in its own namespace
MANIFEST = "stage.json"
LOCK = "lock"
UPPER = "upper"
WORK = "work"
OVERLAY_XATTR = "user.overlay."
OPAQUE = "user.overlay.opaque"
ORIGIN = "user.overlay.origin"
REMOVAL_WALK_LIMIT = 200_000  # entries of a removed folder looked at for what the floor protects
DENY_WRITE = "deny_write"  # profiles/floor.stage_marks's reason for a deny_write match
PUT = "put"
REMOVE = "remove"
SKIP = "skip"  # a fifo, socket or device the run made: never applied, named in the review
Marks = list[tuple[str, str]]  # (regular expression over the absolute path, why it is marked)


def stages_folder(state_dir: str, project: str) -> str:
    return os.path.join(store.project_folder(state_dir, project), FOLDER)


def mount_point(state_dir: str, project: str) -> str:
    return os.path.join(stages_folder(state_dir, project), MOUNT)


class Stage:
    """One staged run's changes, in its numbered folder under the project's stages folder."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.number = int(os.path.basename(folder))
        self.meta = store.read_meta(folder, MANIFEST)

    def damaged(self) -> str:
        """Why the manifest cannot be trusted (unreadable, not stockade's shape), or "": such a stage
        is left as it is, never read again without its marks, never removed."""
        if not self.meta:
            return "its manifest is missing or unreadable"
        if not isinstance(self.meta.get("began"), int):
            return "its manifest is damaged"
        units = self.meta.get("units")
        if units is not None and (not isinstance(units, list) or not all(_valid_unit(unit) for unit in units)):
            return "its manifest is damaged"
        return ""

    @property
    def upper(self) -> str:
        return os.path.join(self.folder, UPPER)

    @property
    def began(self) -> int:
        """The kernel's coarse clock when the run began: a host entry whose ctime is at or after
        it was changed on the host while the stage was pending."""
        value = self.meta.get("began")
        return value if isinstance(value, int) else 0

    @property
    def command(self) -> list[str]:
        value = self.meta.get("command")
        return [str(word) for word in value] if isinstance(value, list) else []

    @property
    def units(self) -> list[dict[str, object]]:
        value = self.meta.get("units")
        return [unit for unit in value if isinstance(unit, dict)] if isinstance(value, list) else []

    @property
    def read(self) -> bool:
        """The run ended and its upper folder was read into units."""
        return isinstance(self.meta.get("units"), list)

    def live(self) -> bool:
        """The staged run still going (its stockade holds the lock)."""
        return store.held(os.path.join(self.folder, LOCK))

    def save(self, units: list[dict[str, object]]) -> None:
        """The manifest with these units; the stage's folder removed when none is left."""
        if not units:
            remove(self.folder)
            self.meta["units"] = []
            return
        self.meta["units"] = units
        store.write_meta(self.folder, self.meta, MANIFEST)


def remove(folder: str) -> None:
    """A stage's folder, gone: overlay leaves its work folder's own folder unreadable (mode 000),
    which the user may still open up and remove."""
    import shutil

    def opened_up(_function: object, path: str, _error: object) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        except OSError:
            pass

    shutil.rmtree(folder, onerror=opened_up)


UNIT_ACTIONS = frozenset({PUT, REMOVE, SKIP})
UNIT_KINDS = frozenset({"file", "link", "dir", "tree", "other"})


def _valid_unit(unit: object) -> bool:
    """A unit as read_upper writes it: a path inside the project, relative and plain."""
    if not isinstance(unit, dict):
        return False
    path = unit.get("p")
    return (
        isinstance(path, str) and path != "" and not path.startswith("/") and os.path.normpath(path) == path
        and not any(part in ("..", ".") for part in path.split("/"))
        and unit.get("a") in UNIT_ACTIONS and unit.get("k") in UNIT_KINDS
    )  # fmt: skip


def _identity(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_dev, info.st_ino]


def begin(state_dir: str, project: str, meta: dict[str, object]) -> tuple[Stage, int]:
    """A new stage for a run about to start, and the lock it holds while it lives (closed by
    `finish`). Its `began` is taken before the overlay is mounted."""
    folder = stages_folder(state_dir, project)
    os.makedirs(os.path.join(folder, MOUNT), mode=0o700, exist_ok=True)
    _number, run_dir = store.new_run_dir(folder)
    for name in (UPPER, WORK):
        os.mkdir(os.path.join(run_dir, name), 0o700)
    lock = os.open(os.path.join(run_dir, LOCK), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    began = time.clock_gettime_ns(store.CLOCK_REALTIME_COARSE)
    meta = {**meta, "began": began, "started": time.time(), "pid": os.getpid(), "project": project, "project_id": _identity(project)}
    store.write_meta(run_dir, meta, MANIFEST)
    return Stage(run_dir), lock


def stages(state_dir: str, project: str) -> list[Stage]:
    """The project's stages, oldest first (live ones and ones never read included)."""
    folder = stages_folder(state_dir, project)
    try:
        names = sorted((name for name in os.listdir(folder) if name.isdigit()), key=int)
    except OSError:
        return []
    return [Stage(os.path.join(folder, name)) for name in names]


def pending(state_dir: str, project: str, troubles: list[tuple[Stage, str]] | None = None) -> list[Stage]:
    """Stages waiting for review: their runs ended (a killed run's stage is read here, late). A stage
    that cannot be used is left as it is and named in `troubles`: one whose manifest is damaged or
    unreadable, whose folder cannot be read, or that was made for an earlier folder at this path."""
    found: list[Stage] = []
    here = _identity(project)
    for stage in stages(state_dir, project):
        if stage.live():
            continue
        why = stage.damaged()
        made_for = stage.meta.get("project_id")
        if not why and isinstance(made_for, list) and here is not None and made_for != here:
            why = "it was made for an earlier folder at this path"
        if not why and not stage.read:
            marks = stage.meta.get("marks")
            patterns = [(str(p), str(w)) for p, w in marks] if isinstance(marks, list) else []
            try:
                finish(stage, project, patterns)
            except OSError as exc:
                why = f"its folder cannot be read ({exc.strerror or exc})"
            else:
                if not os.path.isdir(stage.folder):
                    continue
        if why:
            if troubles is not None:
                troubles.append((stage, why))
            continue
        if stage.units:
            found.append(stage)
    return found


def finish(stage: Stage, project: str, marks: Marks, lock: int = -1) -> list[dict[str, object]]:
    """Read the run's upper folder into units and write them down; the lock released. Returns
    the units (none: the stage is gone)."""
    try:
        units = read_upper(stage.upper, project, marks)
        stage.save(units)
    finally:
        if lock >= 0:
            os.close(lock)
    return units


# -- reading the upper folder -----------------------------------------------------------------


def read_upper(upper: str, project: str, marks: Marks) -> list[dict[str, object]]:
    """The units the upper folder holds against the project as it is now, parents first."""
    compiled = Matcher(marks)
    units: list[dict[str, object]] = []
    if not os.path.lexists(upper):
        return units  # a stage made and never used (its run did not start), or one applied and removed halfway
    os.listdir(upper)  # OSError where it cannot be read: the stage is left, never taken for an empty one
    _read_folder(upper, "", project, True, compiled, units, 0)
    return units


def _read_folder(upper: str, rel: str, project: str, host_is_folder: bool, marks: Matcher, units: list[dict[str, object]], depth: int) -> None:
    if depth > store.MAX_DEPTH:
        units.append({"p": rel, "a": SKIP, "k": "dir", "why": f"more than {store.MAX_DEPTH} folders deep"})
        return
    folder = os.path.join(upper, rel) if rel else upper
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as exc:
        units.append({"p": rel, "a": SKIP, "k": "dir", "why": exc.strerror or str(exc)})
        return
    for entry in entries:
        path = f"{rel}/{entry.name}" if rel else entry.name
        host = os.path.join(project, path)
        info = entry.stat(follow_symlinks=False)
        there = _lstat(host) if host_is_folder else None
        mark = _mark(host, info, marks)
        if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:  # a whiteout: the run removed it
            if there is not None:
                units.append({"p": path, "a": REMOVE, "k": _kind(there), "was": _kind(there), "mark": _removal_mark(host, there, marks)})
            continue
        if stat.S_ISDIR(info.st_mode):  # a folder runs nothing itself: what it holds is marked
            _read_dir(upper, path, host, info, there, "", project, marks, units, depth)
        elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            if there is not None and _same(os.path.join(upper, path), info, host, there):
                continue
            unit: dict[str, object] = {"p": path, "a": PUT, "k": _kind(info), "m": stat.S_IMODE(info.st_mode), "size": info.st_size}
            unit.update({"was": _kind(there) if there is not None else None, "mark": mark, "origin": _has_xattr(entry.path, ORIGIN)})
            units.append(unit)
        else:
            units.append({"p": path, "a": SKIP, "k": _kind(info), "why": "a fifo, socket or device the run made: never applied"})


def _read_dir(
    upper: str, path: str, host: str, info: os.stat_result, there: os.stat_result | None, mark: str,
    project: str, marks: Matcher, units: list[dict[str, object]], depth: int,
) -> None:  # fmt: skip
    source = os.path.join(upper, path)
    mode = stat.S_IMODE(info.st_mode)
    if there is not None and stat.S_ISDIR(there.st_mode):
        if mode != stat.S_IMODE(there.st_mode):
            units.append({"p": path, "a": PUT, "k": "dir", "m": mode, "was": "dir", "mark": mark})
        if _has_xattr(source, OPAQUE, b"y"):  # replaced whole: what the host holds and the stage does not is removed
            try:
                held = set(os.listdir(source))
                gone = sorted(set(os.listdir(host)) - held)
            except OSError:
                gone = []
            for name in gone:
                lost = _lstat(os.path.join(host, name))
                if lost is not None:
                    kind = _kind(lost)
                    units.append(
                        {"p": f"{path}/{name}", "a": REMOVE, "k": kind, "was": kind, "mark": _removal_mark(os.path.join(host, name), lost, marks)}
                    )
        _read_folder(upper, path, project, True, marks, units, depth + 1)
        return
    inside: list[dict[str, object]] = []
    _read_folder(upper, path, project, False, marks, inside, depth + 1)
    was = _kind(there) if there is not None else None
    if not mark and all(unit["a"] == PUT and not unit.get("mark") for unit in inside):
        files = sum(1 for unit in inside if unit["k"] != "dir")
        size = sum(int(unit.get("size", 0) or 0) for unit in inside)  # type: ignore[call-overload]
        units.append({"p": path, "a": PUT, "k": "tree", "m": mode, "was": was, "mark": "", "files": files, "size": size})
        return
    units.append({"p": path, "a": PUT, "k": "dir", "m": mode, "was": was, "mark": mark})
    units += inside


def tree_units(upper: str, unit: dict[str, object]) -> list[dict[str, object]]:
    """A whole new tree's unit as one unit per entry (the folder first): to take part of it."""
    path = str(unit["p"])
    inside: list[dict[str, object]] = []
    _read_folder(upper, path, "/nonexistent", False, Matcher([]), inside, 0)
    for item in inside:
        item["was"] = None
    return [{"p": path, "a": PUT, "k": "dir", "m": unit.get("m", 0o755), "was": unit.get("was"), "mark": ""}, *_flatten_trees(upper, inside)]


def _flatten_trees(upper: str, units: list[dict[str, object]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for unit in units:
        out += tree_units(upper, unit) if unit["k"] == "tree" else [unit]
    return out


def files_of(upper: str, unit: dict[str, object]) -> Iterator[str]:
    """The paths a unit puts in place: itself, or each file and link of a whole new tree."""
    path = str(unit["p"])
    if unit["k"] != "tree":
        yield path
        return
    for root, folders, files in os.walk(os.path.join(upper, path)):
        folders.sort()
        for name in sorted(files):
            yield os.path.relpath(os.path.join(root, name), upper)


def _removal_mark(host: str, info: os.stat_result, marks: Matcher) -> str:
    """A removal runs nothing later, but one the floor would have stopped is marked: a deny_write
    match, or a folder holding what the floor protects (a repository's git dir, hooks, settings),
    which an unstaged run could not have removed either."""
    why = _mark(host, info, marks)
    if why == DENY_WRITE or not stat.S_ISDIR(info.st_mode):
        return why if why == DENY_WRITE else ""
    if os.path.basename(host) == ".git" or why:
        return f"removes {os.path.basename(host)}, which the floor protects ({why or 'a git dir'})"
    seen = 0
    for root, folders, files in os.walk(host):
        for name in (*folders, *files):
            seen += 1
            inner = os.path.join(root, name)
            inner_why = marks.why(inner) or ("a git dir" if name == ".git" else "")
            if inner_why and inner_why != DENY_WRITE:
                return f"removes {os.path.relpath(inner, os.path.dirname(host))}, which the floor protects ({inner_why})"
        if seen > REMOVAL_WALK_LIMIT:
            return f"removes a folder of more than {REMOVAL_WALK_LIMIT:,} entries (not all looked at)"
    return ""


class Matcher:
    """The marks' patterns, compiled at the first path they judge (a run that changed nothing pays none)."""

    def __init__(self, marks: Marks) -> None:
        self.marks = marks
        self.compiled: re.Pattern[str] | None = None

    def why(self, path: str) -> str:
        if not self.marks:
            return ""
        if self.compiled is None:  # one pattern of them all: one call per path, not one per mark
            self.compiled = re.compile("|".join(f"(?P<m{index}>{pattern})" for index, (pattern, _why) in enumerate(self.marks)))
        found = self.compiled.fullmatch(path)
        if found is None or found.lastgroup is None:
            return ""
        return self.marks[int(found.lastgroup[1:])][1]


def _mark(host: str, info: os.stat_result, marks: Matcher) -> str:
    why = marks.why(host)
    if why:
        return why
    if stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
        return "setuid or setgid"
    return ""


def _kind(info: os.stat_result) -> str:
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _has_xattr(path: str, name: str, value: bytes | None = None) -> bool:
    try:
        found = os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return False
    return value is None or found == value


def _same(staged: str, info: os.stat_result, host: str, there: os.stat_result) -> bool:
    """The stage's entry equals the host's (kind, mode, content): a write that changed nothing."""
    if stat.S_IFMT(info.st_mode) != stat.S_IFMT(there.st_mode):
        return False
    if stat.S_ISLNK(info.st_mode):
        try:
            return os.readlink(staged) == os.readlink(host)
        except OSError:
            return False
    if stat.S_IMODE(info.st_mode) != stat.S_IMODE(there.st_mode) or info.st_size != there.st_size:
        return False
    try:
        with open(staged, "rb") as one, open(host, "rb") as other:
            size = 1 << 13  # most changed files differ early: a small first read
            while True:
                a, b = one.read(size), other.read(size)
                size = 1 << 20
                if a != b:
                    return False
                if not a:
                    return True
    except OSError:
        return False


def select(units: Sequence[dict[str, object]], upper: str, paths: Sequence[str], project: str) -> tuple[list[dict[str, object]], list[str]]:
    """(the units, each whole tree a path names part of split into its entries; the paths no unit
    is at or under). Paths are absolute."""
    wanted = [os.path.relpath(path, project) for path in paths]
    wanted = ["" if path == "." else path for path in wanted]
    out: list[dict[str, object]] = []
    for unit in units:
        path = str(unit["p"])
        if unit["k"] == "tree" and any(w and w != path and w.startswith(path + "/") for w in wanted):
            out += tree_units(upper, unit)
        else:
            out.append(unit)
    unmatched = [paths[i] for i, w in enumerate(wanted) if not any(_under(str(u["p"]), w) for u in out)]
    return out, unmatched


def _under(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder + "/")


def named(unit: dict[str, object], paths: Sequence[str], project: str) -> bool:
    """Whether one of the (absolute) paths is the unit's, or holds it."""
    path = str(unit["p"])
    for given in paths:
        rel = os.path.relpath(given, project)
        if _under(path, "" if rel == "." else rel):
            return True
    return False


def named_exactly(unit: dict[str, object], paths: Sequence[str], project: str) -> bool:
    return any(os.path.relpath(given, project) == unit["p"] for given in paths)
