"""One sandboxed run, start to finish: fds, limits, supervision, the check after it, summary.

It works from a `Launch`: plain data (strings, numbers, lists, dicts) that the
planner builds from a policy, or that the plan cache (plan_cache.py) reads back
for a project whose inputs have not changed. So this module and what it
imports stay off everything heavy: no policy model, no dataclasses, no
pattern matching unless the run changed the project.
"""

from __future__ import annotations

import _signal  # the builtin module: `signal` imports enum
import os
import stat
import time
from _signal import SIGXFSZ

from stockade.bwrap.after import changes
from stockade.bwrap.parts import args as bw
from stockade.bwrap.parts.limits import enter_limits, limit_hit, make_cgroups, plan_limits, remove_cgroups
from stockade.bwrap.running.supervise import Outcome, Relay, supervise
from stockade.core import ending, phases
from stockade.core.errors import CannotExecuteError, CommandNotFoundError, SandboxSetupError
from stockade.profiles.text import say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from stockade.bwrap.parts.globs import Tree
    from stockade.bwrap.parts.limits import LimitPlan
    from stockade.bwrap.running.checkpointing import Checkpointing
    from stockade.bwrap.running.console import Console
    from stockade.bwrap.running.container_gate import RunGate
    from stockade.bwrap.running.freeze import Freeze
    from stockade.bwrap.running.gitstage import Stage
    from stockade.bwrap.running.network import Bridge
    from stockade.bwrap.running.staging import StagedRun
    from stockade.bwrap.running.trace import Tracer
    from stockade.proxy.client.asking import Asker

# bwrap runs on the host before any namespace or filter exists, so it gets no
# variable from the policy or the caller: LD_PRELOAD in a policy's [env] set
# would otherwise run code outside the sandbox. The sandbox's environment
# travels in the --args memfd as --clearenv and --setenv, applied by bwrap
# after it started (and so never in /proc/1/environ inside, ESCAPES V3).
BWRAP_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class Launch:
    """Everything one run needs once the policy is planned, as plain data."""

    bwrap: str
    args: bytes  # bwrap's options up to --chdir and the environment, encoded (args.encode)
    command: list[str]
    env: dict[str, str]  # the sandbox's environment
    cwd: str
    project: str
    writable: list[str]
    reported: changes.Stamps  # the project walk before the run (changes.py)
    swept: changes.Stamps
    tree: Tree | None
    patterns: tuple[tuple[str, ...], tuple[str, ...]]  # (reported, swept) globs
    watch_roots: list[str]  # the writable places outside the project walked after the run too (mounts._other_places)
    unguarded: list[tuple[str, str]]  # absent protected paths, (path, first absent component): mounts.View
    socket_masks: list[str]  # host sockets to hide, each only if still there when the run starts
    notes: list[str]
    state_dir: str
    cache_dir: str
    seccomp_file: str | None  # the cached filter's file, when known at planning
    allow_unix: bool
    session_rules: dict[str, object] | None  # network runs: what the proxy daemon is told (proxy.client.api)
    file_size: int | None  # the policy's [limits]
    pids: int | None
    memory: int | None
    wall_time: float | None
    origin: str  # where the policy came from, for the summary's "raise X in ..."
    interactive: bool
    quiet: bool
    walls: dict[str, object]  # hidden and read-only places and why, for --trace (backend.walls_of, denials.py)
    tool_files: list[tuple[str, str, str]]  # the user's tool configuration to show without secrets (profiles/toolconfig.py)
    # (git dir, where the sandbox sees the real one, the plan's mounts inside it made there, its mounts when no stage
    # could be made, [(a folder the stage binds, the plan's mounts inside it)]), encoded: staged at run time
    # (gitstage.py); `args` holds none of them
    git_stages: list[tuple[str, str, bytes, bytes, list[tuple[str, bytes]]]]
    layers: list[tuple[str, str, str, str]]  # package caches seen through a layer of their own (layers.py)
    checkpoints: tuple[int, float] | None  # [checkpoints] max_size, max_age; None: off (checkpointing.py)
    stage: dict[str, object] | None  # a staged run's overlay mount, marks and accept mode (planner._stage_of); None: not staged
    audit: tuple[str, str]  # the audit log, and the collector's URL or "": where the run's findings go (after/findings_log.py)
    containers: tuple[str, str, list[str], bool] | None  # [containers] engine, socket or "", images, keep; None: no engine (container_gate.py)
    __slots__ = tuple(__annotations__)  # no dataclass: its import costs more than a run

    def __init__(self, **values: object) -> None:
        missing = [name for name in self.__slots__ if name not in values]
        if missing or len(values) != len(self.__slots__):
            raise TypeError(f"Launch: missing {missing} or unknown {sorted(set(values) - set(self.__slots__))}")
        for name, value in values.items():
            setattr(self, name, value)

    def to_data(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__}

    @property
    def watched(self) -> changes.Snapshot:
        return changes.Snapshot(self.reported, self.swept, self.tree)


def resolve_command(command: tuple[str, ...] | list[str], env: dict[str, str]) -> str:
    """The program's path as the sandbox will see it; 127/126 with a clear line otherwise."""
    program = command[0]
    if "/" in program:
        if not os.path.exists(program):
            raise CommandNotFoundError(f"{program}: no such file")
        path = program
    else:
        found = _which(program, env.get("PATH", os.defpath))
        if found is None:
            raise CommandNotFoundError(f"{program}: command not found (PATH={env.get('PATH', '')})")
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        what = "a folder, not a program" if os.path.isdir(path) else "not executable (chmod +x it, or run it through its interpreter)"
        raise CannotExecuteError(f"{path}: {what}")
    return path


