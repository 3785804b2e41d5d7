"""The sandbox's filesystem view: which host paths are writable, read-only or hidden.

Planning reads the filesystem (lstat, realpath, glob walks) but changes
nothing, so `--dry-run` shows exactly what a run would do; the one change a
run makes first, creating absent allow_write folders under home, is
make_write_places, which the backend calls before planning. Every mount
destination inside a writable place is checked component by component:
a symlink there could have been planted by an earlier sandboxed run
(ESCAPES 2-4), so stockade refuses rather than follow it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field

from stockade.bwrap.after import changes
from stockade.bwrap.after.sweep import LINK_PIN
from stockade.bwrap.parts import devices, folders, globs, hardlinks, host_sockets, layers, private_home
from stockade.bwrap.parts.args import Bind, BindFrom, Dev, Piece, Proc, ReadOnlyBind, ReadOnlyBindFrom, RemountReadOnly, Symlink, Tmpfs
from stockade.bwrap.parts.marker import MARKER_PATH, MARKER_TARGET
from stockade.core.errors import SandboxSetupError
from stockade.core.locations import Locations
from stockade.profiles import gitdirs
from stockade.profiles.floor import Floor, floor_for, reported_patterns, swept_patterns
from stockade.profiles.model import Policy
from stockade.profiles.paths import below_home, glob_base, is_glob, is_within

DEFAULT_TMP_SIZE = 1 << 30
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
HIDDEN_SYSTEM_DIRS = ("/run",)  # host sockets (D-Bus, agents, docker) live here
SYMLINK_SCAN_LIMIT = 2000


@dataclass(frozen=True)
class Mount:
    """One mount over a path, ordered by depth so parents come first."""

    path: str
    rank: int  # at the same depth: writable root 0, pin 1, read-only 2, mask 3
    piece: Piece


@dataclass
class View:
    mounts: list[Mount] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)
    read_only: list[str] = field(default_factory=list)
    masked: list[str] = field(default_factory=list)
    # writable places inside hidden folders (carve-outs), and the hidden folders holding them: each such
    # folder's tmpfs is made read-only after the places are mounted in it (View.pieces)
    carve_outs: list[str] = field(default_factory=list)
    carved: list[str] = field(default_factory=list)
    # absent protected paths, with their first absent component: nothing mounted, swept after the run
    unguarded: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said after every run
    details: list[str] = field(default_factory=list)  # said only by --dry-run and explain
    tmp_size: int = DEFAULT_TMP_SIZE
    project: str = "/"
    home: str | None = None  # the private home's path (private_home.py), None when the real one shows
    shown: list[str] = field(default_factory=list)  # places of the real home shown read-only inside it
    shown_from: dict[str, str] = field(default_factory=dict)  # shown places that show another path: {path: real source}
    sockets: tuple[str, ...] = ()  # the host sockets the sandbox would see (host_sockets.py), hidden unless listed
    # (private home, writable and shown places, places of /tmp and /run the sandbox sees): host_sockets.paths and visible
    socket_scope: tuple[str | None, tuple[str, ...], tuple[str, ...], tuple[str, ...]] = (None, (), (), ())
    socket_masks: list[str] = field(default_factory=list)  # those the sandbox would see: masked at the start (execute.py)
    shared_files: list[str] = field(default_factory=list)  # writable files with other hard links: copied before a run
    watched: changes.Snapshot = field(default_factory=changes.Snapshot)  # runs-later files before the run
    watch_patterns: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # (reported, swept) globs of the project and watch_roots
    watch_roots: list[str] = field(default_factory=list)  # the other writable places checked after the run (_other_places)
    # the project walk's patterns and, per folder, what of it the plan depends on (plan_cache.py)
    walk: tuple[tuple[str, ...], dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = ((), {})
    # why each protected or hidden path is: the policy entry or floor item (denials.py names it for --trace)
    reasons: dict[str, str] = field(default_factory=dict)
    staged_git: list[str] = field(default_factory=list)  # git dirs shown through a stage (gitstage.py)
    cache_layers: list[layers.Layer] = field(default_factory=list)  # writable package caches, each seen through its own layer
    devices: list[str] = field(default_factory=list)  # host device nodes bound into /dev ([devices], bwrap/parts/devices.py)
    stage_mount: str | None = None  # a staged run's: where the child mounts the project's overlay (checkpoints/stage.py)
    stage_marks: list[tuple[str, str]] = field(default_factory=list)  # (path, why): what the floor would protect, marked instead

    def pieces(self) -> list[Piece]:
        base: list[Piece] = [ReadOnlyBind("/"), Dev(devices=tuple(self.devices)), Proc()]
        base += [Tmpfs(path, size=self.tmp_size, mode="1777") for path in SCRATCH_DIRS if os.path.isdir(path) or path == "/dev/shm"]
        hidden = [path for path in HIDDEN_SYSTEM_DIRS if os.path.isdir(path) and not os.path.islink(path)]
        base += [Tmpfs(path, size=self.tmp_size, mode="0755") for path in hidden]  # RAM-backed: sized like /tmp
        if os.path.dirname(MARKER_PATH) in hidden:  # on the private /run: never on the host (marker.py)
            base.append(Symlink(MARKER_TARGET, MARKER_PATH))
        if self.home:  # before every mount inside it; the sort below keeps deeper ones after
            base.append(Tmpfs(self.home, size=self.tmp_size, mode="0700"))
        return base + [m.piece for m in self._ordered()] + [RemountReadOnly(path) for path in self.carved]

    def _ordered(self) -> list[Mount]:
        return sorted(self.mounts, key=lambda m: (m.path.count("/"), m.rank, m.path))

    def under(self, folder: str, leaving: frozenset[str] | None = None) -> list[Piece]:
        """The mounts inside `folder`, in order: with `leaving`, strictly inside and less those at
        those names (made over a stage mounted at `folder`, gitstage.py); without, `folder`'s own too
        (made instead, when no stage could be)."""
        if leaving is None:
            return [m.piece for m in self._ordered() if m.path == folder or m.path.startswith(folder + "/")]
        skip = {os.path.join(folder, name) for name in leaving}
        return [m.piece for m in self._ordered() if m.path.startswith(folder + "/") and m.path not in skip]

    def add(self, path: str, rank: int, piece: Piece) -> None:
        if not path.startswith("/") or os.path.normpath(path) != path:
            # Mounts are ordered by depth, counted in "/": `/a/b/..` would sort below `/a/x` and cover it.
            raise SandboxSetupError(f"cannot plan a mount at {path!r}: not a plain absolute path; name it without '.', '..' or '//'")
        if not any(m.path == path and m.rank >= rank for m in self.mounts):
            self.mounts.append(Mount(path, rank, piece))


def _symlink_components(path: str) -> list[str]:
    """Every existing component of `path` (itself included) that is a symlink."""
    found: list[str] = []
    current = ""
    for part in path.strip("/").split("/"):
        current += "/" + part
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                found.append(current)
        except (FileNotFoundError, NotADirectoryError):
            break
    return found


def _resolve_root(path: str, allowed: tuple[str, ...], project: str) -> str:
    """A writable root's real path; refuse symlinks that a sandbox or a repository could have planted
    (inside another writable place, or inside the project)."""
    for link in _symlink_components(path):
        owner = [root for root in (*allowed, project) if is_within(os.path.dirname(link), root) and root != path]
        if owner:
            raise SandboxSetupError(
                f"allow_write {path}: {link} is a symlink inside the writable place {owner[0]}; "
                "a sandboxed run could have planted it, so stockade will not follow it (write the real path instead)"
            )
    return os.path.realpath(path)


class PlanChanged(SandboxSetupError):
    """A path turned into a link while it was planned: planning runs again (bwrap/run.py), and only
    a link still there the last time is a refusal."""


def _check_inside(root: str, path: str, why: str) -> None:
    """Refuse a mount destination below `root` that has a symlink on its way (ESCAPES 4)."""
    relative = os.path.relpath(path, root)
    current = root
    for part in relative.split("/"):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return
        except PermissionError:
            raise SandboxSetupError(
                f"cannot look at {current} (permission denied) inside the writable place {root}, so stockade cannot keep "
                f"{why} {path} protected; a sandboxed run can take search permission off its own folders to that end: "
                f"give them back (chmod u+rx {os.path.dirname(current)})"
            ) from None
        if stat.S_ISLNK(mode):
            raise PlanChanged(
                f"{current} is a symlink inside the writable place {root}, so stockade cannot keep {why} {path} "
                f"protected behind it; replace the link with a real folder or file, or remove it"
            )


def _pin_parents(view: View, root: str, path: str) -> None:
    """Bind each folder between root and path onto itself: a mount point cannot be renamed away."""
    current = root
    between = os.path.relpath(os.path.dirname(path), root)
    if between == ".." or between.startswith("../"):
        return  # not below root at all: nothing of root's to pin
    for part in between.split("/"):
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        if os.path.isdir(current):
            view.add(current, 1, Bind(current))


def _root_of(path: str, roots: list[str]) -> str | None:
    inside = [r for r in roots if is_within(path, r)]
    return max(inside, key=len) if inside else None


def visible(path: str, roots: list[str], home: str | None = None, shown: list[str] | None = None) -> bool:
    """False for paths under a private tmpfs (/tmp, /run, a private home) that no root or
    shown place re-exposes."""
    hidden_by_tmpfs = any(is_within(path, d) for d in (*SCRATCH_DIRS, *HIDDEN_SYSTEM_DIRS))
    if home and is_within(path, home):
        hidden_by_tmpfs = not any(is_within(path, place) for place in shown or ())
    return not hidden_by_tmpfs or _root_of(path, roots) is not None


def plan_view(
    policy: Policy,
    locations: Locations,
    cwd: str,
    path_dirs: tuple[str, ...] = (),
    extra_read_only: tuple[str, ...] = (),
    host_env: Mapping[str, str] | None = None,
    unmade: Mapping[str, str] | None = None,
) -> View:
    """The mounts for one run; `path_dirs` are the host PATH's folders (ESCAPES 65);
    `extra_read_only` are files and folders kept read-only even inside a writable root
    (the CI runner's channels into later steps, ESCAPES 67); `host_env` says where git
    finds its config and whether GIT_DIR names a repository; `unmade` says why absent allow_write
    folders could not be made (make_write_places)."""
    env = host_env if host_env is not None else {}
    view = View(tmp_size=policy.limits.tmp_size or DEFAULT_TMP_SIZE)
    if policy.devices.gpu:
        _bind_gpus(view, policy.devices.gpus)
    fs = policy.filesystem
    project = os.path.realpath(policy.project_dir)
    view.project = project
    nested = (f"{project}/**/.git", f"{project}/**/.stockade.toml")
    reported, swept = changes.patterns(project)
    others = _other_places(fs.allow_write, project, str(locations.home))
    elsewhere = {root: (reported_patterns(root), swept_patterns(root)) for root in others}  # `ROOT/**/.git` among the swept
    tree: globs.Tree = {}
    locked: list[str] = []  # folders of ours the walk could not look into: hidden whole (globs.list_folder)
    shared: list[str] = []  # files of the walked places with other hard links (hardlinks.py)
    more = tuple(p for pair in elsewhere.values() for group in pair for p in group)
    cut: list[str] = []
    patterns = (*fs.deny_read, *fs.deny_write, *nested, *reported, *swept, *more)
    matches, walk_notes = globs.expand(patterns, tree, project, locked, shared, more_roots=tuple(others), cut=cut)
    view.notes += walk_notes
    # A place whose walk stopped at the limit is not checked after the run (its note says so); one
    # whose path holds glob characters cannot be named by a pattern. The project's own walk cut short
    # leaves no record at all: then the check after the run walks every pattern again (changes.py).
    view.watch_roots = [root for root in others if root not in cut and not is_glob(root)]
    reported = (*reported, *(p for root in view.watch_roots for p in elsewhere[root][0]))
    swept = (*swept, *(p for root in view.watch_roots for p in elsewhere[root][1]))
    view.notes += [
        f"{root} is writable, but stockade cannot check it after the run for files that run code later made in it "
        f"({'it holds more than ' + format(globs.MAX_ENTRIES, ',') + ' entries' if root in cut else 'its path holds glob characters'}): "
        "name the folders you need in allow_write instead"
        for root in others if root not in view.watch_roots
    ]  # fmt: skip
    # a file the run makes where a deny_write glob matches is moved aside after it: only those that
    # existed at planning could be held read-only (ESCAPES 89)
    swept = (*swept, *(p for p in fs.deny_write if is_glob(p) and p not in swept))
    view.watched = changes.from_matches(reported, swept, matches, tree or None)
    view.watch_patterns = (reported, swept)
    real_denied = [os.path.realpath(p) for pattern in fs.deny_read for p in matches[pattern]]
    view.walk = _walk_summary((project, *view.watch_roots), matches, tree, real_denied)
    real_home = os.path.realpath(locations.home)
    repositories = _repositories((project, os.path.realpath(cwd)), matches[nested[0]], env, cwd)
    # the repositories of the other places: their hooks and config held read-only, as the project's;
    # not made writable where their git data lies elsewhere (a worktree of a repository outside)
    elsewhere_repositories = [gitdirs.locate(os.path.dirname(entry)) for root in others for entry in matches.get(f"{root}/**/.git", [])]
    repositories += _git_dirs_holding(fs.allow_write)
    linked = _linked_git_dirs(repositories, fs.allow_write)
    if policy.checkpoints.stage and linked:  # a staged run changes nothing outside its stage: no worktree's git data either
        view.notes.append(
            f"a staged run keeps git's data outside the project read-only ({', '.join(linked)}): git can read it here, but "
            "commits, branch moves and the index of this worktree need a run without staging"
        )
        linked = []
    deny_write = [p for pattern in fs.deny_write for p in (matches[pattern] or _literal(pattern))]
    roots, anchors = _writable_roots(
        view, fs.allow_write, real_denied, project, linked, unmade or {}, policy.sources, str(locations.home),
        [os.path.realpath(p) for p in deny_write],
    )  # fmt: skip
    anchors += [project, os.path.realpath(cwd)]
    floor = floor_for(
        tuple(r for r in roots if r not in linked), locations.with_home(type(locations.home)(real_home)), policy.protected_files, tuple(anchors)
    )
    _note_reasons(view, policy, matches, floor, locations)
    # a staged run's project changes wait for review (checkpoints/stage.py), which marks these: inside
    # the project the floor holds nothing read-only, and git writes its own config and hooks there
    staged = policy.checkpoints.stage and any(is_within(project, root) for root in roots)
    for path in floor.read_only:
        if staged and is_within(path, project):
            _mark_for_stage(view, path, project, view.reasons.get(path) or "the floor holds it read-only in an unstaged run")
        elif not _behind_linked_git(path):
            _protect(view, path, roots, watch_absent=True)
    held = gitdirs.protected_paths([*repositories, *(layout for layout in elsewhere_repositories if layout is not None)], real_home, env)
    for path in held + _linked_git_dir_locks(repositories, linked, project) + matches[nested[1]]:
        if staged and is_within(path, project):
            _mark_for_stage(view, path, project, f"git runs it later ({os.path.basename(path)})")
            continue
        view.reasons.setdefault(path, f"floor: git's {os.path.basename(path)} runs code later (git)")
        _protect(view, path, roots, watch_absent=True)
    for path in deny_write:
        _protect(view, path, roots, watch_absent=True)  # absent, at any depth: moved aside if the run makes it
    for folder in path_dirs:
        real = os.path.realpath(folder)
        if os.path.isabs(folder) and os.path.isdir(real) and not is_within(real, project):
            view.reasons.setdefault(real, f"floor: {folder} is on PATH, so it stays read-only")
            _protect(view, real, roots, watch_absent=False)
    from stockade.proxy.audit import generations

    own = [*floor.hidden, *generations(policy.audit.log), *_audit_folder(policy, locations, project, cwd)]
    _show_home(view, policy, locations, real_home, roots, real_denied, path_dirs, env, (project, os.path.realpath(cwd)), own)
    kept = _kept_links(str(locations.state), project) if shared else {}
    view.shared_files = [
        path for path in hardlinks.to_copy(shared, kept) if _root_of(path, roots) is not None and not (staged and is_within(path, project))
    ]  # a staged project's files are copied up by overlay before their first write: the host's links hold
    for path in extra_read_only:
        view.reasons.setdefault(os.path.realpath(path), "floor: a CI runner's channel into later steps")
        _protect(view, os.path.realpath(path), roots, watch_absent=False)
    listed = _listed_sockets(view, policy.network.unix_sockets)
    exposed = tuple((*roots, *view.shown, *view.shown_from.values()))  # a shown link shows its target
    private = own  # ESCAPES 15, 82
    # Sockets in stockade's own hidden folders (the daemon's control socket) need no mask, and a daemon
    # starting or leaving there must not make every stored plan stale.
    unseen = tuple(dict.fromkeys((*floor.hidden, *(os.path.realpath(p) for p in floor.hidden))))
    view.socket_scope = (view.home, exposed, tuple(p for p in exposed if host_sockets.private(p)), unseen)
    view.sockets = host_sockets.scoped(view.socket_scope)
    sockets = [path for path in view.sockets if not any(is_within(os.path.realpath(path), place) for place in listed)]
    locked = [folder for folder in locked if _root_of(folder, roots) is not None]  # elsewhere no chmod is possible
    view.notes += [
        f"{folder} may not be read or searched by its owner, so stockade cannot check what is inside: hidden (chmod u+rx to use it)"
        for folder in locked
    ]
    for path in private:
        view.reasons.setdefault(os.path.realpath(path), "floor: stockade's own state")
    for folder in locked:
        view.reasons.setdefault(folder, "a folder its owner may not read, hidden whole")
    hidden = [*real_denied, *_symlink_targets(real_denied), *(os.path.realpath(p) for p in private), *locked]
    for path in sorted(dict.fromkeys(hidden), key=len):  # outer masks first; anything inside one is hidden already
        _mask(view, path, roots)
    for path in sockets:
        _mask(view, path, roots, socket=True)
    _layer_caches(view, roots, real_home, str(locations.cache), project)
    if staged:
        from stockade.checkpoints.stage import mount_point  # only a staged run's planning loads it

        _stage_project(view, project, mount_point(str(locations.state), project))
    _drop_inside_hidden(view)
    view.staged_git = [] if staged else _stageable(view, repositories, roots)
    return view


def _bind_gpus(view: View, gpus: tuple[str, ...]) -> None:
    view.devices = devices.gpu_nodes(gpus)
    chosen = f"GPU {', '.join(gpus)}" if gpus else "GPU"
    if view.devices:
        view.details.append(f"[devices] gpu: {chosen} device nodes bound: {', '.join(view.devices)}")
    else:
        view.notes.append(
            f"GPUs asked for (--gpu or [devices] gpu = true), but this machine has no {chosen} device nodes (/dev/nvidia*, /dev/dri/renderD*): "
            "the run has no GPU (is the driver loaded? `nvidia-smi` on the host says)"
        )


def _mark_for_stage(view: View, path: str, project: str, why: str) -> None:
    """A path the floor would hold read-only, marked in a staged run's review instead (and where it
    is a link on the host, the path it leads to in the project, which a write through it changes);
    a folder's contents with it."""
    why = why.removeprefix("floor: ")
    for place in dict.fromkeys((path, os.path.realpath(path))):
        if is_within(place, project):
            view.stage_marks.append((place, why))


