"""One sandboxed run, start to finish: fds, limits, placeholders, supervision, summary."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

from stockade.bwrap import args as bw
from stockade.bwrap.backend import BwrapPlan, resolve_command
from stockade.bwrap import changes
from stockade.bwrap.limits import enter_limits, limit_hit, make_cgroups, remove_cgroups
from stockade.bwrap.placeholders import PlaceholderGuard
from stockade.bwrap.supervise import supervise
from stockade.bwrap.sweep import sweep_unguarded
from stockade.profiles.errors import SandboxSetupError
from stockade.profiles.paths import is_within
from stockade.profiles.units import format_duration

if TYPE_CHECKING:
    from stockade.bwrap.network import Bridge


def _args_fd(pieces: list[bw.Piece]) -> int:
    """The options in an anonymous memory file: no size limit, never on an argv."""
    fd = os.memfd_create("stockade-bwrap-args", 0)  # not CLOEXEC: bwrap reads it after exec
    os.write(fd, bw.encode(pieces))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _seccomp_fd(plan: BwrapPlan) -> int:
    from stockade.bwrap.seccomp_cache import open_filter

    fd = open_filter(plan.locations.cache / "seccomp", allow_unix=plan.allow_unix)
    os.set_inheritable(fd, True)
    return fd


def _preexec(plan: BwrapPlan, bridge: Bridge | None) -> Callable[[], None] | None:
    """What the child does between fork and exec: join limits, then enter its own network."""
    limits = plan.limits if (plan.limits.cgroup_procs or plan.limits.rlimits) else None
    if limits is None and bridge is None:
        return None
    uid, gid = os.getuid(), os.getgid()

    def child() -> None:
        if limits is not None:
            enter_limits(limits)
        if bridge is not None:
            from stockade.bwrap.netns import enter_private_network

            enter_private_network(bridge.child_channel_fd, uid, gid)

    return child


# bwrap runs on the host before any namespace or filter exists, so it gets no
# variable from the policy or the caller: LD_PRELOAD in a policy's [env] set
# would otherwise run code outside the sandbox. The sandbox's environment
# travels in the --args memfd as --clearenv and --setenv, applied by bwrap
# after it started (and so never in /proc/1/environ inside, ESCAPES V3).
BWRAP_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def _environment(plan: BwrapPlan) -> list[bw.Piece]:
    return [bw.Flag("--clearenv"), *(bw.SetEnv(name, value) for name, value in sorted(plan.env.items()))]


def _project_watch(plan: BwrapPlan) -> bool:
    """Walk the project after the run only when the run could write it."""
    return any(is_within(plan.view.project, root) for root in plan.view.writable)


def _project_changes(plan: BwrapPlan, watched: bool) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(runs-later files created or changed, floor files made in new places and moved aside)."""
    if not watched:
        return [], []
    after = changes.take(plan.view.project)
    planted = [path for path, _how in changes.changes(plan.view.watched.swept, after.swept)]
    moved = changes.quarantine(planted, plan.session, plan.view.writable)
    return changes.changes(plan.view.watched.reported, after.reported), moved


def execute(plan: BwrapPlan) -> int:
    resolve_command(plan.command, plan.env)
    started = time.monotonic()
    seccomp_fd = _seccomp_fd(plan)
    info_read, info_write = os.pipe()
    os.set_inheritable(info_write, True)
    pieces = [*plan.pieces, bw.FdOption("--seccomp", seccomp_fd), bw.FdOption("--info-fd", info_write), *_environment(plan)]
    args_fd = _args_fd(pieces)
    argv = [plan.bwrap, "--args", str(args_fd), "--", *plan.command]
    watched = _project_watch(plan)
    with ExitStack() as stack:
        if plan.view.placeholders:
            guard = stack.enter_context(PlaceholderGuard(plan.locations.state, plan.session))
            guard.remember(plan.view.placeholders)
        if plan.limits.cgroup_dirs:
            try:
                make_cgroups(plan.limits)
            except OSError as exc:
                raise SandboxSetupError(f"cannot create the cgroup for [limits]: {exc}") from None
            stack.callback(remove_cgroups, plan.limits)
        bridge = None
        if plan.network:
            from stockade.bwrap.network import Bridge

            bridge = Bridge(plan.session, plan.policy, plan.locations, plan.command, plan.cwd)
            bridge.open()
            stack.callback(bridge.close)
        preexec = _preexec(plan, bridge)
        outcome = supervise(
            argv,
            env=BWRAP_ENV,
            pass_fds=(args_fd, seccomp_fd, info_write),
            info_read_fd=info_read,
            close_after_spawn=(args_fd, seccomp_fd, info_write),
            wall_time=plan.policy.limits.wall_time,
            interactive=plan.interactive,
            preexec=preexec,
            after_spawn=bridge.attach if bridge else None,
        )
        hits = limit_hit(plan.limits)
    denials = bridge.denials if bridge else []
    touched, quarantined = _project_changes(plan, watched)
    quarantined += sweep_unguarded(plan.view.unguarded, plan.session, plan.view.writable)
    if not plan.quiet:
        _summary(plan, outcome.timed_out, hits, quarantined, denials, touched, time.monotonic() - started)
    code = outcome.exit_code
    return 128 - code if code < 0 else code


def _summary(
    plan: BwrapPlan,
    timed_out: bool,
    hits: list[str],
    quarantined: list[tuple[str, str]],
    denials: list[dict[str, object]],
    touched: list[tuple[str, str]],
    elapsed: float,
) -> None:
    """One short stderr block of what stockade knows it blocked; silent when nothing was."""
    origin = plan.policy.origin
    lines: list[str] = []
    limits = plan.policy.limits
    if timed_out and limits.wall_time:
        lines.append(f"wall_time {format_duration(limits.wall_time)} reached after {elapsed:.1f}s: the whole sandbox was killed (raise wall_time under [limits] in {origin})")
    if "pids" in hits:
        lines.append(f"pids limit {limits.pids} reached: new processes were refused (raise pids under [limits] in {origin})")
    if "memory" in hits:
        lines.append(f"memory limit reached: the sandbox was out of memory (raise memory under [limits] in {origin})")
    for original, moved in quarantined:
        lines.append(f"{original} was created inside the sandbox and runs code outside it; renamed to {moved} (the floor keeps such files read-only)")
    if denials:
        from stockade.proxy.client import describe_denial  # already loaded: the bridge used it

        lines += [describe_denial(denial, origin) for denial in denials]
    if touched:
        names = ", ".join(f"{os.path.relpath(path, plan.view.project)} ({how})" for path, how in touched)
        lines.append(f"files that run code later were created or changed; review them before running them outside the sandbox: {names}")
    for note in plan.view.notes:
        lines.append(note)
    for line in lines:
        print(f"stockade: {line}", file=sys.stderr)