def _which(program: str, path: str) -> str | None:
    """shutil.which's PATH walk: importing shutil would cost every run a few ms."""
    for folder in path.split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _args_fd(words: bytes) -> int:
    """The options in an anonymous memory file: no size limit, never on an argv."""
    fd = os.memfd_create("stockade-bwrap-args", 0)  # not CLOEXEC: bwrap reads it after exec
    os.write(fd, words)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _seccomp_fd(launch: Launch) -> int:
    from stockade.bwrap.parts.seccomp_cache import open_filter, open_known

    fd = open_known(launch.seccomp_file) if launch.seccomp_file else None
    if fd is None:
        fd = open_filter(launch.cache_dir + "/seccomp", allow_unix=launch.allow_unix)
    os.set_inheritable(fd, True)
    return fd


def _preexec(
    limits: LimitPlan,
    bridge: Bridge | None,
    layers: Sequence[tuple[str, str, str, str]] = (),
    then: Callable[[], None] | None = None,
    stage: tuple[str, str, str, str] | None = None,
) -> Callable[[], None]:
    """What the child does between fork and exec: join limits, enter its own network, then a mount
    namespace of its own that receives nothing from the host's (ESCAPES 96), with the caches'
    layers mounted in it; `then` last (the checkpoint's filter: nothing after it may write)."""
    from stockade.bwrap.parts.netns import enter_private_mounts  # imported here, not in each forked child

    joins = limits if (limits.cgroup_procs or limits.rlimits) else None
    uid, gid = os.getuid(), os.getgid()
    forwards = [(address, port) for _entry, address, port in bridge.listens()] if bridge is not None else []
    if layers or stage:
        from stockade.bwrap.parts import layers as _layers  # noqa: F401 - imported once here, not in each forked child
    if bridge is not None:
        from stockade.bwrap.parts.interception import prepare  # imported here, not in each forked child

    def child() -> None:
        if joins is not None:
            enter_limits(joins)
        if bridge is not None:
            from stockade.bwrap.parts.netns import enter_private_network

            enter_private_network(bridge.child_channel_fd, uid, gid, forwards, intercept=prepare)
        if layers or stage:
            from stockade.bwrap.parts.layers import enter

            enter(layers, uid, gid, in_own_user_namespace=bridge is not None, stage=stage)
        else:
            enter_private_mounts(uid, gid, in_own_user_namespace=bridge is not None)
        if then is not None:
            then()

    return child


def environment(env: dict[str, str]) -> list[bw.Piece]:
    """--clearenv and one --setenv per variable: bwrap sets them after it started (see BWRAP_ENV)."""
    return [bw.Flag("--clearenv"), *(bw.SetEnv(name, value) for name, value in sorted(env.items()))]


def _watched_roots(launch: Launch) -> tuple[str, ...]:
    """Where the run's writes are checked after it: the project when the run could write it, and
    the other writable places the plan walked."""
    project = launch.project
    # a staged run's project is the host's as it was: its changes wait in the stage, marked there
    writable = launch.stage is None and any(_within(project, root) for root in launch.writable)
    return (*((project,) if writable else ()), *launch.watch_roots)


def _project_changes(launch: Launch, session: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(runs-later files created or changed, floor files made in new places and moved aside), in
    the project and the other writable places the plan walked."""
    roots = _watched_roots(launch)
    if not roots:
        return [], []
    before = launch.watched
    reported, swept = launch.patterns
    after = changes.take_since(roots, reported, swept, before)
    planted = [path for path, _how in changes.changes(before.swept, after.swept) if _sandbox_could_write(path, launch)]
    if planted:  # a clone, a new worktree or submodule: git data that may stay (gitcheck.py)
        from stockade.bwrap.after.gitcheck import user_hook_folders

        hook_folders = user_hook_folders(planted)
        planted = [path for path in planted if not _kept(path, before.swept, launch.writable)] + hook_folders
        planted = [path for path in planted if not _put_back(path, launch.unguarded)]
    moved = changes.quarantine(planted, session, launch.writable)
    touched = [(path, how) for path, how in changes.changes(before.reported, after.reported) if changes.QUARANTINE_SUFFIX not in path]
    return touched, moved


def _sandbox_could_write(path: str, launch: Launch) -> bool:
    """False for a path the sandbox saw hidden or read-only (and no writable place inside that wall
    holds it): a change there is the host's own (an editor, an agent's login), not a planting."""
    walls = launch.walls or {}
    for kind in ("hidden", "read_only"):
        for entry in walls.get(kind) or ():  # type: ignore[attr-defined]
            wall = str(entry[0])
            if _within(path, wall) and not any(_within(path, root) and len(root) > len(wall) for root in launch.writable):
                return False
    return True


def _within(path: str, place: str) -> bool:
    """profiles.paths.is_within without its imports (pathlib): this module is on every run's path."""
    return path == place or path.startswith(place.rstrip("/") + "/")


def _put_back(path: str, unguarded: list[tuple[str, str]]) -> bool:
    """A pinned link that holds the user's text again (sweep.py put it back, a new inode): no
    planting to move aside."""
    from stockade.bwrap.after.sweep import LINK_PIN

    try:
        text = LINK_PIN + os.readlink(path)
    except OSError:
        return False
    return (path, text) in unguarded


def _kept(path: str, before: changes.Stamps, writable: list[str]) -> bool:
    """gitcheck's judgement; anything it cannot judge (a fault in what the run left) is moved
    aside: a check that fails must not leave the rest of the run's plantings in place."""
    from stockade.bwrap.after.gitcheck import inert

    try:
        return inert(path, before, writable)
    except Exception:  # noqa: BLE001 - fail closed
        return False