def _stage_project(view: View, project: str, mount: str) -> None:
    """The project seen through its stage's overlay, mounted at `mount` by the child before bwrap
    (layers.enter): every writable bind inside it is bound from the overlay instead, so that no
    write of the run reaches the host's project; read-only binds and masks stay the host's."""
    kept: list[Mount] = []
    for item in view.mounts:
        if type(item.piece) is Bind and is_within(item.path, project):
            if item.path != project:
                kept.append(Mount(item.path, item.rank, BindFrom(mount + item.path[len(project) :], item.path)))
        else:
            kept.append(item)
    view.mounts = kept
    view.add(project, 0, BindFrom(mount, project))
    view.stage_mount = mount


def _kept_links(state: str, project: str) -> dict[tuple[int, int], int]:
    """Inodes of the project that its checkpoints hold too (a file a run renamed or chmodded)."""
    from stockade.checkpoints.store import kept_links, project_folder

    return kept_links(project_folder(state, project))


def _layer_caches(view: View, roots: list[str], home: str, cache: str, project: str) -> None:
    """Each package cache the sandbox could write is bound from its layer's mount point, made by
    the child before bwrap starts (layers.py).

    A cache is layered only where the sandbox would see it writable: under a writable bind, with
    no read-only bind or mask nearer (deny_write, deny_read, the floor). The folders between its
    writable root and it are pinned, so that none can be renamed away and a plain folder made in
    its place. Inside it nothing of the host's is bound writable: a pin on the way to a protected
    path is dropped (the layer keeps the host's files), and a writable place inside (a carve-out)
    is bound from the layer too. A known cache that is absent or a link is kept by the floor
    instead: what the run makes there is moved aside after it."""
    places, unmade = layers.candidates(view.writable, home)
    for path in unmade:
        view.reasons.setdefault(path, "floor: a package cache the host has not made, or a link: the host would build from it")
        _protect(view, path, roots, watch_absent=True)
    seen = [place for place in places if _writable_here(view, place)]
    outermost = [p for p in seen if not any(p != other and is_within(p, other) for other in seen)]
    store = os.path.join(cache, "layers")
    view.cache_layers = [layers.layer_of(place, store, project) for place in outermost]
    for place, _upper, _work, mount_point in view.cache_layers:
        inside: list[Mount] = []
        for mount in view.mounts:
            if type(mount.piece) not in (Bind, BindFrom) or not is_within(mount.path, place):
                inside.append(mount)
            elif mount.path != place and mount.path in view.writable:  # a writable place inside: from the layer
                inside.append(Mount(mount.path, mount.rank, BindFrom(mount_point + mount.path[len(place) :], mount.path)))
        view.mounts = inside
        view.add(place, 0, BindFrom(mount_point, place))
        root = _root_of(place, roots)
        if root is not None and root != place:
            _pin_parents(view, root, place)


