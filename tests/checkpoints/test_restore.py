"""Undo against generated runs: any sequence of file operations, recorded as the filter would, undone exactly.

Each generated run is a list of operations on a small tree (write, truncate,
append, remove, rename files and folders, make folders, links, hard links,
chmod). Before each one the test tells the recorder what the sandbox's call
would have told it, then does it. Undo must give back the tree as it was,
byte for byte (kinds, modes, contents, link targets, file mtimes), and undo of
the undo the tree as the run left it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stockade.checkpoints import history, restore, store
from tests.treesnap import snapshot

NAMES = ["a", "b", "c", "d/e", "d/f", "d/g/h", "x"]


def _tree(root: Path) -> None:
    (root / "d" / "g").mkdir(parents=True)
    (root / "a").write_bytes(b"alpha\n")
    (root / "b").write_bytes(os.urandom(5000))
    (root / "d" / "e").write_bytes(b"echo\n")
    (root / "d" / "g" / "h").write_bytes(b"hotel\n")
    os.symlink("a", root / "x")
    (root / "d" / "e").chmod(0o600)


operation = st.tuples(
    st.sampled_from(["write", "truncate", "append", "remove", "rename", "mkdir", "symlink", "hardlink", "chmod", "rmtree", "inplace"]),
    st.sampled_from(NAMES),
    st.sampled_from(NAMES),
)


def _apply(root: Path, recorder: store.Recorder, kind: str, first: str, second: str) -> None:
    """Do one operation the way a sandboxed process would, telling the recorder first."""
    path, other = root / first, root / second
    tell = recorder.changing
    followed = os.path.realpath(path)  # what an open, truncate or chmod changes: the filter's thread resolves links
    try:
        if kind == "write":
            tell(followed, store.TRUNCATE_OPEN if path.exists() else store.CREATE)
            path.write_bytes(b"written " + first.encode())
        elif kind == "truncate" and path.is_file():
            tell(followed, store.TRUNCATE)
            os.truncate(path, 2)
        elif kind == "append" and path.is_file():
            tell(followed, store.WRITE)
            with open(path, "ab") as handle:
                handle.write(b"+more")
        elif kind == "inplace" and path.is_file() and not path.is_symlink():
            tell(str(path), store.WRITE)
            with open(path, "r+b") as handle:
                handle.write(b"XY")
        elif kind == "remove" and (path.is_file() or path.is_symlink()):
            tell(str(path), store.REMOVE)
            path.unlink()
        elif kind == "rmtree" and path.is_dir() and not path.is_symlink():
            for folder, names, files in os.walk(path, topdown=False):
                for name in files + [n for n in names if (Path(folder) / n).is_symlink()]:
                    tell(os.path.join(folder, name), store.REMOVE)
                    os.unlink(os.path.join(folder, name))
                for name in names:
                    if not (Path(folder) / name).is_symlink():
                        tell(os.path.join(folder, name), store.RMDIR)
                        os.rmdir(os.path.join(folder, name))
            tell(str(path), store.RMDIR)
            os.rmdir(path)
        elif kind == "rename" and os.path.lexists(path) and other.parent.is_dir() and not str(other).startswith(str(path) + "/"):
            if other.is_dir() and not other.is_symlink() and (any(other.iterdir()) or not path.is_dir()):
                return
            if path.is_dir() and not path.is_symlink() and other.exists() and not other.is_dir():
                return
            tell(str(path), store.MOVE)
            tell(str(other), store.REMOVE)
            os.rename(path, other)
        elif kind == "mkdir" and not os.path.lexists(path) and path.parent.is_dir():
            tell(str(path), store.CREATE)
            path.mkdir()
        elif kind == "symlink" and not os.path.lexists(path) and path.parent.is_dir():
            tell(str(path), store.CREATE)
            os.symlink(second, path)
        elif kind == "hardlink" and path.is_file() and not path.is_symlink() and not os.path.lexists(other) and other.parent.is_dir():
            tell(str(path), store.META_CHANGE)  # what the thread tells for link(2)'s source: it gets a name more
            tell(str(other), store.CREATE)
            os.link(path, other)
        elif kind == "chmod" and os.path.lexists(path) and not path.is_symlink():
            tell(followed, store.META_CHANGE)
            path.chmod(0o700 if path.is_dir() else 0o640)
    except OSError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(operation, max_size=16))
def test_any_run_is_undone_exactly_and_redone(tmp_path: Path, operations: list[tuple[str, str, str]]) -> None:
    work = tmp_path / "case"
    shutil.rmtree(work, ignore_errors=True)
    root, state = work / "project", work / "state"
    root.mkdir(parents=True)
    _tree(root)
    before = snapshot(root)
    recorder = store.Recorder(store.project_folder(str(state), str(root)), str(root), 1 << 30, {"kind": "run", "command": ["t"]})
    for kind, first, second in operations:
        _apply(root, recorder, kind, first, second)
    recorder.finish(0)
    after = snapshot(root, times=False)
    found = history.runs(str(state), str(root))
    if not found:
        assert snapshot(root) == before  # no checkpoint only for a run that left nothing changed
        return
    run = found[-1]
    assert restore.conflicts(run, found) == []
    undoing = store.Recorder(store.project_folder(str(state), str(root)), str(root), restore.UNLIMITED, {"kind": "undo", "undoes": run.number})
    outcome = restore.undo(run, undoing)
    undoing.finish(0)
    assert outcome.lost == []
    assert snapshot(root) == before
    redo = history.runs(str(state), str(root))[-1]
    assert redo.kind == "undo"
    again = store.Recorder(store.project_folder(str(state), str(root)), str(root), restore.UNLIMITED, {"kind": "undo", "undoes": redo.number})
    restore.undo(redo, again)
    again.finish(0)
    assert snapshot(root, times=False) == after


def test_a_later_run_s_paths_are_conflicts(tmp_path: Path) -> None:
    root, state = tmp_path / "p", tmp_path / "s"
    root.mkdir()
    (root / "f").write_text("1")
    folder = store.project_folder(str(state), str(root))
    for text in ("2", "3"):
        recorder = store.Recorder(folder, str(root), 1 << 20, {"kind": "run"})
        recorder.changing(str(root / "f"), store.TRUNCATE_OPEN)
        (root / "f").write_text(text)
        recorder.finish(0)
    first, second = history.runs(str(state), str(root))
    assert restore.conflicts(first, [first, second]) == [(str(root / "f"), f"changed again by run {second.number}")]
    assert restore.conflicts(second, [first, second]) == []
    (root / "f").write_text("the user's")
    assert restore.conflicts(second, [first, second]) == [(str(root / "f"), "changed since the run")]
