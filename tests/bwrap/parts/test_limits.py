"""[limits] on this machine: the plan (cgroup v2, v1 as root, or rlimits), the cgroup files it makes, joining them, and the hits it reads back."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from stockade.bwrap.parts import limits, probe
from stockade.bwrap.parts.limits import LimitPlan, enter_limits, limit_hit, make_cgroups, plan_limits, remove_cgroups

MIB = 1 << 20


@pytest.fixture
def no_cgroups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No delegated v2 cgroup, no v1 hierarchy: only rlimits are left."""
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: None)
    monkeypatch.setattr(limits, "V1_ROOT", str(tmp_path / "no-v1"))


@pytest.fixture
def v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "v2"
    folder.mkdir()
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: str(folder))
    return folder


@pytest.fixture
def v1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable v1 hierarchy with both controllers, as root sees it."""
    root = tmp_path / "v1"
    for controller in ("pids", "memory"):
        (root / controller).mkdir(parents=True)
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: None)
    monkeypatch.setattr(limits, "V1_ROOT", str(root))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    return root


def test_no_limits_plan_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: pytest.fail("no cgroup is looked for without pids or memory"))
    for zero in (None, 0):
        plan = plan_limits(zero, zero, zero, "s")
        assert (plan.rlimits, plan.cgroup_files, plan.cgroup_procs, plan.cgroup_dirs, plan.how) == ([], [], [], [], [])
        assert plan.describe() == "no limits"


def test_file_size_is_an_rlimit_and_needs_no_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: pytest.fail("no cgroup is looked for without pids or memory"))
    plan = plan_limits(10 * MIB, None, None, "s")
    assert plan.rlimits == [(resource.RLIMIT_FSIZE, 10 * MIB)]
    assert plan.cgroup_dirs == [] and plan.describe() == "file_size via RLIMIT_FSIZE"


def test_v2_puts_pids_and_memory_in_a_cgroup_of_the_session(v2: Path) -> None:
    plan = plan_limits(None, 64, 512 * MIB, "abc")
    folder = str(v2 / "stockade-abc")
    assert plan.cgroup_dirs == [folder]
    assert plan.cgroup_procs == [f"{folder}/cgroup.procs"]
    assert plan.cgroup_files == [(f"{folder}/pids.max", "64"), (f"{folder}/memory.max", str(512 * MIB)), (f"{folder}/memory.swap.max", "0")]
    assert plan.rlimits == []
    assert plan.describe() == f"pids/memory via cgroup v2 {folder}"


@pytest.mark.parametrize(("pids", "memory", "files"), [(5, None, ["pids.max"]), (None, MIB, ["memory.max", "memory.swap.max"])])
def test_v2_writes_only_the_limits_asked_for(v2: Path, pids: int | None, memory: int | None, files: list[str]) -> None:
    plan = plan_limits(None, pids, memory, "s")
    assert [os.path.basename(path) for path, _ in plan.cgroup_files] == files


def test_v2_with_file_size_says_both(v2: Path) -> None:
    plan = plan_limits(MIB, 8, None, "s")
    assert plan.rlimits == [(resource.RLIMIT_FSIZE, MIB)]
    assert plan.describe() == f"file_size via RLIMIT_FSIZE; pids/memory via cgroup v2 {v2}/stockade-s"


def test_without_cgroups_pids_and_memory_are_rlimits(no_cgroups: None) -> None:
    plan = plan_limits(None, 64, 512 * MIB, "s")
    assert plan.rlimits == [(resource.RLIMIT_NPROC, 64), (resource.RLIMIT_AS, 512 * MIB)]
    assert plan.cgroup_dirs == plan.cgroup_files == plan.cgroup_procs == []
    assert plan.how == [
        "pids via RLIMIT_NPROC (counts this user's processes in the sandbox's user namespace)",
        "memory via RLIMIT_AS (per process; tmpfs is bounded by tmp_size)",
    ]


def test_v1_as_root_gives_a_cgroup_per_controller(v1: Path) -> None:
    plan = plan_limits(None, 64, 512 * MIB, "s")
    pids, memory = str(v1 / "pids" / "stockade-s"), str(v1 / "memory" / "stockade-s")
    assert plan.cgroup_dirs == [pids, memory]
    assert plan.cgroup_files == [(f"{pids}/pids.max", "64"), (f"{memory}/memory.limit_in_bytes", str(512 * MIB))]
    assert plan.cgroup_procs == [f"{pids}/cgroup.procs", f"{memory}/cgroup.procs"]
    assert plan.rlimits == [] and plan.how == [f"pids via cgroup v1 {pids}", f"memory via cgroup v1 {memory}"]


def test_v1_without_one_controller_falls_back_for_that_one(v1: Path) -> None:
    (v1 / "memory").rmdir()
    plan = plan_limits(None, 64, 512 * MIB, "s")
    assert plan.cgroup_dirs == [str(v1 / "pids" / "stockade-s")]
    assert plan.rlimits == [(resource.RLIMIT_AS, 512 * MIB)]


def test_v1_is_for_root_only(v1: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    plan = plan_limits(None, 64, None, "s")
    assert plan.cgroup_dirs == [] and plan.rlimits == [(resource.RLIMIT_NPROC, 64)]


def test_make_and_remove_cgroups(v2: Path) -> None:
    plan = plan_limits(None, 64, 2 * MIB, "s")
    make_cgroups(plan)
    folder = v2 / "stockade-s"
    assert (folder / "pids.max").read_text() == "64"
    assert (folder / "memory.max").read_text() == str(2 * MIB) and (folder / "memory.swap.max").read_text() == "0"
    make_cgroups(plan)  # again: the folder may be there already
    for name in ("pids.max", "memory.max", "memory.swap.max"):
        (folder / name).unlink()  # a real cgroup's files go with it; a plain folder's do not
    remove_cgroups(plan)
    assert not folder.exists()
    remove_cgroups(plan)  # gone already: nothing to say


def test_remove_leaves_a_folder_it_cannot_remove(v2: Path) -> None:
    plan = plan_limits(None, 64, None, "s")
    make_cgroups(plan)
    remove_cgroups(plan)  # still holds pids.max: rmdir fails, quietly
    assert (v2 / "stockade-s" / "pids.max").exists()


def test_make_cgroups_of_an_empty_plan_does_nothing() -> None:
    make_cgroups(LimitPlan())
    remove_cgroups(LimitPlan())


def test_enter_limits_joins_the_cgroups_and_sets_the_rlimits(tmp_path: Path) -> None:
    """In a child, as between fork and exec: the procs files get its pid, the rlimits its soft and hard values."""
    procs = [str(tmp_path / "a.procs"), str(tmp_path / "b.procs")]
    code = f"""