def _writable_here(view: View, place: str) -> bool:
    """The nearest mount over `place` (itself or a folder holding it) is a writable bind."""
    over = [m for m in view.mounts if is_within(place, m.path)]
    if not over:
        return False
    nearest = max(over, key=lambda m: (m.path.count("/"), m.rank))
    return type(nearest.piece) in (Bind, BindFrom)


def _drop_inside_hidden(view: View) -> None:
    """No mount inside a hidden folder: everything there is hidden already (deny wins), and bwrap
    cannot make a mount point in the read-only empty folder that hides it (deny_read X with
    deny_write X/sub was a start failure, issue 33). But a writable place inside it (a carve-out:
    `deny_read = ["data"]`, `allow_write = ["data/out"]`) keeps its bind and every mount inside
    it; nothing between the two (a pin of a folder on the way would show that folder whole)."""
    hidden = [m.path for m in view.mounts if m.rank == 3 and isinstance(m.piece, Tmpfs)]
    if not hidden:
        return

    def dropped(path: str) -> bool:
        inside = [folder for folder in hidden if path != folder and is_within(path, folder)]
        return bool(inside) and not any(carved_out(view, path, folder) for folder in inside)

    view.mounts = [m for m in view.mounts if not dropped(m.path)]
    view.socket_masks = [path for path in view.socket_masks if not dropped(path) and not any(path == folder for folder in hidden)]


