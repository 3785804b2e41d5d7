"""Plans of earlier runs, used again while nothing they were made from has changed.

Planning a run reads the policy files, walks the project and looks at a few
hundred paths (floor files, PATH folders, symlinks on the way); with the
imports that takes, it costs several times what the sandbox itself does. The
same inputs give the same plan, so a run stores its plan (an execute.Launch)
and the next run with unchanged inputs executes it without planning.

What a plan depends on, and how a later run knows it has not changed:
- the run's options (--policy, --profile, --quiet), the working directory,
  the whole environment, the user and groups, whether stdin is a terminal,
  where this stockade's code is (two installs share the cache folder):
  the key, compared whole;
- every path planning asked the os module about (stat, lstat, open,
  scandir, listdir, readlink, access): recorded while planning by wrapping
  those functions, and stored with a stamp of each path (taken just before
  planning first looked at it, so nothing that changed while planning ran
  is vouched for) and of every folder on its way (lexical and real). A file stamp is its lstat with ctime, which
  no one can set back; a folder's is who it is (inode, mode, owner) and, if
  planning listed it, when its entries last changed;
- a folder of the project walk whose entries changed is listed again: the
  plan still holds if it has the same subfolders and the same names matching
  the walk's patterns (a new source file changes nothing; a new `.envrc` or
  `.git` does);
- stockade's own code files, stamped like any other file.

- the host's pathname sockets the sandbox would see (host_sockets.py), read
  again and compared whole: planning hides them;

The recorder is the one door: planning code must read through the os and
open functions it wraps. tests/bwrap/test_plan_reads.py holds planning to
that both ways: a planning run under `sys.addaudithook`, where every path
opened or listed must be one the recorder noted and nothing may be spawned
or called through ctypes, and a static check that the modules planning
loads call no path-based reader the recorder does not wrap (statvfs,
getxattr...). The two deliberate exceptions (the host socket table, read
again and compared whole; the recorder's own stamps) are named there.

Anything else is not cached: --dry-run, --ci, --report, any plan that read /proc or /sys, and every run
while STOCKADE_NO_PLAN_CACHE is set. Plans live in stockade's cache folder,
which every sandbox has hidden and which must be private to this user.
"""

from __future__ import annotations

import builtins
import io
import marshal
import os
import stat
import sys

from stockade.bwrap.parts import folders, host_sockets
from stockade.bwrap.parts.folders import sha256
from stockade.bwrap.running.execute import Launch
from stockade.core.locations import cache_folder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from stockade.bwrap.parts.globs import Tree
    from stockade.core.invocation import Invocation

FORMAT = 15  # bump when what a plan holds, or how it is checked, changes
MAX_PLANS = 64  # plans kept per user; the oldest go first
UNCACHEABLE_ROOTS = ("/proc/", "/sys/")
DISABLE_VARIABLE = "STOCKADE_NO_PLAN_CACHE"


def enabled(invocation: Invocation) -> bool:
    """Whether this run may use or store a cached plan (not with stockade learn's additions: the key has no room for them)."""
    return sys.platform.startswith("linux") and not invocation.env.get(DISABLE_VARIABLE) and invocation.reuse_plans and not invocation.additions


def plans_folder(env: Mapping[str, str]) -> str:
    return os.path.join(cache_folder(env), "plans")


def run_key(invocation: Invocation) -> bytes:
    """Everything outside the filesystem that planning reads, as bytes.

    repr, not marshal: marshal's bytes for equal values vary between processes
    (it shares references), and the key is hashed into the file name.
    """
    interactive = sys.stdin is not None and _isatty(0)
    return repr((
        FORMAT, __file__, invocation.policy_file, invocation.profile, invocation.quiet, invocation.verbose, invocation.cwd,
        invocation.stage, invocation.gpu, invocation.mcp,
        sorted(invocation.env.items()),
        os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups()), interactive,
    )).encode("utf-8", "surrogateescape")  # fmt: skip


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


# ---- stamps -------------------------------------------------------------------------------------


_os_lstat = os.lstat  # the real one: the recorder's own look must not be recorded


def _lstat(path: str) -> os.stat_result | int | None:
    """lstat, or None if absent, or the errno if it cannot be looked at."""
    try:
        return _os_lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return exc.errno