import json, os, resource
from stockade.bwrap.parts.limits import LimitPlan, enter_limits
plan = LimitPlan()
plan.cgroup_procs = {procs!r}
plan.rlimits = [(resource.RLIMIT_FSIZE, 1 << 20), (resource.RLIMIT_NOFILE, 64)]
enter_limits(plan)
print(json.dumps([os.getpid(), resource.getrlimit(resource.RLIMIT_FSIZE), resource.getrlimit(resource.RLIMIT_NOFILE)]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    pid, fsize, nofile = json.loads(done.stdout)
    assert [Path(p).read_text() for p in procs] == [str(pid), str(pid)]
    assert fsize == [1 << 20, 1 << 20] and nofile == [64, 64]


def test_enter_limits_of_an_empty_plan_changes_nothing() -> None:
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    enter_limits(LimitPlan())
    assert resource.getrlimit(resource.RLIMIT_FSIZE) == before


@pytest.mark.parametrize(
    ("files", "hits"),
    [
        pytest.param({}, [], id="nothing-to-read"),
        pytest.param({"pids.events": "max 0\n"}, [], id="pids-never"),
        pytest.param({"pids.events": "max 3\n"}, ["pids"], id="pids-hit"),
        pytest.param({"pids.events": "max 10\n"}, ["pids"], id="pids-hit-ten"),
        pytest.param({"memory.failcnt": "0\n"}, [], id="v1-memory-never"),
        pytest.param({"memory.failcnt": "12\n"}, ["memory"], id="v1-memory-hit"),
        pytest.param({"memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 0\n"}, [], id="v2-reclaimed-not-killed"),
        pytest.param({"memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n"}, ["memory"], id="v2-oom-kill"),
        pytest.param({"pids.events": "max 1\n", "memory.events": "oom_kill 2\n"}, ["pids", "memory"], id="both"),
    ],
)
def test_limit_hit(tmp_path: Path, files: dict[str, str], hits: list[str]) -> None:
    folder = tmp_path / "stockade-s"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    plan = LimitPlan()
    plan.cgroup_dirs = [str(folder)]
    assert limit_hit(plan) == hits


def test_limit_hit_reads_each_cgroup(tmp_path: Path) -> None:
    plan = LimitPlan()
    for name, events in (("pids", "pids.events"), ("memory", "memory.failcnt")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / events).write_text("max 2\n" if name == "pids" else "1\n")
        plan.cgroup_dirs.append(str(folder))
    assert limit_hit(plan) == ["pids", "memory"]
    assert limit_hit(LimitPlan()) == []