# Where a staged git dir's real folder is seen inside (gitstage.py), one folder per staged git dir;
# the sandbox's /run is its own tmpfs (View.pieces).
GIT_ALIASES = "/run/stockade-git"
# Folders a stage binds as they are (gitstage.BOUND): the plan's mounts inside them are made again there.
STAGE_BOUND = ("objects", "refs", "modules", "worktrees")
# What a stage holds as copies (gitstage.CONFIG, HEAD, INDEX, STATE_FOLDERS): a git dir with a mount
# of the plan's there (a deny_read or deny_write entry) is not staged, as the copy would undo it.
STAGED_COPIES = ("config", "config.worktree", "HEAD", "index", "rebase-merge", "rebase-apply", "sequencer")


def _stageable(view: View, repositories: list[gitdirs.GitLayout], roots: list[str]) -> list[str]:
    """The project's git dirs whose config the floor holds read-only where git could otherwise
    write it: each gets a stage at run time, so that git's own config writes work (gitstage.py)."""
    if "/run" not in [path for path in HIDDEN_SYSTEM_DIRS if os.path.isdir(path) and not os.path.islink(path)]:
        return []  # no private /run to show the real git dir at
    found: list[str] = []
    for layout in repositories:
        git_dir = layout.git_dir
        if layout.linked or git_dir in found or not is_within(git_dir, view.project) or _root_of(git_dir, roots) is None:
            continue
        config = os.path.join(git_dir, "config")
        if config not in view.read_only:
            continue
        if any(is_within(git_dir, place) for place in (*view.read_only, *view.masked)):
            continue
        copies = [os.path.join(git_dir, name) for name in STAGED_COPIES]
        inside = [m for m in view.mounts if m.path.startswith(git_dir + "/")]
        floor_held = (config, os.path.join(git_dir, "config.worktree"))  # the stage judges them instead
        if any(any(is_within(m.path, copy) for copy in copies) and not (m.path in floor_held and type(m.piece) is ReadOnlyBind) for m in inside):
            continue
        if not all(type(m.piece) in MOVABLE for m in inside):
            continue
        found.append(git_dir)
    return found