class Signals:
    """What one run does with signals and the terminal (supervise.py, console.py, freeze.py): made
    before the asking thread starts, and the thing that thread holds while it asks a question."""

    def __init__(self, launch: Launch, approvals: bool) -> None:
        from stockade.bwrap.running.signal_reset import SIGNALS, starting_marks, wrappers

        reset = [number for number in SIGNALS if _signal.getsignal(number) != _signal.SIG_IGN]  # before our own handlers
        self.relay = Relay().install()
        self.interactive = launch.interactive
        self.console: Console | None = None
        self.freeze: Freeze | None = None  # a question's hold when the run has no console
        if approvals:
            from stockade.bwrap.running.freeze import Freeze

            self.freeze = Freeze()
        self.outer, self.inner = wrappers(launch.cache_dir, launch.command, reset)
        self.marks = starting_marks(launch.bwrap, self.inner)
        self.outcome: Outcome | None = None
        self._winch = _signal.signal(_signal.SIGWINCH, self._resized) if launch.interactive else None

    def new_console(self) -> Console | None:
        """The pty of this attempt at starting the sandbox (a run whose stdin is a terminal)."""
        if not self.interactive:
            return None
        from stockade.bwrap.running.console import Console

        try:
            self.console = Console.for_this_run()
        except OSError as exc:
            raise SandboxSetupError(
                f"cannot open a pseudo-terminal for the sandbox ({exc}); mount devpts at /dev/pts, or run with stdin not a terminal"
            ) from None
        if self.console is not None:
            self.console.on_key_signal = self.relay.to_own_job
            self.console.on_hangup = self.relay.hangup
        return self.console

    def hold(self, tty_fd: int) -> bool:
        """A question is open (proxy/client/asking.py): the sandbox's output waits; True when stockade can read the answer."""
        holder = self.console or self.freeze
        return holder is not None and holder.hold(tty_fd)

    def release(self, tty_fd: int, interrupt: bool = False) -> None:
        holder = self.console or self.freeze
        if holder is not None:
            holder.release(tty_fd, interrupt)

    def close(self) -> None:
        self.relay.uninstall()
        if self._winch is not None:
            _signal.signal(_signal.SIGWINCH, self._winch)

    def _resized(self, _number: int, _frame: object) -> None:
        if self.console is not None:
            self.console.resize()


def _supervised(
    launch: Launch,
    limits: LimitPlan,
    bridge: Bridge | None,
    tracer: Tracer | None = None,
    signals: Signals | None = None,
    files: Sequence[tuple[str, bytes, bool]] = (),
    scratch: Sequence[bw.Piece] = (),
    staged: bytes = b"",
    aliases: dict[str, str] | None = None,
    checkpoint: Checkpoint | None = None,
    stage: tuple[str, str, str, str] | None = None,
    sandboxed: Callable[[int], None] | None = None,
) -> tuple[Outcome, list[str]]:
    """(bwrap's outcome, the host sockets it masked).

    Each host socket planning saw is masked only if still there: bwrap cannot mount over a
    missing file without making one. One can still vanish in the milliseconds bwrap takes to
    set up (a daemon ending, or one restarting, which makes it anew): on the read-only root
    bwrap then fails, and the run is started again with the sockets there are then (a
    networked run with a new proxy session), up to SOCKET_RACE_TRIES times; in a writable
    place bwrap makes an empty file, removed after the run (_remove_made_mount_points)."""
    masks, seen = _present(launch.socket_masks)
    outer, inner, marks = (signals.outer, signals.inner, signals.marks) if signals is not None else ([], [], ())
    for attempt in range(SOCKET_RACE_TRIES):
        if bridge is not None:
            bridge.open()
        seccomp_fd = _seccomp_fd(launch)
        info_read, info_write = os.pipe()
        os.set_inheritable(info_write, True)
        copies = [(path, _data_fd(data), writable) for path, data, writable in files]
        tail: list[bw.Piece] = [*scratch, *(bw.DataBind(fd, path, writable) for path, fd, writable in copies)]  # over the plan's masks
        # last: nothing mounts over a file; a socket in a staged git dir is masked where the sandbox sees it, at the alias
        tail += [bw.ReadOnlyBindFrom("/dev/null", _at_alias(path, aliases or {})) for path in masks]
        if bridge is not None:  # this run's placeholders, after (so over) any variable of the same name in the plan
            tail += [bw.SetEnv(credential.name, credential.placeholder) for credential in bridge.credentials]
        tail += [bw.FdOption("--seccomp", seccomp_fd), bw.FdOption("--json-status-fd", info_write)]
        args_fd = _args_fd(launch.args + staged + bw.encode(tail))  # the stages over the plan's mounts
        errors: tuple[int, int, int] | None = None
        watch = checkpoint.watch(tracer is not None) if checkpoint is not None else None
        try:
            console = signals.new_console() if signals is not None else None
            passed = (args_fd, seccomp_fd, info_write, *(fd for _path, fd, _writable in copies))
            errors = _setup_errors(passed) if console is None else None
            swap = [] if errors is None else ["/bin/sh", "-c", f'exec 2>&{errors[2]} {errors[2]}>&-; exec "$0" "$@"']
            argv = [*outer, launch.bwrap, "--args", str(args_fd), "--", *inner, *swap, *launch.command]
            outcome = supervise(
                tracer.wrap(argv) if tracer is not None else argv,
                env=BWRAP_ENV,
                pass_fds=(args_fd, seccomp_fd, info_write, *(fd for _path, fd, _writable in copies)),
                info_read_fd=info_read,
                close_after_spawn=(args_fd, seccomp_fd, info_write, *(fd for _path, fd, _writable in copies)),
                wall_time=launch.wall_time,
                new_session=not launch.interactive,
                preexec=_preexec(limits, bridge, launch.layers, watch.child if watch is not None else None, stage),
                after_spawn=_after_spawn(bridge, watch),
                watch=bridge.handover if bridge else None,
                relay=signals.relay if signals is not None else None,
                console=console,
                freeze=signals.freeze if signals is not None else None,
                sandboxed=sandboxed,
                starting_marks=marks,
                own_stderr=None if errors is None else (errors[1], errors[2]),
            )
            _said_by_bwrap(errors, show=True)
            return outcome, masks
        except SandboxSetupError as failed:
            if watch is not None:
                watch.stop()
                watch = None
            said = _said_by_bwrap(errors, show=False)
            if signals is not None and signals.relay.sent:  # a signal came while it started: not started again
                _show(said)
                number = signals.relay.sent[0]
                return Outcome(128 + number, signal=number), masks
            changed = [path for path in masks if _identity(path) != seen[path]]  # gone, or gone and made again
            named = [path for path in masks if path.encode("utf-8", "surrogateescape") in said]  # bwrap failed at a mask
            if not (changed or named) or attempt == SOCKET_RACE_TRIES - 1:
                raise StartFailed(str(failed), said, _names_a_planned_path(said, launch.args), errors is None) from None
            # a start lost to the race: started again, and what bwrap said about it said nowhere
            masks, seen = _present(masks)
            if bridge is not None:
                bridge.close()  # the failed start's session; the next attempt opens its own
        finally:
            if watch is not None:
                watch.stop()
                checkpoint.unloaded = watch.unloaded  # type: ignore[union-attr]
                checkpoint.unseen += watch.unseen  # type: ignore[union-attr]
    raise AssertionError("unreachable: the last attempt returns or raises")


