"""One run's checkpoint as the recorder keeps it: each path once, by the cheapest means that keeps it exact."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stockade.checkpoints import store


def _recorder(tmp_path: Path, max_size: int = 1 << 30) -> tuple[store.Recorder, Path]:
    project = tmp_path / "project"
    project.mkdir()
    recorder = store.Recorder(store.project_folder(str(tmp_path / "state"), str(project)), str(project), max_size, {"kind": "run"})
    return recorder, project


def _records(recorder: store.Recorder) -> list[dict[str, object]]:
    with open(os.path.join(recorder.run_dir, store.RECORDS)) as handle:
        return [json.loads(line) for line in handle]


def test_nothing_changed_leaves_no_folder(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    (project / "kept").write_text("x")
    recorder.changing(str(project / "kept"), store.CREATE)  # an O_CREAT open of a file that is there
    assert recorder.finish(0) is None and not recorder.recorded
    assert not os.path.exists(recorder.folder) or os.listdir(recorder.folder) == []


def test_a_temporary_made_and_removed_again_leaves_nothing(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    recorder.changing(str(project / "tmp.o"), store.CREATE)
    (project / "tmp.o").write_text("x")
    recorder.changing(str(project / "tmp.o"), store.REMOVE)  # covered: absent before the run
    (project / "tmp.o").unlink()
    assert recorder.finish(0) is None
    assert [name for name in os.listdir(recorder.folder) if name.isdigit()] == []


def test_each_path_is_kept_once_and_never_changed(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    for name in ("removed", "written", "truncated"):
        (project / name).write_bytes(name.encode() * 10)
    before = {name: (project / name).stat() for name in ("removed", "written", "truncated")}
    recorder.changing(str(project / "removed"), store.REMOVE)
    recorder.changing(str(project / "removed"), store.REMOVE)
    recorder.changing(str(project / "written"), store.WRITE)
    recorder.changing(str(project / "truncated"), store.TRUNCATE_OPEN)
    records = {str(entry["p"]).rsplit("/", 1)[1]: entry for entry in _records(recorder)}
    assert list(records) == ["removed", "written", "truncated"]
    assert "d" in records["removed"] and "o" in records["written"] and "o" in records["truncated"]
    for name, info in before.items():  # the recorder only reads and links: every file as it was
        now = (project / name).stat()
        assert (now.st_ino, now.st_size, now.st_mtime_ns) == (info.st_ino, info.st_size, info.st_mtime_ns)
    assert recorder.finish(0) is not None


def test_a_link_in_a_folder_s_place_is_never_followed(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not the run's")
    os.symlink(outside, project / "swapped")  # a folder the sandbox replaced with a link meanwhile
    recorder.changing(str(project / "swapped" / "secret"), store.WRITE)
    recorder.finish(0)
    pack = [path for path in Path(recorder.folder).rglob("pack")]
    assert all(b"not the run's" not in path.read_bytes() for path in pack)
    entries = [entry for entry in _records(recorder)] if recorder.run_dir else []
    assert all(entry["k"] == "lost" for entry in entries)


def test_an_inode_kept_by_a_link_is_copied_before_a_write_in_place(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    original = "original" + "." * store.LINK_ABOVE  # large: kept by a link (a small one is copied)
    (project / "a").write_text(original)
    recorder.changing(str(project / "a"), store.MOVE)
    os.rename(project / "a", project / "b")
    recorder.changing(str(project / "b"), store.REMOVE)  # absent before: covered
    recorder.changing(str(project / "b"), store.WRITE)  # the same inode: the checkpoint's copy is made its own
    (project / "b").write_text("changed!")
    data = [entry for entry in _records(recorder) if entry["p"] == str(project / "a")][0]
    assert Path(recorder.run_dir, "data", str(data["d"])).read_text() == original


def test_a_folder_removed_or_renamed_is_recorded_whole(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "src" / "pkg" / "m.py").write_text("m")
    os.symlink("pkg/m.py", project / "src" / "link")
    recorder.changing(str(project / "src"), store.MOVE)
    kinds = {str(entry["p"]).split("project/")[1]: entry["k"] for entry in _records(recorder)}
    assert kinds == {"src/pkg": "dir", "src/pkg/m.py": "file", "src/link": "link", "src": "tree"}
    assert recorder.covered(str(project / "src" / "new" / "deeper"))


def test_a_file_over_the_limit_is_named_as_not_kept(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path, max_size=100)
    (project / "large").write_bytes(b"x" * 1000)
    recorder.changing(str(project / "large"), store.REMOVE)
    (project / "large").unlink()
    meta = recorder.finish(0)
    assert meta is not None and meta["counts"] == {"new": 0, "changed": 0, "removed": 0, "lost": 1}
    assert recorder.lost == [str(project / "large")]


def test_same_state_ignores_the_inode_and_a_folder_s_mtime() -> None:
    file_before = [0o100000, 1, 10, 5, 0o644]
    assert store.same_state(file_before, [0o100000, 2, 10, 5, 0o644])
    assert not store.same_state(file_before, [0o100000, 1, 11, 5, 0o644])
    assert store.same_state([0o040000, 1, 4096, 5, 0o755], [0o040000, 1, 4096, 9, 0o755])
    assert not store.same_state(None, file_before) and store.same_state(None, None)


def test_a_very_deep_folder_is_walked_without_recursion_and_cut(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    folder = project / "deep"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _level in range(store.MAX_DEPTH + 50):  # deeper than any path a walk could name at once
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    recorder.changing(str(project / "deep"), store.MOVE)
    lost = [entry for entry in _records(recorder) if entry["k"] == "lost"]
    assert len(lost) == 1 and "more than" in str(lost[0]["why"])
    assert recorder.finish(0) is not None


def test_the_end_waits_for_a_record_under_way(tmp_path: Path) -> None:
    import _thread

    recorder, project = _recorder(tmp_path)
    (project / "f").write_text("x")
    recorder.changing(str(project / "f"), store.REMOVE)
    ended = _thread.allocate_lock()
    ended.acquire()
    recorder.lock.acquire()  # as the checkpoint's thread holds it while it records

    def finish() -> None:
        recorder.finish(0)
        ended.release()

    _thread.start_new_thread(finish, ())
    assert not ended.acquire(timeout=0.2)  # the end waits
    recorder.lock.release()
    assert ended.acquire(timeout=5)
    recorder.changing(str(project / "g"), store.CREATE)  # after the end: nothing recorded, no error
    assert str(project / "g") not in recorder.kinds


def test_a_failing_rmdir_records_nothing(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    (project / "src").mkdir()
    (project / "src" / "main.py").write_text("x")
    recorder.changing(str(project / "src"), store.RMDIR)  # not empty: the call fails
    assert recorder.kinds == {}


def test_a_folder_whose_caller_is_gone_leaves_no_record(tmp_path: Path) -> None:
    recorder, project = _recorder(tmp_path)
    (project / "big").mkdir()
    for number in range(1200):
        (project / "big" / f"f{number}").write_text("x")
    recorder.cancelled = lambda: True  # the caller died while its folder was being kept
    recorder.changing(str(project / "big"), store.MOVE)
    assert recorder.kinds == {} and recorder.finish(0) is None  # no record, no checkpoint
    assert not list(Path(recorder.folder).rglob("data/*"))