MOVABLE = (Bind, ReadOnlyBind, BindFrom, ReadOnlyBindFrom, Tmpfs)


def moved(piece: Piece, old: str, new: str) -> Piece:
    """The same mount with `old` at the start of its place replaced by `new` (a staged git dir's
    alias); its source stays the host's path."""

    def at(path: str) -> str:
        return new + path[len(old) :]

    if isinstance(piece, ReadOnlyBindFrom):  # BindFrom too
        return type(piece)(piece.source, at(piece.dest))
    if isinstance(piece, ReadOnlyBind):
        return ReadOnlyBindFrom(piece.path, at(piece.path))
    if isinstance(piece, Bind):
        return BindFrom(piece.path, at(piece.path))
    if isinstance(piece, Tmpfs):
        return Tmpfs(at(piece.path), piece.size, piece.read_only, piece.mode)
    raise TypeError(f"cannot move a {type(piece).__name__}")


def _listed_sockets(view: View, entries: tuple[str, ...]) -> set[str]:
    """The `unix_sockets` entries the sandbox may reach: each only where it really is (ESCAPES 86). An entry
    reached through a link is left out with a note: a link in a writable place can be pointed at
    another socket by an earlier run, which nobody listed."""
    listed: set[str] = set()
    for entry in entries:
        real = os.path.realpath(entry)
        if real != os.path.normpath(entry):
            view.notes.append(f"unix_sockets {entry} is reached through a link (to {real}): not reachable; list {real} itself if you mean it")
            continue
        listed.add(real)
    return listed


def _note_reasons(view: View, policy: Policy, matches: dict[str, list[str]], floor: Floor, locations: Locations) -> None:
    """Which policy entry or floor item each protected or hidden path comes from (View.reasons)."""
    from stockade.profiles.runs_later import TABLE

    home = str(locations.home).rstrip("/")

    def spelled(path: str) -> str:
        return "~" + path[len(home) :] if home and is_within(path, home) else path

    fs = policy.filesystem
    for pattern in fs.deny_read:
        for path in matches[pattern]:
            view.reasons.setdefault(os.path.realpath(path), f"deny_read {spelled(pattern)}")
    for pattern in fs.deny_write:
        for path in matches[pattern] or _literal(pattern):
            view.reasons.setdefault(path, f"deny_write {spelled(pattern)}")
    for path in floor.read_only:
        entry = next((e for e in TABLE if path.endswith("/" + e.path)), None)
        if entry is not None:
            view.reasons.setdefault(path, f"floor: {entry.path} runs code later ({entry.source.split(':')[0]})")
        else:
            view.reasons.setdefault(path, f"floor: {spelled(path)} (stockade's config or a policy file) stays read-only")


def _show_home(
    view: View,
    policy: Policy,
    locations: Locations,
    real_home: str,
    roots: list[str],
    denied: list[str],
    path_dirs: tuple[str, ...],
    env: Mapping[str, str],
    anchors: tuple[str, ...],
    own: list[str] | None = None,
) -> None:
    """Make the sandbox's home its own when the policy says so (private_home.py). With HOME
    set to `/` (or nowhere real), the account's own home is the one made private: its secrets
    are still on the read-only root, and the policy's `~` entries name nothing there."""
    spelled = str(locations.home).rstrip("/") or "/"
    if policy.filesystem.home == "private" and not os.path.isdir(real_home) or real_home == "/":
        real_home = spelled = private_home.account_home()
    if not private_home.applies(policy.filesystem.home, real_home, roots, denied):
        return
    wanted = [*private_home.wanted(policy.filesystem.allow_read, path_dirs, env, anchors), private_home.OWN_CODE]
    git_config = (os.path.join(spelled, ".gitconfig"), os.path.join(spelled, ".config", "git"))
    if any(place in git_config for place in wanted):  # what the user's git config includes is read with it
        wanted += gitdirs.UserGit(real_home, dict(env)).included
    wanted = [real_home + place[len(spelled) :] if place != spelled and is_within(place, spelled) else place for place in wanted]
    wanted = _not_own(view, wanted, own or [])
    view.home = real_home
    for shown in private_home.shown_places(real_home, wanted, roots, denied, (*SCRATCH_DIRS, *HIDDEN_SYSTEM_DIRS)):
        if _root_of(shown.source, roots) is not None:
            # a link into a writable place: bwrap binding from the path would follow whatever a
            # concurrent sandbox swapped in there (a link to a secret); a link of the sandbox's
            # own resolves in its view, where every mask holds
            view.add(shown.path, 2, Symlink(shown.source, shown.path))
            continue
        piece: Piece = ReadOnlyBind(shown.path) if shown.source == shown.path else ReadOnlyBindFrom(shown.source, shown.path)
        view.add(shown.path, 2, piece)
        view.shown.append(shown.path)
        if shown.source != shown.path:
            view.shown_from[shown.path] = shown.source
    for path, text, target in private_home.top_level_links(real_home):
        taken = path in view.shown or any(is_within(root, path) for root in roots)
        hidden = any(is_within(target, d) for d in denied) or not visible(target, roots, view.home, view.shown)
        if not taken and not hidden:  # a link to what the sandbox sees anyway (a project folder elsewhere)
            view.add(path, 1, Symlink(text, path))