def _after_spawn(bridge: Bridge | None, watch: Checkpointing | None) -> Callable[[int], None] | None:
    """Once bwrap runs (its pid given): the checkpoint's listener first (bwrap's own calls wait for
    it), then the network's listeners."""
    if watch is None:
        return bridge.attach if bridge is not None else None

    def both(pid: int) -> None:
        watch.attach()
        if bridge is not None:
            bridge.attach(pid)

    return both


def _pending_note(launch: Launch, staging: StagedRun | None, agent_session: str | None) -> None:
    """One line when earlier staged runs' changes wait for review: this run did not see them."""
    from stockade.checkpoints.store import project_folder

    folder = os.path.join(project_folder(launch.state_dir, launch.project), "stages")
    try:
        names = [name for name in os.listdir(folder) if name.isdigit()]
    except OSError:
        return
    own = str(staging.stage.number) if staging is not None else ""
    waiting = sorted(int(name) for name in names if name != own and os.path.exists(os.path.join(folder, name, "stage.json")))
    if not waiting:
        return
    from stockade.checkpoints.stage import Stage
    from stockade.core.notices import first_time

    waiting = [number for number in waiting if not Stage(os.path.join(folder, str(number))).live()]
    if not waiting:
        return
    numbers = ", ".join(str(number) for number in waiting)
    line = f"stockade: changes of earlier staged runs wait for review in this project (stage {numbers}); this run did not see them: `stockade review`"
    if first_time(launch.state_dir, agent_session, line):
        say(line)


def _staging(launch: Launch) -> StagedRun | None:
    """A staged run's stage, made before bwrap starts (bwrap/running/staging.py)."""
    if launch.stage is None:
        return None
    from stockade.bwrap.running.staging import StagedRun

    return StagedRun(launch.state_dir, launch.project, list(launch.command), launch.cwd, launch.stage)


class Checkpoint:
    """This run's checkpoint (checkpoints/store.py) and where the sandbox writes the user's files;
    each start of bwrap gets its own watch (checkpointing.py)."""

    def __init__(self, launch: Launch, staged: bytes) -> None:
        from stockade.bwrap.running.checkpointing import Places
        from stockade.checkpoints.store import Recorder, project_folder

        assert launch.checkpoints is not None
        self.max_size, self.max_age = launch.checkpoints
        own = (launch.state_dir, launch.cache_dir)
        self.places = Places((launch.args + staged).split(b"\0"), own)
        meta: dict[str, object] = {"kind": "run", "command": list(launch.command), "cwd": launch.cwd, "project": launch.project}
        folder = project_folder(launch.state_dir, launch.project)
        floor_before: dict[str, object] = {**launch.reported, **launch.swept}  # planning's walk: before the run
        self.recorder = Recorder(folder, launch.project, self.max_size, meta, self.places.sources, floor_before)
        self.bwrap = os.path.realpath(launch.bwrap)
        self.unloaded = ""
        self.unseen = 0
        self.watching: Checkpointing | None = None  # the last start's watch: it knows who wrote what

    def watch(self, traced: bool) -> Checkpointing:
        from stockade.bwrap.running.checkpointing import Checkpointing

        self.watching = Checkpointing(self.recorder, self.places, self.bwrap, traced)
        return self.watching

    def writer(self, path: str) -> dict[str, object] | None:
        """The process inside that first changed `path` in this run, where the watch saw it."""
        return self.watching.writer(path) if self.watching is not None else None

    def finish(self, status: int | None, launch: Launch) -> None:
        """The record closed; older checkpoints pruned to the policy's bounds."""
        meta = self.recorder.finish(status, {"unseen": self.unseen} if self.unseen else None)
        if meta is None:
            return
        from stockade.checkpoints.history import prune

        try:
            prune(launch.state_dir, launch.project, self.max_size, self.max_age, keep=self.recorder.number)
        except OSError:
            pass
        if self.recorder.failed:
            say(f"stockade: this run's checkpoint is incomplete: {self.recorder.failed}")
        counts = meta.get("counts")
        removed = counts.get("removed", 0) if isinstance(counts, dict) else 0
        if removed and not launch.quiet:  # what a user who just watched files vanish wants to know
            paths = "path" if removed == 1 else "paths"
            say(f"stockade: this run removed {removed} {paths}; `stockade undo` puts back everything it changed (run {self.recorder.number})")


class StartFailed(SandboxSetupError):
    """bwrap could not set the sandbox up; the command never started. `said`: bwrap's own words,
    kept off the terminal (`show` passes them on) so that a start planned again (run.py) leaves no
    stray line; `raced`: those words name a path of the plan, which may have changed since it was
    planned (a deny rule's folder removed, made a file or a link); `unheard`: bwrap spoke to the
    terminal itself (a run with its own console), so whether it named one is not known."""

    def __init__(self, message: str, said: bytes, raced: bool, unheard: bool) -> None:
        super().__init__(message)
        self.said, self.raced, self.unheard = said, raced, unheard

    def show(self) -> None:
        _show(self.said)


