"""`[limits]`: how each one is enforced on this machine.

pids and memory go through a cgroup when this user can make one (v2
delegated, or v1 controllers writable as root); otherwise through rlimits,
which are weaker (per process for memory). wall_time is the supervisor's
timer; file_size is RLIMIT_FSIZE.
"""

from __future__ import annotations

import os

V1_ROOT = "/sys/fs/cgroup"


class LimitPlan:
    """Where each limit is enforced; `cgroup_dirs` are created before the spawn.

    A plain class (no dataclass): every run builds one, and dataclasses cost
    milliseconds to import on the hot path.
    """

    __slots__ = ("rlimits", "cgroup_files", "cgroup_procs", "cgroup_dirs", "how")

    def __init__(self) -> None:
        self.rlimits: list[tuple[int, int]] = []
        self.cgroup_files: list[tuple[str, str]] = []  # (file, value) written before the spawn
        self.cgroup_procs: list[str] = []  # cgroup.procs / tasks files the child joins
        self.cgroup_dirs: list[str] = []
        self.how: list[str] = []  # plain words for dry-run and doctor

    def describe(self) -> str:
        return "; ".join(self.how) or "no limits"


def _v1_dir(controller: str) -> str | None:
    folder = os.path.join(V1_ROOT, controller)
    if os.geteuid() == 0 and os.path.isdir(folder) and os.access(folder, os.W_OK):
        return folder
    return None


def plan_limits(file_size: int | None, pids: int | None, memory: int | None, session: str) -> LimitPlan:
    """The policy's [limits] values (plain numbers: the cached hot path has no Policy)."""
    plan = LimitPlan()
    if not (file_size or pids or memory):
        return plan
    import resource  # only when a limit is set

    if file_size:
        plan.rlimits.append((resource.RLIMIT_FSIZE, file_size))
        plan.how.append("file_size via RLIMIT_FSIZE")
    if not (pids or memory):
        return plan
    from stockade.bwrap.parts.probe import cgroup_v2_delegated  # only when a cgroup limit is asked for

    v2 = cgroup_v2_delegated()
    if v2:
        folder = os.path.join(v2, f"stockade-{session}")
        plan.cgroup_dirs.append(folder)
        plan.cgroup_procs.append(os.path.join(folder, "cgroup.procs"))
        if pids:
            plan.cgroup_files.append((os.path.join(folder, "pids.max"), str(pids)))
        if memory:
            plan.cgroup_files.append((os.path.join(folder, "memory.max"), str(memory)))
            plan.cgroup_files.append((os.path.join(folder, "memory.swap.max"), "0"))
        plan.how.append(f"pids/memory via cgroup v2 {folder}")
        return plan
    for name, value, controller, limit_file in (
        ("pids", pids, "pids", "pids.max"),
        ("memory", memory, "memory", "memory.limit_in_bytes"),
    ):
        if not value:
            continue
        v1 = _v1_dir(controller)
        if v1:
            folder = os.path.join(v1, f"stockade-{session}")
            plan.cgroup_dirs.append(folder)
            plan.cgroup_files.append((os.path.join(folder, limit_file), str(value)))
            plan.cgroup_procs.append(os.path.join(folder, "cgroup.procs"))
            plan.how.append(f"{name} via cgroup v1 {folder}")
        elif name == "pids":
            plan.rlimits.append((resource.RLIMIT_NPROC, value))
            plan.how.append("pids via RLIMIT_NPROC (counts this user's processes in the sandbox's user namespace)")
        else:
            plan.rlimits.append((resource.RLIMIT_AS, value))
            plan.how.append("memory via RLIMIT_AS (per process; tmpfs is bounded by tmp_size)")
    return plan


def make_cgroups(plan: LimitPlan) -> None:
    for folder in plan.cgroup_dirs:
        os.makedirs(folder, exist_ok=True)
    for path, value in plan.cgroup_files:
        with open(path, "w", encoding="ascii") as handle:
            handle.write(value)


def enter_limits(plan: LimitPlan) -> None:
    """Runs in the child between fork and exec: join the cgroups, set the rlimits."""
    pid = str(os.getpid())
    for procs in plan.cgroup_procs:
        with open(procs, "w", encoding="ascii") as handle:
            handle.write(pid)
    if plan.rlimits:
        import resource

        for which, value in plan.rlimits:
            resource.setrlimit(which, (value, value))


def limit_hit(plan: LimitPlan) -> list[str]:
    """Limits the sandbox ran into, read from the cgroup's own counters."""
    from stockade.bwrap.parts.probe import read_text

    hits: list[str] = []
    for folder in plan.cgroup_dirs:
        events = read_text(os.path.join(folder, "pids.events")) or ""
        if "max " in events and not events.strip().endswith("max 0"):
            hits.append("pids")
        failcnt = read_text(os.path.join(folder, "memory.failcnt"))
        mem_events = read_text(os.path.join(folder, "memory.events")) or ""
        if (failcnt and failcnt != "0") or any(line.startswith("oom_kill ") and line != "oom_kill 0" for line in mem_events.splitlines()):
            hits.append("memory")
    return hits


def remove_cgroups(plan: LimitPlan) -> None:
    for folder in plan.cgroup_dirs:
        try:
            os.rmdir(folder)
        except OSError:
            pass