def _audit_folder(policy: Policy, locations: Locations, project: str, cwd: str) -> list[str]:
    """A policy's own audit log lives in a folder the sandbox never sees: masking the log's files
    alone was undone by rotation (the mask stays with the renamed file, and the new log had none).
    A folder that holds the project or the working directory cannot be hidden: a policy error."""
    log = policy.audit.log
    if not log or is_within(os.path.realpath(log), os.path.realpath(locations.state)):
        return []
    folder = os.path.dirname(os.path.realpath(log))
    if folder == "/" or any(is_within(place, folder) for place in (project, os.path.realpath(cwd), os.path.realpath(locations.home))):
        from stockade.core.errors import PolicyError
        from stockade.profiles.toml_lines import where_written

        file, line = where_written(policy.sources, log, str(locations.home))
        raise PolicyError(
            f"[audit] log {log}: its folder {folder} holds the project, the working directory or your home, which a "
            "sandbox sees; give the log a folder of its own (stockade hides that folder from every sandbox)",
            file=file, line=line,
        )  # fmt: skip
    return [folder]


def _not_own(view: View, wanted: list[str], own: list[str]) -> list[str]:
    """The places to show, less any inside stockade's own folders or a hard link to one of its
    files (issue 33): the CA's key, the trust store, audit logs, plans. A place holding one
    is shown with it masked (plan_view masks every own folder wherever it is seen)."""
    real_own = [os.path.realpath(path) for path in own]
    inodes: set[tuple[int, int]] | None = None  # looked up only for a file with other links: planning reads no more
    kept = []
    for place in wanted:
        real = os.path.realpath(place)
        inside = next((folder for folder in real_own if is_within(real, folder)), None)
        linked = False
        if inside is None:
            try:
                info = os.stat(real)
            except OSError:
                info = None
            if info is not None and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                inodes = _own_inodes(real_own) if inodes is None else inodes
                linked = (info.st_dev, info.st_ino) in inodes
        if inside is None and not linked:
            kept.append(place)
            continue
        view.notes.append(f"allow_read {place}: stockade's own files (its CA key, trust store, audit log, plans) are never shown; left out")
    return kept


def _own_inodes(places: list[str]) -> set[tuple[int, int]]:
    """(device, inode) of the files in stockade's own folders and one level below (the CA's
    folder, the plans), and of own files named directly (audit logs): what a hard link could show."""
    found: set[tuple[int, int]] = set()
    todo = [(place, 0) for place in places]
    while todo:
        place, depth = todo.pop()
        try:
            if not os.path.isdir(place):
                info = os.stat(place)
                found.add((info.st_dev, info.st_ino))
                continue
            listing = list(os.scandir(place))
        except OSError:
            continue
        for entry in listing[:4096]:
            try:
                if entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    found.add((info.st_dev, info.st_ino))
                elif entry.is_dir(follow_symlinks=False) and depth < 1:
                    todo.append((entry.path, depth + 1))
            except OSError:
                continue
    return found


def _walk_summary(
    roots: tuple[str, ...], matches: dict[str, list[str]], tree: globs.Tree, denied: list[str]
) -> tuple[tuple[str, ...], dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]:
    """(the patterns walked inside the project and the other places watched (`roots`), {folder:
    (subfolders, names matching one of them)}).

    Every glob whose walk starts in the project counts, not only those based at its top:
    `config/*.key` is walked from project/config, and a new key there must not keep the plan.
    Folders inside a denied one are left out (any change there plans again): planning also
    lists them for links, whose targets it hides (_symlink_targets), which no summary shows.
    """
    from stockade.bwrap.plan.plan_cache import matched_names, summarise

    walked = tuple(p for p in matches if is_glob(p) and any(is_within(glob_base(p), root) for root in roots))
    names = matched_names({pattern: matches[pattern] for pattern in walked})
    scanned = [path for path in denied if any(is_within(path, root) for root in roots)]
    return walked, {
        folder: summarise(subfolders, names.get(folder, ()))
        for folder, (_stamp, subfolders, _digest) in tree.items()
        if not any(is_within(folder, path) for path in scanned)
    }


def _repositories(anchors: tuple[str, ...], git_entries: list[str], env: Mapping[str, str], cwd: str) -> list[gitdirs.GitLayout]:
    """Every repository a run could make git act in: the project's and the working
    directory's own (a worktree or submodule included), each `.git` the walk found
    in the project, and the one GIT_DIR names."""
    work_trees = [*anchors, *(os.path.dirname(entry) for entry in git_entries)]
    found = [gitdirs.locate(folder) for folder in dict.fromkeys(work_trees)]
    found.append(gitdirs.from_environment(env, cwd))
    return [layout for layout in found if layout is not None]


def _other_places(allow_write: tuple[str, ...], project: str, home: str) -> list[str]:
    """The writable places outside the project whose floor is checked after the run as the
    project's is (walked at planning, and after the run where folders changed): each existing
    allow_write folder (real path) but the package caches (seen through layers of their own,
    layers.py, so the host's are never written), and the whole system's top folders."""
    caches = {os.path.realpath(os.path.join(home, place[2:])) for place in layers.LAYERED_CACHES}
    places: list[str] = []
    for entry in allow_write:
        real = os.path.realpath(entry)
        if real in ("/", *SYSTEM_TOPS) or is_within(real, project) or not os.path.isdir(real):
            continue
        if any(is_within(real, cache) for cache in caches) or any(is_within(real, place) for place in places):
            continue
        places = [place for place in places if not is_within(place, real)] + [real]
    return sorted(places)


SYSTEM_TOPS = ("/tmp", "/var/tmp", "/dev", "/proc", "/sys", "/run")


def _git_dirs_holding(allow_write: tuple[str, ...]) -> list[gitdirs.GitLayout]:
    """The git dir each writable place is, or lies in (`allow_write = ["/data/x/.git"]`, or its
    hooks folder): its hooks and config are protected as any repository's."""
    found: list[gitdirs.GitLayout] = []
    for entry in allow_write:
        current = os.path.realpath(entry)
        while current != "/":
            if (os.path.basename(current) == ".git" and os.path.isdir(current)) or gitdirs.is_git_dir(current):
                found.append(gitdirs.GitLayout(None, None, current, gitdirs.common_dir_of(current)))
                break
            current = os.path.dirname(current)
    return found


def _behind_linked_git(path: str) -> bool:
    """A floor path under a `.git` that is a file or a link: gitdirs protects what it points to."""
    head, found, _rest = path.partition("/.git/")
    if not found:
        return False
    dot_git = head + "/.git"
    return os.path.islink(dot_git) or (os.path.lexists(dot_git) and not os.path.isdir(dot_git))