def _names_a_planned_path(said: bytes, args: bytes) -> bool:
    """Whether bwrap's message names a path the plan mounts at or from: bwrap spells them from
    inside its own set-up, as /newroot/PATH or /oldroot/PATH."""
    words = b"\0" + args
    for token in said.replace(b"'", b" ").replace(b'"', b" ").split():
        path = token.rstrip(b":,.")
        for prefix in (b"/newroot", b"/oldroot"):
            if path.startswith(prefix + b"/"):
                path = path[len(prefix) :]
        if path.startswith(b"/") and path != b"/" and b"\0" + path + b"\0" in words:
            return True
    return False


def _setup_errors(passed: Sequence[int]) -> tuple[int, int, int]:
    """(read end, write end, a free fd below 10) of the pipe bwrap's own messages go to while a
    host socket it masks may vanish under it: a start lost to that race is started again, and
    what bwrap said about it must not reach the command's stderr. The command gets its stderr back
    from that fd by /bin/sh (one digit: a POSIX shell's redirections take no more)."""
    read_fd, write_fd = os.pipe()
    keeper = next(fd for fd in range(3, 10) if fd not in passed and fd not in (read_fd, write_fd))
    return read_fd, write_fd, keeper


def _present(paths: Sequence[str]) -> tuple[list[str], dict[str, tuple[int, int, int] | None]]:
    """(the paths there now, the identity of each): taken once, so a socket gone between the two
    looks the same to the retry as one gone during the start."""
    seen = {path: _identity(path) for path in paths}
    return [path for path, identity in seen.items() if identity is not None], seen


def _show(said: bytes) -> None:
    if said:
        try:
            os.write(2, said)
        except OSError:
            pass


def _said_by_bwrap(errors: tuple[int, int, int] | None, *, show: bool) -> bytes:
    """What bwrap wrote to its own stderr (`_setup_errors`), passed on to ours when `show`."""
    if errors is None:
        return b""
    read_fd, write_fd, _keeper = errors
    os.close(write_fd)
    os.set_blocking(read_fd, False)  # bwrap is gone; a sandbox process could hold the pipe no longer
    said = b""
    try:
        while len(said) < 1 << 16 and (chunk := os.read(read_fd, 1 << 16)):
            said += chunk
    except BlockingIOError:
        pass
    finally:
        os.close(read_fd)
    if show:
        _show(said)
    return said


def _tmp_pieces(launch: Launch, agent_session: str | None) -> tuple[list[bw.Piece], list[tuple[str, bytes, bool]], list[str], str | None]:
    """/tmp for this run (scratch.py): (the agent session's folder as /tmp, or nothing; read-only
    copies of the host files the command names; the mount points those copies leave in the
    session's folder; that folder)."""
    from stockade.bwrap.running import scratch
    from stockade.core.notices import first_time

    private = scratch.applies(launch.project, launch.cwd, launch.writable) and not scratch.hides_under_tmp(launch.walls)
    folder = scratch.session_tmp(launch.state_dir, agent_session) if agent_session and private else None
    named, refused = scratch.named_files(launch.command) if private else ([], [])
    for path in refused if not launch.quiet else ():
        line = (
            f"stockade: {path} is not shown inside: the sandbox has its own /tmp, and shows of the host's only the files of "
            "yours the command names that every user may read (chmod o+r on it and its folders, or put it in the project)"
        )
        if first_time(launch.state_dir, agent_session, line):
            say(line)
    if folder is not None:  # their mount points are made in the session's folder: never through a link left there
        named = [(path, data) for path, data in named if scratch.inside_folder(folder, path)]
    pieces: list[bw.Piece] = [bw.BindFrom(folder, scratch.TMP)] if folder is not None else []
    made = [path for path, _data in named if folder is not None and not os.path.lexists(folder + path[len(scratch.TMP) :])]
    return pieces, [(path, data, False) for path, data in named], made, folder


def _at_alias(path: str, aliases: dict[str, str]) -> str:
    """`path` as the sandbox reaches it when it lies in a staged git dir (gitstage.py): under its alias."""
    for git_dir, alias in aliases.items():
        if path.startswith(git_dir + "/"):
            return alias + path[len(git_dir) :]
    return path


def _git_stages(launch: Launch, session: str) -> tuple[list[Stage], bytes]:
    """A stage for each git dir the plan named (gitstage.py), and bwrap's words for them: each
    stage and the real git dir at its alias, then the plan's own mounts inside that git dir made
    at the alias; where no stage could be made (a git dir too large, or gone), the plan's mounts
    there as they were planned."""
    if not launch.git_stages:
        return [], b""
    from stockade.bwrap.running import gitstage

    wanted = [(path, alias) for path, alias, _at_alias, _instead, _bound in launch.git_stages]
    stages = {stage.git_dir: stage for stage in gitstage.prepare(launch.state_dir, session, wanted, launch.project)}
    words = b""
    for path, _alias, at_alias, instead, bound in launch.git_stages:
        stage = stages.get(path)
        if stage is None:
            words += instead
            continue
        words += bw.encode(stage.pieces()) + at_alias + b"".join(inside for name, inside in bound if name in stage.bound)
    return list(stages.values()), words


def _carry_back(launch: Launch, stages: list[Stage], session: str, checkpoint: Checkpoint | None = None) -> None:
    """git's changes in each stage, carried to the host once the sandbox is gone (each recorded in
    the checkpoint first); the config it judged here is not judged again by the check after the run
    (its stamp is the new one)."""
    if not stages:
        return
    from stockade.bwrap.running import gitstage

    before = None
    if checkpoint is not None:
        from stockade.checkpoints.store import REMOVE

        recorder = checkpoint.recorder

        def before(path: str) -> None:  # stockade's own act: undo may put these back where the floor protects
            recorder.changing(path, REMOVE, by="stockade")

    for stage in stages:
        lines, judged = gitstage.carry_back(stage, session, before)
        for line in lines:
            say(line)
        for path in judged:
            for stamps in (launch.swept, launch.reported):
                if path in stamps:
                    try:
                        stamps[path] = changes.stamp(os.lstat(path))
                    except OSError:
                        stamps.pop(path, None)


