"""A staged run: its stage made before bwrap starts, read after it ends, and accepted at once where
the policy says so ([checkpoints] accept = "unmarked"); the lines the user reads about it."""

from __future__ import annotations

import os

from stockade.checkpoints import stage
from stockade.core.errors import SandboxSetupError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.checkpoints.store import Recorder

HELD_SHOWN = 5  # marked paths named in the line after an automatic accept


class StagedRun:
    """One run's stage (checkpoints/stage.py): `layer` is the overlay the child mounts."""

    def __init__(self, state_dir: str, project: str, command: list[str], cwd: str, rules: dict[str, object]) -> None:
        self.project = project
        self.state_dir = state_dir
        marks = rules.get("marks")
        self.marks: list[tuple[str, str]] = [(str(p), str(w)) for p, w in marks] if isinstance(marks, list) else []
        self.accept = str(rules.get("accept", "review"))
        inside = _mount_points_in(project)
        if inside:
            raise SandboxSetupError(
                f"cannot stage the project {project}: it holds a mount point ({inside[0]}), which an overlay of the project "
                "cannot show; run it without --stage (or [checkpoints] stage = false)"
            )
        try:
            self.stage, self.lock = stage.begin(state_dir, project, {"command": command, "cwd": cwd, "marks": self.marks})
        except OSError as exc:
            raise SandboxSetupError(
                f"cannot make the stage for a staged run in {stage.stages_folder(state_dir, project)}: {exc.strerror or exc}; "
                "stockade's state folder must be yours and writable"
            ) from None
        self.layer = (project, self.stage.upper, os.path.join(self.stage.folder, stage.WORK), str(rules["mount"]))
        self.lines: list[str] = []
        self.done = False

    def discard(self) -> None:
        """The run never started: its stage goes."""
        self.done = True
        os.close(self.lock)
        stage.remove(self.stage.folder)

    def finish(self, recorder: Recorder | None, command: list[str], cwd: str) -> None:
        """Read the stage; accept what the policy accepts at once (recorded in `recorder`, the run's
        checkpoint, or one of its own); say what waits."""
        if self.done:
            return
        self.done = True
        try:
            units = stage.finish(self.stage, self.project, self.marks, self.lock)
        except OSError as exc:
            self.lines.append(f"stockade: this run's stage {self.stage.folder} could not be read ({exc.strerror or exc}); it is kept as it is")
            return
        if not units:
            return
        units, found = self._mark_git_dirs(units)
        if self._unmark_inert_configs(units) or found:
            self.stage.save(units)
        applied = 0
        if self.accept == "unmarked":
            applied, units = self._accept_unmarked(units, recorder, command, cwd)
        self._say(units, applied)

    def _mark_git_dirs(self, units: list[dict[str, object]]) -> tuple[list[dict[str, object]], bool]:
        """A git dir under any name (a bare repository in src/, a module's): its config, hooks,
        commondir and attributes run code when the host's git works there, as bwrap/after/gitcheck.py
        judges for an unstaged run. A whole new tree holding one is taken apart to mark them."""
        changed = False
        out: list[dict[str, object]] = []
        for unit in units:
            if unit["k"] == "tree" and self._holds_git_dir(str(unit["p"])):
                out += stage.tree_units(self.stage.upper, unit)
                changed = True
            else:
                out.append(unit)
        for unit in out:
            if unit.get("mark") or unit["a"] != stage.PUT or unit["k"] not in ("file", "link"):
                continue
            folder = _git_dir_of(str(unit["p"]))
            if folder is not None and self._git_dir_like(folder):
                unit["mark"] = f"git runs it later (the repository in {folder or '.'})"
                changed = True
        return out, changed

    def _holds_git_dir(self, path: str) -> bool:
        for root, folders, _files in os.walk(os.path.join(self.stage.upper, path)):
            if "objects" in folders and "refs" in folders and os.path.isfile(os.path.join(root, "HEAD")):
                return True
        return False

    def _git_dir_like(self, folder: str) -> bool:
        """HEAD, objects and refs in the folder as the host will see it (the stage over the project)."""
        places = [os.path.join(base, folder) for base in (self.stage.upper, self.project)]
        return (
            any(os.path.isfile(os.path.join(place, "HEAD")) for place in places)
            and any(os.path.isdir(os.path.join(place, "objects")) for place in places)
            and any(os.path.isdir(os.path.join(place, "refs")) for place in places)
        )

    def _unmark_inert_configs(self, units: list[dict[str, object]]) -> bool:
        """A git config the run changed only as git's ordinary work does (a remote added, a branch's
        upstream set: gitstage.inert_change) needs no review; any other change stays marked."""
        from stockade.bwrap.after.gitcheck import inert_config
        from stockade.bwrap.running.gitstage import inert_change

        changed = False
        for unit in units:
            path = str(unit["p"])
            if not unit.get("mark") or unit["a"] != stage.PUT or unit["k"] != "file":
                continue
            staged, host = os.path.join(self.stage.upper, path), os.path.join(self.project, path)
            if os.path.basename(path) == "config" and _git_dir_of(path) is not None:
                # a new repository's (git init, git clone) judged whole, as the check after an unstaged run does
                inert = inert_config(staged) if unit.get("was") is None else inert_change(host, staged)
            else:
                inert = "/hooks/" in f"/{path}" and path.endswith(".sample") and _git_dir_of(path) is not None  # never run
            if inert:
                unit["mark"] = ""
                changed = True
        return changed

    def _accept_unmarked(
        self, units: list[dict[str, object]], recorder: Recorder | None, command: list[str], cwd: str
    ) -> tuple[int, list[dict[str, object]]]:
        from stockade.checkpoints import accept
        from stockade.checkpoints.restore import UNLIMITED
        from stockade.checkpoints.store import Recorder, project_folder

        own = recorder is None
        if recorder is None:
            meta: dict[str, object] = {"kind": "run", "command": command, "cwd": cwd, "project": self.project}
            recorder = Recorder(project_folder(self.state_dir, self.project), self.project, UNLIMITED, meta, (self.project,))
        elif self.project not in recorder.roots:
            recorder.roots = (*recorder.roots, self.project)
        chosen = accept.with_parents([unit for unit in units if not unit.get("mark") and unit["a"] != stage.SKIP], units)
        outcome = accept.accept(self.stage, self.project, units, chosen, recorder, force=False)
        if own:
            recorder.finish(0)
        for path, why in outcome.conflicts + outcome.failed:
            self.lines.append(f"stockade: not applied: {path}: {why}")
        return len(outcome.applied), self.stage.units if os.path.isdir(self.stage.folder) else []

    def _say(self, units: list[dict[str, object]], applied: int) -> None:
        number = self.stage.number
        if applied:
            them = "them" if applied != 1 else "it"
            self.lines.append(f"stockade: applied {applied} change{'s' if applied != 1 else ''} to the project (`stockade undo` takes {them} back)")
        if not units:
            return
        marked = [str(unit["p"]) for unit in units if unit.get("mark")]
        if applied and marked:
            shown = ", ".join(marked[:HELD_SHOWN]) + (f" and {len(marked) - HELD_SHOWN} more" if len(marked) > HELD_SHOWN else "")
            self.lines.append(
                f"stockade: held for review (marked: they run code later, or a rule holds them): {shown}; "
                f"`stockade review` shows them (stage {number})"
            )
            return
        count = len(units)
        what = f"{count} change{'s' if count != 1 else ''}" + (f", {len(marked)} marked" if marked else "")
        self.lines.append(
            f"stockade: this run's changes to the project are staged ({what}, stage {number}): "
            "`stockade review` shows them, `stockade accept` applies them, `stockade reject` drops them"
        )


GIT_DIR_FILES = ("config", "commondir", "config.worktree")


def _git_dir_of(path: str) -> str | None:
    """The folder that would be the git dir if `path` is one of the files in it git runs code from
    (config, commondir, config.worktree, hooks/*, info/attributes); None for any other path."""
    parts = path.split("/")
    if parts[-1] in GIT_DIR_FILES:
        return "/".join(parts[:-1])
    if len(parts) >= 2 and parts[-2] == "hooks":
        return "/".join(parts[:-2])
    if parts[-2:] == ["info", "attributes"]:
        return "/".join(parts[:-2])
    return None


def _mount_points_in(project: str) -> list[str]:
    """The mount points strictly inside the project, as this process sees them (/proc/self/mountinfo)."""
    prefix = project.rstrip("/") + "/"
    found: list[str] = []
    try:
        with open("/proc/self/mountinfo", "rb") as handle:
            lines = handle.read().decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = _unescape(fields[4])
            if point.startswith(prefix):
                found.append(point)
    return found


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (\\040 for a space) back to the characters."""
    import re

    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)