def _linked_git_dirs(repositories: list[gitdirs.GitLayout], allow_write: tuple[str, ...]) -> list[str]:
    """The git dirs of a writable worktree or submodule checkout whose git data lives
    elsewhere: git writes its index, objects and refs there, so they are writable too
    (their hooks and config stay protected like any repository's). Only a git dir that
    names the work tree back (gitdirs.points_back): a `.git` a run planted could name any
    folder, home included."""
    writable = [os.path.realpath(entry) for entry in allow_write if os.path.lexists(entry)]
    extra: list[str] = []
    for layout in repositories:
        if (
            layout.work_tree
            and layout.linked
            and any(is_within(os.path.realpath(layout.work_tree), root) for root in writable)
            and gitdirs.points_back(layout)
        ):
            extra += [layout.git_dir, layout.common_dir]
    return extra


def _linked_git_dir_locks(repositories: list[gitdirs.GitLayout], linked: list[str], project: str) -> list[str]:
    """Folders of a linked common dir that stay read-only, existing or not: the check after the
    run walks only the project, so a submodule git dir made in `modules/` out there (its own
    hooks and config) would never be looked at."""
    locks: list[str] = []
    for layout in repositories:
        if layout.common_dir in linked and not is_within(layout.common_dir, project):
            locks.append(os.path.join(layout.common_dir, "modules"))
    return locks