def _data_fd(data: bytes) -> int:
    """An inheritable fd bwrap copies a file's content from (--bind-data): the sandbox gets a
    private copy, writable, gone with the run; the host file behind the path is not touched."""
    fd = os.memfd_create("stockade-file")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


SOCKET_RACE_TRIES = 6  # starts of one run while host sockets come and go under bwrap's set-up


def _identity(path: str) -> tuple[int, int, int] | None:
    """Which file is at `path`: a socket made again may get the freed inode, not its change time."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_ctime_ns


def _remove_made_mount_points(masked: list[str], writable: list[str], since: float) -> None:
    """An empty file bwrap made in a writable place where a masked socket vanished during set-up
    (the sandbox cannot have made it: a mount point cannot be replaced from inside)."""
    for path in masked:
        if not any(path.startswith(root.rstrip("/") + "/") for root in writable):
            continue
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size == 0 and info.st_ctime >= since - 1:
            try:
                os.unlink(path)
            except OSError:
                pass


def execute(
    launch: Launch,
    session: str,
    bridge: Bridge | None = None,
    trace: bool = False,
    findings: dict[str, object] | None = None,
    agent_session: str | None = None,
    files: Sequence[tuple[str, bytes]] = (),
    who: dict[str, str | None] | None = None,
    troubles: list[str] | None = None,
) -> int:
    """Run it; `bridge` (network runs) is opened here and closed after; `trace` (--trace) runs bwrap
    under strace and reports the file accesses the sandbox refused (trace.py, denials.py).
    `findings`, when given, gets what the run refused as data (Invocation.findings). `files`:
    (path, content) of files the sandbox gets as private copies (profiles/toolconfig.py). `who`: the
    MCP server, agent session and tool call the run's audit records name (after/findings_log.py);
    `troubles` gets a line when its findings could not be written (a CI run fails on it).

    Signals sent to stockade from here on go to the sandbox (supervise.Relay); when one killed
    the command, or one came after it, stockade ends by it once its checks are done."""
    resolve_command(launch.command, launch.env)
    signals = Signals(launch, approvals=bridge is not None and bool(bridge.approve))
    try:
        code = _execute(launch, session, bridge, trace, findings, signals, agent_session, files, who or {}, troubles)
    finally:
        signals.close()
    outcome = signals.outcome
    if outcome is not None and outcome.signal is not None:
        ending.end_by(outcome.signal)
    elif signals.relay.late is not None:
        ending.end_by(signals.relay.late)
    return code


def _execute(
    launch: Launch,
    session: str,
    bridge: Bridge | None,
    trace: bool,
    findings: dict[str, object] | None,
    signals: Signals,
    agent_session: str | None,
    files: Sequence[tuple[str, bytes]],
    who: dict[str, str | None],
    troubles: list[str] | None,
) -> int:
    tracer = None
    if trace:
        from stockade.bwrap.running.trace import Tracer

        tracer = Tracer()
    started = time.monotonic()
    wall_started = time.time()
    limits = plan_limits(launch.file_size, launch.pids, launch.memory, session)
    asker: Asker | None = None
    gate: RunGate | None = None
    cgroups = False
    journal = None
    if launch.unguarded:  # a killed run's sweep is finished by the next run (journal.py)
        from stockade.bwrap.after.journal import Journal, changed_pins
        from stockade.bwrap.after.sweep import LINK_PIN

        pinned = {path for path, mark in launch.unguarded if mark.startswith(LINK_PIN)}
        changed = [entry for entry in changed_pins(launch.state_dir) if entry[0] in pinned] if pinned else []
        if changed:
            link, other = changed[0]
            raise SandboxSetupError(
                f"{link} is a link a running stockade run (session {other}) protects, and it was changed since that run "
                "started; that run puts it back when it ends: start this one after it"
            )
        journal = Journal(launch.state_dir, session)
        journal.open(launch.unguarded, launch.writable)
    try:
        if limits.cgroup_dirs:
            try:
                cgroups = True
                make_cgroups(limits)
            except OSError as exc:
                raise SandboxSetupError(f"cannot create the cgroup for [limits]: {exc}") from None
        phases.mark("checks")
        asker = _asker(bridge, signals)  # asks at this terminal for the requests the daemon holds
        try:
            tmp, named, made, folder = _tmp_pieces(launch, agent_session)
            if launch.containers is not None:
                from stockade.bwrap.after.findings_log import run_fields
                from stockade.bwrap.running.container_gate import RunGate

                try:
                    gate = RunGate(launch.containers, tuple(launch.audit), run_fields(launch, session, who))  # type: ignore[arg-type]
                except OSError as exc:
                    raise SandboxSetupError(f"cannot start the container engine's socket for [containers]: {exc.strerror or exc}") from None
                tmp += gate.pieces
                if gate.note and not launch.quiet:
                    say(f"stockade: {gate.note}")
            stages, staged = _git_stages(launch, session)
            # not under --trace: strace's filter sends it the same calls, and the kernel gives each call
            # to the checkpoint's listener instead (a notification outranks a trace)
            checkpoint = Checkpoint(launch, staged) if launch.checkpoints is not None and tracer is None else None
            staging = _staging(launch)
            try:
                copies = [*((p, d, True) for p, d in files), *named]
                aliases = {stage.git_dir: stage.alias for stage in stages}
                layer = staging.layer if staging is not None else None
                joined = gate.gate.attach if gate is not None else None
                outcome, masked = _supervised(launch, limits, bridge, tracer, signals, copies, tmp, staged, aliases, checkpoint, layer, joined)
            except StartFailed:
                if journal is not None:  # nothing ran: nothing to sweep
                    journal.close()
                if staging is not None:
                    staging.discard()
                raise
            finally:
                if folder is not None:
                    from stockade.bwrap.running.scratch import remove_mount_point

                    for path in made:
                        remove_mount_point(folder, path)
                _carry_back(launch, stages, session, checkpoint)
                if staging is not None:
                    staging.finish(checkpoint.recorder if checkpoint is not None else None, list(launch.command), launch.cwd)
                writer = checkpoint.writer if checkpoint is not None else None
                if checkpoint is not None and not checkpoint.recorder.recorded:
                    checkpoint = None  # nothing changed: nothing to finish
            signals.outcome = outcome
        finally:
            if asker is not None:
                asker.stop()
        phases.mark("command")
        hits = limit_hit(limits) if limits.cgroup_dirs else []
        if launch.file_size and outcome.exit_code in (-SIGXFSZ, 128 + SIGXFSZ):
            hits.append("file_size")  # the command itself died writing past the limit
    finally:
        if gate is not None:
            for line in gate.close():
                say(f"stockade: {line}")
        if bridge is not None:
            bridge.close()
        if cgroups:
            remove_cgroups(limits)
        traced = tracer.finish() if tracer is not None else []
    _remove_made_mount_points(masked, launch.writable, wall_started)
    denials = bridge.denials if bridge else []
    quarantined: list[tuple[str, str]] = []
    if launch.unguarded:  # first: a folder made at an absent protected path moves aside whole
        from stockade.bwrap.after.sweep import sweep_unguarded

        quarantined = sweep_unguarded(launch.unguarded, session, launch.writable)
    if journal is not None:
        journal.close()
    touched, planted = _project_changes(launch, session)
    quarantined += planted
    if bridge is not None and bridge.always:  # after the checks: they would take the edit for the sandbox's
        from stockade.proxy.client.asking import always

        for question in bridge.always:
            say(always(question, dict(os.environ)))
    if not launch.quiet:
        unreachable = outcome.no_route > 0 and outcome.exit_code != 0  # a command that coped says nothing
        refused_locally = outcome.refused_locally if outcome.exit_code != 0 else 0
        trouble = [line for line in (bridge.refused, bridge.trouble, bridge.exported) if line] if bridge is not None else []
        _summary(
            launch, outcome.timed_out, hits, quarantined, denials, touched, time.monotonic() - started, unreachable, trouble, agent_session,
            refused_locally, bridge is not None and bridge.intercepted, (bridge.names, session) if bridge is not None and bridge.names else None,
        )  # fmt: skip
    refused = _trace_report(launch, traced, tracer.dropped, findings) if tracer is not None else []
    if hits or outcome.timed_out or quarantined or refused:
        from stockade.bwrap.after import findings_log

        found = findings_log.findings(launch, session, who, hits, outcome.timed_out, quarantined, refused, writer)
        trouble_line = findings_log.write(launch, found)
        if trouble_line:
            say(f"stockade: {trouble_line}")
            if troubles is not None:
                troubles.append(trouble_line)
    if findings is not None:
        findings.update(
            network=list(denials), no_route=outcome.no_route, moved=[{"path": old, "moved_to": new} for old, new in quarantined],
            limits=[*hits, *(["wall_time"] if outcome.timed_out else [])],
        )  # fmt: skip
    code = outcome.exit_code
    if staging is not None:
        for line in staging.lines:
            say(line)
    if not launch.quiet:
        _pending_note(launch, staging, agent_session)
    if checkpoint is not None:
        checkpoint.finish(128 - code if code < 0 else code, launch)
    phases.mark("after")
    return 128 - code if code < 0 else code


def _asker(bridge: Bridge | None, holder: Signals) -> Asker | None:
    """The thread that asks at this terminal for the requests the daemon holds (proxy/client/asking.py), when
    the run approves and has a terminal; without one, it shows each as a desktop notification where
    there is a desktop (notify-send), and `stockade approve` answers from another terminal."""
    if bridge is None or not bridge.approve:
        return None
    from stockade.proxy.client.asking import start_asking
    from stockade.proxy.control import DaemonFiles

    return start_asking(lambda: DaemonFiles(bridge.runtime, bridge.state), bridge.session_id, os.environ, holder)


def _trace_report(launch: Launch, lines: list[str], dropped: int, findings: dict[str, object] | None) -> list[tuple[dict[str, object], int]]:
    """--trace's block, after the summary: every file access the sandbox refused and the wall that did
    (printed even with --quiet, unless the caller takes them as data instead); each as data, with the
    pid (the host's) of the process refused."""
    from stockade.bwrap.after.denials import denials, report

    found = denials(lines, launch.walls, launch.writable, launch.cwd, launch.origin)
    fixes = _fixes(launch, [denial.to_data() for denial in found]) if found else {}
    for denial in found:
        denial.fix = fixes.get(denial.failure.path, "")
        if denial.fix.startswith("a secret") and denial.wall == "private_home":
            denial.rule = "the private home does not show it"  # not "allow_read can show it": never a secret
    data = [(denial.to_data(), denial.failure.pid) for denial in found]
    if findings is not None:
        findings["files"] = [item for item, _pid in data]
        findings["files_dropped"] = dropped
        if launch.quiet:
            return data
    for line in report(found, dropped, fixes):
        say(f"stockade: {line}")
    if launch.checkpoints is not None:
        say("stockade: --trace: this run kept no checkpoint (strace needs the calls a checkpoint waits on): `stockade undo` cannot reach it")
    return data


def _fixes(launch: Launch, refused: list[dict[str, object]]) -> dict[str, str]:
    """For each refused path, the policy entry that would allow it (profiles/learning.py), where one would."""
    from pathlib import Path

    from stockade.profiles.learning import builtin_secrets, fix_of

    walls = launch.walls or {}
    home = str(walls["home"]) if isinstance(walls.get("home"), str) else os.path.expanduser("~")
    hidden = walls.get("hidden")
    places = [str(entry[0]) for entry in hidden if isinstance(entry, list | tuple) and entry] if isinstance(hidden, list) else []
    secrets = [*places, *builtin_secrets(Path(launch.project), Path(home))]
    from stockade.core.locations import locate

    locations = locate()
    own = [str(path) for path in (*locations.private_dirs(), locations.config)]  # never proposed (issue 33)
    return {str(item["path"]): fix_of(item, home=home, secrets=secrets, hidden=own) for item in refused}


def _where_to_add(launch: Launch) -> str:
    """The file an entry goes in: the policy's own, or a new one extending the built-in profile."""
    if not launch.origin.startswith("builtin:"):
        return launch.origin
    return f'a .stockade.toml with extends = ["{launch.origin.removeprefix("builtin:")}"] (then `stockade trust`)'


def _no_network_line(launch: Launch, intercepted: bool = False) -> str:
    """Why "Could not resolve host" or "Network is unreachable" (netcount.py)."""
    where = _where_to_add(launch)
    if launch.session_rules is None:
        from stockade.profiles.hints import own_allow, own_mode

        if not launch.origin.startswith("builtin:") and own_allow(launch.origin) and own_mode(launch.origin) == "none":
            return (  # the file stockade init writes, with hosts added by hand: trusting it changes nothing
                f"the command tried to reach the network, which is off in this sandbox: {launch.origin} sets "
                '[network] mode = "none", which turns it off whatever allow lists; set mode = "allowlist" there'
            )
        if not launch.origin.startswith("builtin:") and own_allow(launch.origin):
            return (  # the file asks for hosts, and is not trusted (a trusted one would have its network)
                f"the command tried to reach the network, which is off in this sandbox: {launch.origin} allows hosts but is not "
                f"trusted, so it can only narrow your own policy; read it, then run: stockade trust {launch.origin}"
            )
        from stockade.profiles.hints import allow_command

        command = allow_command('allow = ["HOST"]', launch.origin)
        return (
            f"the command tried to reach the network, which is off in this sandbox ({launch.origin}); to allow the host it "
            f"needs, run: {command} (or add it under [network] allow in {where})"
        )
    import re  # only after a run that met no route

    ssh = ""
    if re.search(r"\b(ssh|scp|sftp|rsync|git)\b", " ".join(launch.command)):
        ssh = '; ssh (and git over SSH) goes through the proxy only to an allow entry that names its port, such as "host:22"'
    if intercepted:  # every IPv4 connection reaches the filter (bwrap/parts/interception.py): what found no route was IPv6
        return (
            f"the command tried to reach an IPv6 address, which the sandbox has no route for; the hosts {launch.origin} allows "
            f"are reached over IPv4 (by name, or through HTTP_PROXY/HTTPS_PROXY){ssh}"
        )
    return (
        "the command tried to connect around the proxy, which the sandbox has no route for; only clients that use "
        f"HTTP_PROXY/HTTPS_PROXY reach the hosts {launch.origin} allows{ssh} (stockade doctor: interception)"
    )


def _summary(
    launch: Launch,
    timed_out: bool,
    hits: list[str],
    quarantined: list[tuple[str, str]],
    denials: list[dict[str, object]],
    touched: list[tuple[str, str]],
    elapsed: float,
    unreachable: bool = False,
    trouble: list[str] | None = None,
    agent_session: str | None = None,
    refused_locally: int = 0,
    intercepted: bool = False,
    names_asked: tuple[tuple[int, int], str] | None = None,
) -> None:
    """One short stderr block of what stockade knows it blocked; silent when nothing was. The plan's
    notes are said once per agent session (core/notices.py)."""
    origin = launch.origin
    lines: list[str] = []
    if unreachable:
        lines.append(_no_network_line(launch, intercepted))
    if refused_locally:
        lines.append(
            f"{refused_locally} connection(s) to a loopback port inside were refused: the sandbox's 127.0.0.1 and localhost are "
            f'its own; to reach a service of the host\'s there, add "127.0.0.1:PORT" to [network] allow in {_where_to_add(launch)}'
        )
    if timed_out and launch.wall_time:
        from stockade.profiles.units import format_duration

        lines.append(
            f"wall_time {format_duration(launch.wall_time)} reached after {elapsed:.1f}s: the whole sandbox was killed "
            f"(raise wall_time under [limits] in {origin})"
        )
    if "pids" in hits:
        lines.append(f"pids limit {launch.pids} reached: new processes were refused (raise pids under [limits] in {origin})")
    if "file_size" in hits:
        from stockade.profiles.units import format_size

        lines.append(
            f"file_size limit {format_size(launch.file_size or 0)} reached: the command was killed writing past it "
            f"(raise file_size under [limits] in {origin})"
        )
    if "memory" in hits:
        lines.append(f"memory limit reached: the sandbox was out of memory (raise memory under [limits] in {origin})")
    if quarantined:
        from stockade.bwrap.after.summary import grouped_moves

        lines += grouped_moves(quarantined)
    if denials:
        from stockade.proxy.summary import describe_denial, names_line

        lines += [describe_denial(denial, origin) for denial in denials]
        if names_asked is not None and names_asked[0][1]:  # names were refused: how many, beside how many were answered
            lines.append(names_line(*names_asked))
    if touched:
        from stockade.bwrap.after.summary import grouped_files

        names = grouped_files(touched, launch.project)
        lines.append(f"files that run code later were created or changed; review them before running them outside the sandbox: {names}")
    if launch.notes and agent_session is not None:
        from stockade.core.notices import first_time

        lines += [note for note in launch.notes if first_time(launch.state_dir, agent_session, note)]
    else:
        lines += launch.notes
    lines += trouble or []
    if len(lines) > 1:
        from stockade.bwrap.after.summary import bounded

        lines = bounded(lines)
    for line in lines:
        say(f"stockade: {line}")