def file_stamp(path: str, identity: bool = False, info: os.stat_result | int | None | bool = False) -> tuple[int, ...] | int | None:
    """Full lstat for files and links, identity for folders (and for files stockade itself
    appends to between runs: the audit log); None if absent, the errno if unreadable.
    `info`: the path's lstat taken earlier (when planning first looked at it)."""
    if info is False:
        info = _lstat(path)
    if not isinstance(info, os.stat_result):
        return info
    if identity or stat.S_ISDIR(info.st_mode):
        return (info.st_mode, info.st_ino, info.st_dev, info.st_uid, info.st_gid)
    return (info.st_mode, info.st_ino, info.st_dev, info.st_uid, info.st_gid, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def listing_stamp(path: str, info: os.stat_result | int | None | bool = False) -> tuple[int, ...] | int | None:
    """A listed folder: its identity and when its entries last changed."""
    if info is False:
        info = _lstat(path)
    if not isinstance(info, os.stat_result):
        return info
    return (info.st_mode, info.st_ino, info.st_dev, info.st_uid, info.st_gid, info.st_mtime_ns, info.st_ctime_ns)


def _with_folders(path: str) -> list[str]:
    """The path and every folder above it."""
    found = [path]
    while path not in ("/", ""):
        path = os.path.dirname(path)
        found.append(path)
    return found


# ---- recording what planning looks at -----------------------------------------------------------


class Recorder:
    """Notes every path the wrapped os functions are asked about, until stopped.

    Wrapping the module attributes catches os.path (which calls os.stat and
    os.lstat), pathlib and open, so no planning code has to remember to
    report what it read; a call relative to a directory fd cannot be
    stamped and makes the plan uncacheable.

    Each path is stamped when planning first looks at it, before the look:
    a stamp taken when the plan is stored would vouch for whatever changed
    in between (a file written into a folder the walk had already listed),
    and every later run would use a plan that never saw it.
    """

    LOOKED_AT = ("stat", "lstat", "access", "readlink", "open")
    LISTED = ("scandir", "listdir")

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.listed: set[str] = set()
        self.first: dict[str, os.stat_result | int | None] = {}  # lstat before planning first looked
        self.complete = True
        self._saved: list[tuple[object, str, object]] = []

    def start(self) -> Recorder:
        for name in self.LOOKED_AT:
            self._wrap(os, name, self.paths)
        for name in self.LISTED:
            self._wrap(os, name, self.listed)
        self._wrap(builtins, "open", self.paths)
        self._wrap(io, "open", self.paths)
        return self

    def stop(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)

    def _wrap(self, owner: object, name: str, into: set[str]) -> None:
        original: Callable[..., object] = getattr(owner, name)
        self._saved.append((owner, name, original))

        def wrapped(*args: object, **kwargs: object) -> object:
            self._note(args[0] if args else ".", kwargs.get("dir_fd"), into)
            return original(*args, **kwargs)

        setattr(owner, name, wrapped)

    def _note(self, path: object, dir_fd: object, into: set[str]) -> None:
        if isinstance(path, int):
            return  # an fd stockade opened by path: that open was noted
        if dir_fd is not None:
            self.complete = False
            return
        try:
            name = os.fsdecode(path)  # type: ignore[arg-type]
        except TypeError:
            self.complete = False
            return
        path = os.path.normpath(os.path.join(os.getcwd(), name))
        if path not in self.first:
            self.first[path] = _lstat(path)
        into.add(path)


# ---- storing and loading ------------------------------------------------------------------------


def store(
    key: bytes,
    launch: Launch,
    recorder: Recorder,
    walk: tuple[tuple[str, ...], dict[str, tuple[tuple[str, ...], tuple[str, ...]]]],
    note: str | None,
    own_files_extra: tuple[str, ...] = (),
    sockets: tuple[tuple[str | None, tuple[str, ...], tuple[str, ...], tuple[str, ...]], tuple[str, ...]] | None = None,
) -> bool:
    """Keep this plan for later runs; False (and nothing written) when it cannot be checked later.

    `walk` is (the project walk's patterns, {folder: (subfolder names, matching names)});
    `own_files_extra` are files stockade writes between runs (a custom audit log), which
    count by identity, not content; `sockets` is (the view's socket scope, the host sockets
    it sees), as planning found them (None: planning did not read them, so the plan cannot
    be checked against them).
    """
    if not recorder.complete or sockets is None:
        return False
    looked_at = recorder.paths | recorder.listed | set(_own_code()) | set(_loaded_libseccomp())
    if any(path.startswith(UNCACHEABLE_ROOTS) or path in ("/proc", "/sys") for path in looked_at):
        return False
    paths: set[str] = set()
    for path in looked_at:
        paths.update(_with_folders(path))
        paths.update(_with_folders(os.path.realpath(path)))
    first = recorder.first
    listed = {path: listing_stamp(path, first.get(path, False)) for path in sorted(recorder.listed)}
    rules = launch.session_rules or {}
    own_files = {str(rules.get("audit_path", "")), *own_files_extra}
    entry = {
        # The key's digest, not the key: the key holds the whole host environment, and a plan on
        # disk must not keep a copy of every token the shell had (a credential's value among them).
        "key": sha256(key).digest(),
        # stockade's own files are stamped now: planning itself creates a missing audit log
        "files": [
            (path, path in own_files, file_stamp(path, True) if path in own_files else file_stamp(path, False, first.get(path, False)))
            for path in sorted(paths)
        ],
        "listed": listed,
        "walk": walk,
        "launch": launch.to_data(),
        "note": note,
        "sockets": sockets[1],
        "socket_scope": sockets[0],
    }
    return _write(plans_folder(os.environ), key, marshal.dumps(entry))


def load(key: bytes) -> tuple[Launch, str | None] | None:
    """The stored plan for this key if every stamp still matches; None otherwise."""
    entry = _read(plans_folder(os.environ), key)
    if not isinstance(entry, dict) or entry.get("key") != sha256(key).digest():
        return None
    try:
        if not all(file_stamp(path, identity) == stamp for path, identity, stamp in entry["files"]):
            return None
        if host_sockets.scoped(entry["socket_scope"]) != entry["sockets"]:
            return None  # a host socket came or went: its mask with it
        launch = Launch(**entry["launch"])
        changed = [path for path, stamp in entry["listed"].items() if listing_stamp(path) != stamp]
        if changed and _hard_links_in(changed):
            return None  # the run must copy them first (hardlinks.py)
        changed = [path for path in changed if not _same_entries(path, launch.tree)]
        if changed and not _walk_unchanged(changed, *entry["walk"]):
            return None
        return launch, entry["note"]
    except (KeyError, TypeError, ValueError):
        return None


def _hard_links_in(folders_changed: list[str]) -> bool:
    from stockade.bwrap.parts.hardlinks import any_in

    return any(any_in(folder) for folder in folders_changed)


def _same_entries(folder: str, tree: Tree | None) -> bool:
    """A folder that was touched but holds the same entries (files came and went)."""
    known = (tree or {}).get(folder)
    if known is None:
        return False
    listed = folders.listing(folder)
    return listed is not None and listed[0] == known[2]


def _walk_unchanged(changed: list[str], patterns: tuple[str, ...], summaries: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> bool:
    """Folders whose entries changed still have what the plan was made from."""
    from stockade.bwrap.parts import globs  # only now: a changed folder needs the patterns

    matcher = globs.Patterns(patterns)
    for folder in changed:
        if folder not in summaries:
            return False  # listed by something other than the project walk
        found: dict[str, list[str]] = {pattern: [] for pattern in patterns}
        listed = globs.list_folder(folder, matcher, found, None)
        if listed is None or summarise(listed[1], matched_names(found).get(folder, ())) != summaries[folder]:
            return False
    return True


def matched_names(found: dict[str, list[str]]) -> dict[str, set[str]]:
    """{folder: names in it that matched a pattern}."""
    names: dict[str, set[str]] = {}
    for paths in found.values():
        for path in paths:
            folder, name = os.path.split(path)
            names.setdefault(folder, set()).add(name)
    return names


def summarise(subfolders: Iterable[str], names: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What of one folder's entries the plan depends on: its subfolders and the names matching a pattern."""
    return tuple(sorted(os.path.basename(sub) for sub in subfolders)), tuple(sorted(names))


def _own_code() -> list[str]:
    """stockade's loaded modules: a plan from other code is not this code's plan."""
    return [module.__file__ for name, module in list(sys.modules.items()) if name.startswith("stockade") and getattr(module, "__file__", None)]  # type: ignore[misc]


def _loaded_libseccomp() -> list[str]:
    """The libseccomp this process loaded (the seccomp filter's file name depends on its version)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return sorted({line.split(None, 5)[5].strip() for line in maps if "libseccomp" in line and line.count(" ") >= 5})
    except (OSError, IndexError):
        return []


def _plan_file(folder: str, key: bytes) -> str:
    return os.path.join(folder, sha256(key).hexdigest() + ".plan")


def _read(folder: str, key: bytes) -> object:
    """The stored entry, only from a folder and file that are this user's alone."""
    try:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return None
        fd = os.open(_plan_file(folder, key), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return None
        data = os.pread(fd, info.st_size, 0)
        return marshal.loads(data)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    finally:
        os.close(fd)


def _write(folder: str, key: bytes, data: bytes) -> bool:
    """Atomically (temp file, rename) in a 0700 folder; best effort."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return False
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
        target = _plan_file(folder, key)
        temp = f"{target}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temp, target)
        _forget_oldest(folder)
        return True
    except OSError:
        return False


def _forget_oldest(folder: str) -> None:
    plans = [entry for entry in os.scandir(folder) if entry.name.endswith(".plan")]
    if len(plans) <= MAX_PLANS:
        return
    plans.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime_ns)
    for entry in plans[: len(plans) - MAX_PLANS]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


def cached_launch(invocation: Invocation) -> tuple[Launch, str | None] | None:
    """The stored plan for this run, with its command, if it still holds; else None (the caller plans)."""
    found = load(run_key(invocation))
    if found is not None:
        found[0].command = list(invocation.command)
    return found