def make_write_places(allow_write: tuple[str, ...], home: str, project: str, dry_run: bool = False) -> dict[str, str]:
    """Create each absent allow_write folder under the user's home (0700, the user's own),
    so a policy's caches work in a fresh home (a new user, a new CI runner); returns
    {folder: the line saying why it could not be made}. A path with a symlink on its way
    that a sandbox could have planted is left alone: planning refuses it with its own message.
    With `dry_run` nothing is made, and each line says a run would make it."""
    unmade: dict[str, str] = {}
    for entry in allow_write:
        if os.path.lexists(entry) or not below_home(entry, home):
            continue
        try:
            _resolve_root(entry, allow_write, project)
        except SandboxSetupError:
            continue
        why = _why_unmakeable(entry) if dry_run else None
        if dry_run and why is None:
            unmade[entry] = f"allow_write {entry} does not exist: a run makes it (0700); this plan leaves it out"
            continue
        try:
            if why is None:
                os.makedirs(entry, mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            why = error.strerror
        if why is not None:
            unmade[entry] = f"allow_write {entry} does not exist and could not be created ({why}): skipped"
    return unmade


def _why_unmakeable(folder: str) -> str | None:
    """What os.makedirs would fail with, judged without making anything (--dry-run)."""
    parent = folder
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return os.strerror(errno.ENOTDIR)
    if not os.access(parent, os.W_OK | os.X_OK):
        return os.strerror(errno.EACCES)
    return None


def _writable_roots(
    view: View,
    allow_write: tuple[str, ...],
    denied: list[str],
    project: str,
    git_dirs: list[str],
    unmade: Mapping[str, str],
    sources: tuple[str, ...] = (),
    home: str = "/",
    unwritable: list[str] | None = None,
) -> tuple[list[str], list[str]]:
    """(the folders bound writable, every allow_write entry's real path: floor anchors);
    `git_dirs` (already real paths) are writable too, without anchoring the floor."""
    roots: list[str] = []
    for entry in allow_write:
        if entry == "/":
            raise SandboxSetupError("allow_write '/' would make the whole system writable; list the folders you need")
        if not os.path.lexists(entry):
            view.details.append(unmade.get(entry) or f"allow_write {entry} does not exist: skipped")
            continue
        try:
            real = _resolve_root(entry, allow_write, project)
        except SandboxSetupError as exc:  # the entry as written cannot be honoured: the policy's line says so (exit 2)
            from stockade.core.errors import PolicyError
            from stockade.profiles.toml_lines import where_written

            file, line = where_written(sources, entry, home)
            raise PolicyError(str(exc), file=file, line=line) from None
        if real == "/":
            raise SandboxSetupError(f"allow_write {entry} resolves to '/'; list the folders you need")
        hidden = [d for d in denied if d == real]  # both hidden and writable: deny wins
        if hidden:
            view.notes.append(f"allow_write {entry} is also deny_read {hidden[0]}: deny wins, skipped")
            continue
        if any(is_within(real, d) for d in denied):
            view.carve_outs.append(real)  # writable inside a hidden folder: mounted into its empty tmpfs
        roots.append(real)
    anchors = list(roots)
    roots += [path for path in git_dirs if path != "/" and not any(is_within(path, d) for d in denied)]
    roots = sorted(dict.fromkeys(roots), key=len)

    def covered(root: str, by: str) -> bool:
        """`root` is seen writable through `by`'s bind: inside it, with no hidden folder between."""
        return is_within(root, by) and not any(is_within(d, by) and d != by and is_within(root, d) for d in denied)

    kept = [r for i, r in enumerate(roots) if not any(covered(r, other) for other in roots[:i])]
    for root in kept:
        _check_reachable(view, root)
        if root in view.carve_outs and any(is_within(root, d) for d in unwritable or ()):
            view.add(root, 0, ReadOnlyBind(root))  # seen inside its hidden folder, but deny_write wins over allow_write
            continue
        view.add(root, 0, Bind(root))
        view.writable.append(root)
    return kept, sorted(dict.fromkeys(anchors), key=len)


def _protect(view: View, path: str, roots: list[str], *, watch_absent: bool) -> None:
    """Keep `path` read-only inside its writable root; if absent and `watch_absent`, whatever
    the run creates there is moved aside after it."""
    root = _root_of(path, roots)
    if root is None or path == root:
        if path == root:  # a writable root that is itself protected: make it read-only
            view.add(path, 2, ReadOnlyBind(path))
            view.read_only.append(path)
        return
    link = _first_link(root, path)
    if link is not None:
        # A protected name behind a symlink (.claude linked into a dotfiles repository): the
        # target is protected where it really is, and every link on the way to it that the run
        # could replace (.claude -> mid -> dotfiles/claude: `mid` as well as `.claude`, and a link
        # inside a link's target) is checked after the run (sweep.py: replaced, it is moved
        # aside and put back).
        for hop in _links_on_way(path):
            hop_root = _root_of(hop, roots)
            if hop_root is not None and hop != hop_root:
                try:
                    text = os.readlink(hop)
                except OSError:  # no longer a link (a run changing it while this plan was made)
                    raise PlanChanged(f"{hop} changed while the run was planned; run again") from None
                view.unguarded.append((hop, LINK_PIN + text))
        real = os.path.realpath(path)
        if real != path:
            _protect(view, real, roots, watch_absent=watch_absent)
        return
    _check_inside(root, path, "read-only")
    if os.path.lexists(path):
        view.add(path, 2, ReadOnlyBind(path))
        view.read_only.append(path)
        _pin_parents(view, root, path)
        return
    if not watch_absent:
        return
    # Absent: nothing is mounted (a mount point would appear in the project, on the host too);
    # whatever the run creates there is moved aside after it (sweep.py).
    view.unguarded.append((path, _first_absent(root, path)))


def _first_link(root: str, path: str) -> str | None:
    """The first symlink on the way from `root` down to `path` (`path` itself included)."""
    current = root
    for part in os.path.relpath(path, root).split("/"):
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return current
        except OSError:
            return None
    return None


def _links_on_way(path: str) -> list[str]:
    """Every symlink that resolving `path` passes through, in order, each spelled by its real
    folder (the walk os.path.realpath makes, `..` applied to what is resolved so far)."""
    links: list[str] = []
    done = "/"
    todo = [part for part in reversed(path.split("/")) if part]
    while todo and len(links) <= 40:  # the kernel's limit: past it the path resolves to nothing
        part = todo.pop()
        if part == ".":
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        current = os.path.join(done, part)
        try:
            is_link = stat.S_ISLNK(os.lstat(current).st_mode)
            target = os.readlink(current) if is_link else ""
        except OSError:
            is_link = False
        if not is_link:
            done = current
            continue
        links.append(current)
        if target.startswith("/"):
            done = "/"
        todo.extend(part for part in reversed(target.split("/")) if part)
    return list(dict.fromkeys(links))


def _literal(pattern: str) -> list[str]:
    """A deny path that is no glob names its place whether or not it exists yet."""
    return [] if globs.is_glob(pattern) else [pattern]


def _first_absent(root: str, path: str) -> str:
    current = root
    for part in os.path.relpath(path, root).split("/"):
        current = os.path.join(current, part)
        if not os.path.lexists(current):
            return current
    return path


def _mask(view: View, path: str, roots: list[str], socket: bool = False) -> None:
    """Hide `path` wherever the sandbox sees it: at its own path and, inside the target of a
    symlinked shown place of the home, at that place's path too (its bind shows the target
    there, where no mask of the target's own path reaches)."""
    _mask_one(view, path, roots, socket)
    for shown, source in view.shown_from.items():
        if is_within(path, source):
            _mask_one(view, shown + path[len(source) :] if path != source else shown, roots, socket)


def _mask_one(view: View, path: str, roots: list[str], socket: bool = False) -> None:
    """Hide `path`: an empty read-only folder, or an unopenable file; a host `socket` is
    masked when the run starts, if still there (execute.py)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    except PermissionError:
        if _root_of(path, roots) is None:
            return  # out of the sandbox's reach: it cannot change permissions there
    if _root_of(path, roots) is None and not _sandbox_reaches(os.path.dirname(path)):
        return  # another user's private folder: closed to the sandbox, and to bwrap making a mount there
    if not visible(path, roots, view.home, view.shown) or any(is_within(path, m) and not carved_out(view, path, m) for m in view.masked):
        return
    root = _root_of(path, roots)
    if root is not None and path != root:
        _check_inside(root, path, "hidden")
        _pin_parents(view, root, path)
    if socket:
        view.socket_masks.append(path)
        return
    carving = os.path.isdir(path) and any(is_within(place, path) and place != path for place in view.carve_outs)
    if carving:  # passable, not listable; writable until the places inside are mounted, then read-only
        piece: Piece = Tmpfs(path, mode="0111")
        view.carved.append(path)
    else:
        piece = Tmpfs(path, read_only=True, mode="0000") if os.path.isdir(path) else ReadOnlyBindFrom("/dev/null", path)
    view.add(path, 3, piece)
    view.masked.append(path)


def carved_out(view: View, path: str, folder: str) -> bool:
    """`path` lies in a writable place inside the hidden `folder` (a carve-out): the sandbox sees it."""
    return any(is_within(path, place) and is_within(place, folder) and place != folder for place in view.carve_outs)


def _check_reachable(view: View, root: str) -> None:
    """As root, a writable place of another user's: the sandbox's root (only uid 0 is mapped
    inside) cannot enter a folder closed to others, nor write where only its owner may."""
    if not folders.AS_ROOT:
        return
    if not _sandbox_reaches(root):
        raise SandboxSetupError(
            f"{root} (or a folder on its way) belongs to another user and is closed to others; as root the sandbox "
            f"cannot enter it (only uid 0 is mapped inside): run stockade as its owner (runuser -u OWNER -- stockade run ...)"
        )
    info = os.stat(root)
    if info.st_uid != 0 and not info.st_mode & stat.S_IWOTH:
        view.notes.append(
            f"{root} belongs to uid {info.st_uid}: as root the sandbox can read it but not write there "
            f"(only uid 0 is mapped inside); run stockade as its owner to write"
        )


def _sandbox_reaches(folder: str) -> bool:
    """Whether the sandbox can search every folder on the way to `folder`: as root, only
    uid and gid 0 are mapped inside, so another user's 0700 folder is closed to it."""
    if not folders.AS_ROOT:
        return os.access(folder, os.X_OK)
    current = "/"
    for part in folder.strip("/").split("/"):
        if not part:
            continue
        current = os.path.join(current, part)
        try:
            info = os.stat(current)
        except OSError:
            return False
        if not folders.sandbox_can_enter(info):
            return False
    return True


def _symlink_targets(denied: list[str]) -> list[str]:
    """Real targets of symlinks inside denied folders: both spellings stay unreadable (ESCAPES 8)."""
    targets: list[str] = []
    budget = SYMLINK_SCAN_LIMIT
    for folder in denied:
        if not os.path.isdir(folder):
            continue
        stack = [folder]
        while stack and budget > 0:
            current = stack.pop()
            try:
                with os.scandir(current) as entries:
                    for entry in entries:
                        budget -= 1
                        if entry.is_symlink():
                            target = os.path.realpath(entry.path)
                            if not any(is_within(target, d) for d in denied):
                                targets.append(target)
                        elif entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
            except OSError:
                continue
    return targets
