"""A repository's git dir, staged so that git can write its own config inside the sandbox.

`.git/config` can make the host's git run programs later (core.fsmonitor,
aliases, filters), so the floor keeps it read-only inside. git writes it by
renaming `config.lock` over it, which a read-only bind refuses with EBUSY: `git
remote add`, `git push -u` and `git checkout BRANCH` of a remote branch fail.
Making the file writable is no answer: an editor or IDE runs `git status` on
the host every few seconds, and would run what the sandbox planted at once.

So the sandbox sees, at the git dir's path, a folder of stockade's own (the
stage), and the real git dir at an alias in its private /run, with the plan's
protections made again there (config and hooks read-only). The stage holds:
- copies of `config` and `config.worktree`, which git rewrites in the stage;
- a copy of `HEAD` (git refuses a HEAD that is a link to anything but refs/);
- a copy of `index`: `git stash` renames the index's lock to another name
  beside it, which cannot cross from the alias's mount into the stage's;
- copies of the state folders a rebase, cherry-pick or `am` keeps
  (their todo lists can make git run commands on the host later);
- for everything else, a link to the alias: git writes refs, objects and
  packed-refs through it, live on the host as before (git's lock files
  follow links), so a `git gc` inside never hides a branch from the host.
After the run each change in the stage is carried back, checked:
- the config key by key: entries git writes for ordinary work are kept
  (gitcheck.inert_entry, and here: a local remote URL only inside the
  project, core.worktree only inside it); anything else that was not there
  before is left out and named;
- a state folder without commands it did not have (`exec` in a todo list, a
  merge strategy git does not ship);
- any other new or changed entry if it is a regular file or a folder of them
  (where the host changed it too, the run's lands last, as with two gits at
  once); a link git does not make is left out and named.
The checks after the run then see the git dir as though git had written it
directly (changes.py, gitcheck.py, sweep.py judge new hooks and repositories).

A run killed before it carries back leaves its stage with a manifest; the
next run carries it back before the journal's sweeps (finish_abandoned), so
that those sweeps judge what it brought. A stage that cannot be carried back
is set aside whole, and named.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from stockade.bwrap.parts.args import Piece

FOLDER = "gitstage"
CONFIG = "config"
WORKTREE_CONFIG = "config.worktree"  # read too once extensions.worktreeConfig is set (git sparse-checkout sets it)
CONFIGS = (CONFIG, WORKTREE_CONFIG)  # copied, and judged key by key
HEAD = "HEAD"
INDEX = "index"
# Folders git makes, fills and removes whole during one operation, holding what it will do next.
STATE_FOLDERS = frozenset({"rebase-merge", "rebase-apply", "sequencer"})
# Files git may make during the run that must be the host's at once: a link to the alias even when absent
# (git's lock follows a dangling link), so that `git gc` packs refs where the host's git reads them.
LINKED_WHEN_ABSENT = ("packed-refs", "shallow")
# Folders bound into the stage rather than linked: `git clone .` walks objects/ without following a link,
# and a submodule's or worktree's relative core.worktree resolves from where its git dir is seen.
BOUND = ("objects", "refs", "modules", "worktrees")
NEVER_CARRIED = frozenset({"commondir"})  # it names where git reads config and hooks
KEPT_SUFFIX = ".kept"  # a stage set aside: not carried back again
BUSY_INFIX = ".busy-"  # a stage being made or removed, under its run's lock: never judged abandoned
MAX_STAGES = 8  # repositories staged in one run
MAX_COPY_BYTES = 64 << 20  # what one stage copies, either way
MAX_COPY_ENTRIES = 10000
MAX_COPY_DEPTH = 32
# Merge strategies git ships: any other name makes git run `git-merge-NAME` from PATH.
STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})

Signature = str  # "kind:ino:size:mtime_ns:ctime_ns" of an entry, or "" when absent


def signature(path: str) -> Signature:
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    kind = "d" if stat.S_ISDIR(info.st_mode) else "l" if stat.S_ISLNK(info.st_mode) else "f" if stat.S_ISREG(info.st_mode) else "o"
    return f"{kind}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


class TooLarge(OSError):
    """A copy over its budget of bytes, entries or depth."""


class Stage:
    """One git dir's stage for one run: made before bwrap starts, carried back after it."""

    def __init__(self, folder: str, git_dir: str, alias: str, identity: str, project: str) -> None:
        self.project = project  # what a local URL or core.worktree must stay inside
        self.folder = folder  # STATE/gitstage/NAME: the manifest, the lock, the config as it was, and `git`
        self.git_dir = git_dir
        self.alias = alias  # where the sandbox sees the real git dir (mounts.GIT_ALIASES)
        self.identity = identity  # the git dir's (dev, ino) at the start: carried back only to the same folder
        self.entries: dict[str, tuple[Signature, Signature]] = {}  # name -> (the stage's entry, the host's) at the start
        self.bound: list[str] = []  # folders bound from the host (BOUND): their mount points are skipped
        # state folders with commands, and redirecting files (`path<TAB>signature`), before the run: the user's own
        self.refused_before: list[str] = []
        self.lock_fd = -1

    @property
    def staged(self) -> str:
        return os.path.join(self.folder, "git")

    def pieces(self) -> list[Piece]:
        """bwrap's mounts: the stage over the git dir, the real one at its alias (bwrap takes a bind's
        source from the host's tree, under any mount made before it); the plan's own mounts at the
        alias follow (execute._git_stages)."""
        from stockade.bwrap.parts import args as bw

        bound = [bw.Bind(os.path.join(self.git_dir, name)) for name in self.bound]
        return [bw.BindFrom(self.staged, self.git_dir), bw.BindFrom(self.git_dir, self.alias), *bound]

    def write_manifest(self) -> None:
        words = [self.git_dir, self.alias, self.identity, self.project, str(len(self.bound)), *self.bound]
        words += [str(len(self.refused_before)), *self.refused_before]
        for name, (inside, host) in self.entries.items():
            words += [name, inside, host]
        _write_new(os.path.join(self.folder, "manifest"), "\0".join(words).encode("utf-8", "surrogateescape"))

    @classmethod
    def read(cls, folder: str) -> Stage | None:
        try:
            with open(os.path.join(folder, "manifest"), "rb") as handle:
                words = handle.read().decode("utf-8", "surrogateescape").split("\0")
            stage = cls(folder, words[0], words[1], words[2], words[3])
            count = int(words[4])
            stage.bound = words[5 : 5 + count]
            rest = words[5 + count :]
            count = int(rest[0])
            stage.refused_before = rest[1 : 1 + count]
            rest = rest[1 + count :]
            if len(rest) % 3:
                return None
            for index in range(0, len(rest), 3):
                stage.entries[rest[index]] = (rest[index + 1], rest[index + 2])
        except (OSError, ValueError, IndexError):
            return None
        return stage


def _identity(path: str) -> str:
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    return f"{info.st_dev}:{info.st_ino}" if stat.S_ISDIR(info.st_mode) else ""


def _write_new(path: str, data: bytes, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# -- before the run ------------------------------------------------------------------------------


def prepare(state_dir: str, session: str, git_dirs: list[tuple[str, str]], project: str) -> list[Stage]:
    """A stage for each (git dir, alias) that is still a plain folder and small enough; a git dir
    left out keeps the plan's mounts (its config read-only: git config writes fail there, as before)."""
    stages: list[Stage] = []
    for number, (git_dir, alias) in enumerate(git_dirs[:MAX_STAGES]):
        folder = os.path.join(state_dir, FOLDER, f"{session}.{number}")
        try:
            stage = _prepare_one(folder, git_dir, alias, project)
        except OSError:
            stage = None
        if stage is None:
            _remove(folder)
            continue
        stages.append(stage)
    return stages


def _prepare_one(folder: str, git_dir: str, alias: str, project: str) -> Stage | None:
    identity = _identity(git_dir)
    if not identity:
        return None
    os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
    # made under a name no other run looks at, locked, then named: another run starting now finds
    # no stage of ours whose lock it could take for a killed run's (finish_abandoned)
    making = f"{folder}{BUSY_INFIX}{os.getpid()}"
    os.mkdir(making, 0o700)
    lock_fd = os.open(os.path.join(making, "lock"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    os.rename(making, folder)
    stage = Stage(folder, git_dir, alias, identity, project)
    stage.lock_fd = lock_fd
    os.mkdir(stage.staged, stat.S_IMODE(os.lstat(git_dir).st_mode) | 0o700)
    budget = _Budget()
    with os.scandir(git_dir) as listing:
        names = [entry.name for entry in listing]
    for name in names:
        source, target = os.path.join(git_dir, name), os.path.join(stage.staged, name)
        info = os.lstat(source)
        if name in CONFIGS and not stat.S_ISREG(info.st_mode):
            return None  # a linked or odd config: the plan's protection stays
        if name in (*CONFIGS, HEAD, INDEX) or (name in STATE_FOLDERS and stat.S_ISDIR(info.st_mode)):
            _copy(source, target, budget)
        elif name in BOUND and stat.S_ISDIR(info.st_mode):
            os.mkdir(target, 0o700)  # the mount point
            stage.bound.append(name)
            continue
        else:
            os.symlink(os.path.join(alias, name), target)  # git reads and writes the real one
        stage.entries[name] = (signature(target), signature(source))
    for name in LINKED_WHEN_ABSENT:
        if name not in stage.entries:
            target = os.path.join(stage.staged, name)
            os.symlink(os.path.join(alias, name), target)
            stage.entries[name] = (signature(target), "")
    for name in CONFIGS:
        if name in stage.entries:
            _copy_file(os.path.join(stage.staged, name), os.path.join(folder, name + ".start"), 0o600)
    stage.refused_before = [path for path in _state_folders(git_dir) if _state_refusal(path)] + redirecting(git_dir)
    stage.write_manifest()
    return stage


class _Budget:
    def __init__(self) -> None:
        self.bytes = MAX_COPY_BYTES
        self.entries = MAX_COPY_ENTRIES

    def take(self, size: int) -> None:
        self.bytes -= size
        self.entries -= 1
        if self.bytes < 0 or self.entries < 0:
            raise TooLarge(f"more than {MAX_COPY_ENTRIES} entries or {MAX_COPY_BYTES >> 20} MiB to copy")


def _copy(source: str, target: str, budget: _Budget, links: bool = True) -> None:
    """Copy a file, a link or a folder without following links, without recursion (a folder may
    be nested thousands deep); TooLarge over the budget or MAX_COPY_DEPTH. `links`: whether a link
    is copied; if not, finding one is an error (what is carried back holds none)."""
    todo = [(source, target, 0)]
    while todo:
        here, there, depth = todo.pop()
        info = os.lstat(here)
        budget.take(info.st_size if stat.S_ISREG(info.st_mode) else 0)
        if stat.S_ISLNK(info.st_mode):
            if not links:
                raise LinkFound(here)
            os.symlink(os.readlink(here), there)
        elif stat.S_ISREG(info.st_mode):
            _copy_file(here, there, stat.S_IMODE(info.st_mode))
        elif stat.S_ISDIR(info.st_mode):
            if depth >= MAX_COPY_DEPTH:
                raise TooLarge(f"folders nested more than {MAX_COPY_DEPTH} deep")
            os.mkdir(there, stat.S_IMODE(info.st_mode) | 0o700)
            with os.scandir(here) as listing:
                todo += [(os.path.join(here, entry.name), os.path.join(there, entry.name), depth + 1) for entry in listing]
        elif not links:
            raise LinkFound(here)  # a FIFO or socket: nothing git makes there
        # else: a FIFO or socket in a state folder at the start: left out


class LinkFound(OSError):
    """A link, FIFO or socket where only files and folders are carried back."""


def _copy_file(source: str, target: str, mode: int) -> None:
    read_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(read_fd).st_mode):
            raise OSError(f"{source} is no longer a regular file")
        write_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode | 0o600)
        try:
            while chunk := os.read(read_fd, 1 << 20):
                os.write(write_fd, chunk)
            os.fchmod(write_fd, mode)
        finally:
            os.close(write_fd)
    finally:
        os.close(read_fd)


# -- after the run -------------------------------------------------------------------------------


def carry_back(stage: Stage, session: str, before: Callable[[str], None] | None = None) -> tuple[list[str], list[str]]:
    """(lines to say, paths in the git dir whose change the check after the run should not judge
    again: the config, judged here by its keys). `before` is told each host path just before it
    changes (the run's checkpoint). Never raises: a stage that cannot be carried back is set aside
    whole, with a line naming where."""
    lines: list[str] = []
    judged: list[str] = []
    try:
        if _identity(stage.git_dir) != stage.identity:
            lines.append(
                f"stockade: {stage.git_dir} was replaced during the run, so git's changes to it inside were not carried back; "
                f"they are in {_keep(stage)}"
            )
            return lines, judged
        if _carry(stage, session, stage.project, lines, judged, before):
            _keep(stage)
            return lines, judged
    except Exception as exc:  # noqa: BLE001 - whatever the sandbox left, the checks after the run still run
        lines.append(f"stockade: git's changes to {stage.git_dir} inside could not all be carried back ({exc}); the rest are in {_keep(stage)}")
        return lines, judged
    _finish(stage)
    return lines, judged


def _finish(stage: Stage) -> None:
    """The stage carried back: renamed out of sight while still locked (another run's
    finish_abandoned must never take a half-removed stage for a killed run's), then removed."""
    gone = f"{stage.folder}{BUSY_INFIX}{os.getpid()}"
    try:
        os.rename(stage.folder, gone)
    except OSError:
        gone = stage.folder
    _release(stage)
    _remove(gone)


def _keep(stage: Stage) -> str:
    """Set a stage that could not be carried back aside, where no later run retries it; its git folder."""
    _release(stage)
    kept = stage.folder + KEPT_SUFFIX
    try:
        os.rename(stage.folder, kept)
    except OSError:
        return stage.staged
    return os.path.join(kept, "git")


def _release(stage: Stage) -> None:
    if stage.lock_fd >= 0:
        os.close(stage.lock_fd)
        stage.lock_fd = -1


def _carry(stage: Stage, session: str, project: str, lines: list[str], judged: list[str], before: Callable[[str], None] | None = None) -> bool:
    """Carry each change back, each name on its own; True when something is kept only in the
    stage (set it aside). Then judge the real git dir, which the sandbox could write through the
    alias: state folders with commands, and links, are moved aside (_judge_real)."""
    keep = False
    names = set(os.listdir(stage.staged)) - set(stage.bound)
    for name in sorted(names | set(stage.entries)):
        try:
            keep = _carry_one(stage, name, session, project, lines, judged, before) or keep
        except Exception as exc:  # noqa: BLE001 - one entry's fault leaves the others to carry
            keep = True
            lines.append(f"stockade: {_shown(stage, project, name)} could not be carried back ({exc}); it is in {_stage_copy(stage, name)}")
    lines += _judge_real(stage, session)
    return keep


def _shown(stage: Stage, project: str, name: str) -> str:
    return os.path.join(os.path.relpath(stage.git_dir, project) if _within(stage.git_dir, project) else stage.git_dir, name)


def _carry_one(
    stage: Stage, name: str, session: str, project: str, lines: list[str], judged: list[str], before: Callable[[str], None] | None = None
) -> bool:
    """One entry of the stage; True when it is kept only in the stage."""
    inside, host = os.path.join(stage.staged, name), os.path.join(stage.git_dir, name)
    inside_then, host_then = stage.entries.get(name, ("", ""))  # a name not there at the start: absent on the host too
    inside_now = signature(inside)
    if inside_now == inside_then:
        return False  # not changed inside (what git wrote through a link is on the host already)
    shown = _shown(stage, project, name)
    if name in NEVER_CARRIED:
        lines.append(f"stockade: {shown} was changed inside; not kept: it names where git reads config and hooks (change it outside the sandbox)")
        return False
    if signature(host) != host_then:  # the host changed it too (a commit, a checkout): the host's stays
        what = HOST_KEPT.get(name, "the run's change is not carried back")
        lines.append(f"stockade: {shown} was changed inside and outside during the run; the outside one is kept: {what}")
        return False
    if before is not None:
        before(host)
    if name in CONFIGS:
        if _carry_config(stage, name, inside, host, shown, session, project, lines):
            judged.append(host)
        return False
    if not inside_now:
        if name in STATE_FOLDERS or not os.path.isdir(host) or os.path.islink(host):
            _remove_entry(host)  # git removed it: a finished rebase's folder, MERGE_HEAD by its link
        else:
            lines.append(f"stockade: {shown} was removed inside; the folder is kept (git removes none there)")
        return False
    if inside_now.startswith("l:"):
        lines.append(f"stockade: {shown} was made a link inside; not kept: git makes none there, and the host's git would write through it")
        return False
    if name not in STATE_FOLDERS and os.path.isdir(host) and not os.path.islink(host):
        lines.append(f"stockade: {shown} was replaced inside; the folder is kept (git replaces none there)")
        return False
    refusal = _state_refusal(inside) if name in STATE_FOLDERS else None
    if refusal:
        lines.append(f"stockade: {shown} {refusal}; not kept, so the host's git will not run it (it is in {_stage_copy(stage, name)})")
        return True
    try:
        _replace(inside, host, session)
    except LinkFound as exc:
        lines.append(f"stockade: {shown} holds a link, FIFO or socket ({os.path.relpath(str(exc), stage.staged)}); not kept")
    return False


# What the user loses when the host's own change to a copied file stays.
HOST_KEPT = {
    CONFIG: "set what you meant outside the sandbox",
    WORKTREE_CONFIG: "set what you meant outside the sandbox",
    HEAD: "the branch the run checked out is not checked out now (git switch to it)",
    INDEX: "what the run staged is not staged now (git add it again)",
}


def _state_folders(git_dir: str) -> list[str]:
    """Every rebase, cherry-pick or `am` state folder git would act on: the git dir's own, each
    worktree's and each submodule's, nested ones included (gitdirs finds them as git does)."""
    from stockade.profiles.gitdirs import module_git_dirs, worktree_git_dirs

    found = []
    for root in (git_dir, *worktree_git_dirs(git_dir), *module_git_dirs(git_dir)):
        found += [os.path.join(root, name) for name in STATE_FOLDERS if os.path.isdir(os.path.join(root, name))]
    return found


# Files that send a host fetch or push elsewhere, or make git read objects from elsewhere: one made
# or changed by the run is moved aside (what was there before is the user's).
REDIRECTING_FOLDERS = ("remotes", "branches")  # git's legacy remote files: `URL:` and `Push:` lines
ALTERNATES = ("objects/info/alternates", "objects/info/http-alternates")


def redirecting(git_dir: str) -> list[str]:
    """`path<TAB>signature` of each legacy remote file and alternates file: what the run must not add."""
    found = [os.path.join(git_dir, name) for name in ALTERNATES if os.path.lexists(os.path.join(git_dir, name))]
    for folder in REDIRECTING_FOLDERS:
        try:
            found += [os.path.join(git_dir, folder, name) for name in os.listdir(os.path.join(git_dir, folder))[:1024]]
        except OSError:
            continue
    return [f"{path}\t{signature(path)}" for path in found]


def _judge_real(stage: Stage, session: str) -> list[str]:
    """The real git dir, which the sandbox could write through its alias like any writable git dir
    before the stage: a state folder with commands it did not hold before the run, and a link at
    the top or under refs/ or logs/ (git writes through one: FETCH_HEAD or a reflog into
    ~/.bashrc), are moved aside and named. A symbolic HEAD into refs/ is git's own."""
    from stockade.bwrap.after.changes import quarantine

    planted = [path for path in _state_folders(stage.git_dir) if path not in stage.refused_before and _state_refusal(path)]
    planted += _links(stage.git_dir)
    planted += [entry.split("\t")[0] for entry in redirecting(stage.git_dir) if entry not in stage.refused_before]
    moved = quarantine(planted, session, [stage.git_dir]) if planted else []
    return [f"stockade: {original} could make the host's git run a command or write elsewhere; renamed to {new}" for original, new in moved]


def _links(git_dir: str) -> list[str]:
    found = []
    for name in os.listdir(git_dir):
        path = os.path.join(git_dir, name)
        if os.path.islink(path) and not (name == HEAD and os.readlink(path).startswith("refs/")):
            found.append(path)
    try:  # objects/ one level down (a fan-out folder made a link: host git writes objects there) and its info, pack
        found += [entry.path for entry in os.scandir(os.path.join(git_dir, "objects")) if entry.is_symlink()]
        for inner in ("info", "pack"):
            found += [entry.path for entry in os.scandir(os.path.join(git_dir, "objects", inner)) if entry.is_symlink()]
    except OSError:
        pass
    for folder in ("refs", "logs"):
        todo = [os.path.join(git_dir, folder)]
        while todo:
            here = todo.pop()
            try:
                listing = list(os.scandir(here))
            except OSError:
                continue
            for entry in listing:
                if entry.is_symlink():
                    found.append(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
    return found


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _stage_copy(stage: Stage, name: str) -> str:
    return os.path.join(stage.folder + KEPT_SUFFIX, "git", name)


def _state_refusal(folder: str) -> str | None:
    """Why a rebase, cherry-pick or `am` state folder made inside must not reach the host: a todo
    list whose commands run on `git rebase --continue`, or a strategy git does not ship."""
    for todo in ("git-rebase-todo", "todo"):
        data = _small_file(os.path.join(folder, todo))
        if data is None:
            continue
        for line in data.decode("utf-8", "replace").splitlines():
            words = line.strip().split(None, 1)
            if words and words[0] in ("exec", "x"):
                return f"has a command for git to run ({line.strip()[:80]!r})"
    for name in ("strategy", "strategy_opts"):
        data = _small_file(os.path.join(folder, name))
        if data is not None and name == "strategy" and data.decode("utf-8", "replace").strip() not in STRATEGIES:
            return "names a merge strategy git does not ship (git would run a program of that name)"
    opts = _small_file(os.path.join(folder, "opts"))  # the sequencer's, in config form
    if opts is not None and b"strategy" in opts.lower():
        return "names a merge strategy (git would run a program of that name)"
    return None


def _small_file(path: str) -> bytes | None:
    from stockade.profiles import gitconfig

    return gitconfig.read_regular(path, 1 << 20)


def _carry_config(stage: Stage, name: str, inside: str, host: str, shown: str, session: str, project: str, lines: list[str]) -> bool:
    """The config as changed inside, less each entry it gained that could run a program."""
    from stockade.profiles import gitconfig

    if not signature(inside).startswith("f:"):
        lines.append(f"stockade: {shown} was replaced inside by something other than a file; not kept")
        return False
    before = gitconfig.read(os.path.join(stage.folder, name + ".start")) if name in stage.entries else []
    after = gitconfig.read(inside)
    if before is None or after is None:
        lines.append(f"stockade: {shown} as changed inside is not a config git would read (or is over 1 MiB); not kept")
        return False
    left = _count(before)
    refused: list[tuple[str, str, str]] = []  # (key, value, why)
    kept: list[tuple[str, str]] = []
    added: list[tuple[str, str]] = []
    for key, value in after:
        if left.get((key, value), 0) > 0:
            left[(key, value)] -= 1
            kept.append((key, value))
        elif (why := _refusal(key, value, before)) is None:
            kept.append((key, value))
            added.append((key, value))
        else:
            refused.append((key, value, why))
    # a new remote whose URL stays out is left out whole: its fetch refspec alone is a broken remote
    gone = {key.split(".")[1] for key, _value, _why in refused if key.startswith("remote.") and key.rpartition(".")[2] in URL_LEAVES}
    dropped = [(key, value) for key, value in added if key.startswith("remote.") and key.split(".")[1] in gone]
    kept = [entry for entry in kept if entry not in dropped]
    for key in dict.fromkeys(key for key, _value, _why in refused):  # a refused change of a key the host had: the host's value stays
        have = _count(entry for entry in kept if entry[0] == key)
        for entry in (entry for entry in before if entry[0] == key):
            if have.get(entry, 0) > 0:
                have[entry] -= 1
            else:
                kept.append(entry)
    mode = _host_mode(host, inside)
    if not refused:
        _replace(inside, host, session, mode)
        return True
    if kept != before:  # else the host's file stays as it is, byte for byte
        start = _read_start(stage, name)
        if kept[: len(before)] == before and start is not None and not start.rstrip("\n").endswith("\\"):
            text = start + ("" if not start or start.endswith("\n") else "\n") + render(kept[len(before) :])  # the host's text, then the new
        else:
            text = render(kept)
        _write_replacing(host, text.encode("utf-8", "surrogateescape"), session, mode)
    keys = ", ".join(dict.fromkeys(f"{key} ({why})" for key, _value, why in refused))
    lines.append(f"stockade: {shown}: kept git's changes made inside, except {keys}: not carried out of the sandbox (set it outside if you meant it)")
    return True


# Keys git writes for a repository's own layout or an existing remote's reach: carried back only as they were.
UNCHANGED_ONLY = frozenset({"core.bare", "core.sharedrepository", "core.repositoryformatversion", "core.worktree"})
NEVER_ADDED = frozenset({("remote", "mirror"), ("remote", "push")})  # a mirror or a refspec of the run's makes the next push delete
URL_LEAVES = frozenset({"url", "pushurl"})


def _refusal(key: str, value: str, before: list[tuple[str, str]]) -> str | None:
    """Why an entry the run added to the config may not reach the host's, or None when it may:
    gitcheck's inert keys, less what changes where the repository's files are or who may write
    them (core.worktree: a folder of the project can become a link later), and what sends a host
    push or fetch elsewhere (a local path: a host `git fetch` copies a hidden repository in; the
    URL of a remote that was there before; a mirror; a push refspec; a branch's new remote)."""
    from stockade.bwrap.after.gitcheck import inert_entry

    if not inert_entry(key, value):
        return "it can make git run a program or read other config"
    if key in UNCHANGED_ONLY or (key.startswith("extensions.") and key != "extensions.worktreeconfig"):
        return "it changes the repository's layout"
    section, _dot, rest = key.partition(".")
    name, _dot, leaf = rest.rpartition(".")
    if (section, leaf) in NEVER_ADDED:
        return "the next push could delete what the remote holds"
    if section in ("remote", "submodule") and leaf in URL_LEAVES:
        if section == "remote" and any(other.startswith(f"remote.{name}.") for other, _value in before):
            return "it changes where an existing remote fetches or pushes"
        return "a local path: a host fetch would copy whatever it holds then" if _local_path(value) is not None else None
    if section == "branch" and leaf in ("remote", "pushremote") and not any(other.startswith(f"remote.{value}.") for other, _value in before):
        return "a remote the host did not have: your next push or pull would go there"
    return None


def inert_change(before: str, after: str) -> bool:
    """Whether the config at `after` differs from the one at `before` (absent: empty) only by
    entries that may reach the host (_refusal): a staged run's git config that needs no review."""
    from stockade.profiles.gitconfig import read

    old = read(before) if os.path.lexists(before) else []
    new = read(after)
    if old is None or new is None:
        return False
    left = _count(old)
    for key, value in new:
        if left.get((key, value), 0) > 0:
            left[(key, value)] -= 1
        elif _refusal(key, value, old) is not None:
            return False
    return True


def _host_mode(host: str, inside: str) -> int:
    """The mode a carried file gets: the host's own, else the stage's; never writable by others
    (a config others may write is a config others may plant fsmonitor in)."""
    try:
        mode = stat.S_IMODE(os.lstat(host).st_mode)
    except OSError:
        mode = stat.S_IMODE(os.lstat(inside).st_mode)
    return mode & ~0o022


def _local_path(url: str) -> str | None:
    """The path a git URL names on this machine, or None for a remote one (git's own rule: a
    scheme other than file://, or `host:path` with no slash before the colon)."""
    url = url.strip()
    if url.startswith("file://"):
        return url[len("file://") :] or "/"
    if "://" in url:
        return None
    head, colon, _rest = url.partition(":")
    if colon and "/" not in head:
        return None
    return os.path.expanduser(url) if url.startswith("~") else url


def _read_start(stage: Stage, name: str) -> str | None:
    """The config's text at the start, as copied then."""
    data = _small_file(os.path.join(stage.folder, name + ".start"))
    return None if data is None else data.decode("utf-8", "surrogateescape")


def _count(entries: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for entry in entries:
        counts[entry] = counts.get(entry, 0) + 1
    return counts


def render(entries: list[tuple[str, str]]) -> str:
    """Entries as a config file git reads back to the same entries (gitconfig.parse's keys:
    section and name lower-cased, a subsection as written)."""
    out: list[str] = []
    current = None
    for key, value in entries:
        head, _dot, rest = key.partition(".")
        subsection, _dot, name = rest.rpartition(".")
        if (head, subsection) != current:
            current = (head, subsection)
            quoted = subsection.replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'[{head} "{quoted}"]' if subsection else f"[{head}]")
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\b", "\\b")
        plain = escaped == value and value.strip(" \t") == value and not any(c in value for c in "#;")
        out.append(f"\t{name} = {value}" if plain else f'\t{name} = "{escaped}"')
    return "\n".join(out) + "\n"


def _temp_name(host: str, session: str) -> str:
    """A name of fixed length beside `host`: one made from a long name would be too long."""
    return os.path.join(os.path.dirname(host), f".stockade-carry-{session[:16]}")


def _replace(inside: str, host: str, session: str, mode: int | None = None) -> None:
    """Put the stage's file or folder at the host's path in one rename (a folder: the old one goes
    first). The stage's entry is moved when both are on one filesystem (a submodule's objects cost
    nothing), else copied within the budget; nothing it holds is a link."""
    temp = _temp_name(host, session)
    _remove_entry(temp)
    _check_no_links(inside)
    try:
        os.rename(inside, temp)
    except OSError:
        try:
            _copy(inside, temp, _Budget(), links=False)
        except OSError:
            _remove_entry(temp)
            raise
    if not os.path.isdir(temp):
        os.chmod(temp, mode if mode is not None else _host_mode(host, temp))
    if os.path.isdir(temp) or (os.path.isdir(host) and not os.path.islink(host)):
        _remove_entry(host)  # rename cannot put a folder over anything, nor anything over a folder
    os.rename(temp, host)


def _check_no_links(path: str) -> None:
    """LinkFound at the first link, FIFO or socket in `path` (a file or a folder), without recursion."""
    todo = [path]
    while todo:
        here = todo.pop()
        info = os.lstat(here)
        if stat.S_ISDIR(info.st_mode):
            with os.scandir(here) as listing:
                todo += [entry.path for entry in listing]
        elif not stat.S_ISREG(info.st_mode):
            raise LinkFound(here)


def _write_replacing(host: str, data: bytes, session: str, mode: int) -> None:
    temp = _temp_name(host, session)
    _remove_entry(temp)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode | 0o600)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    os.rename(temp, host)


def _remove_entry(path: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        _remove_tree(path)
    else:
        os.unlink(path)


def _remove_tree(path: str) -> None:
    """rmtree without following links and without recursion (a folder may be nested thousands
    deep; shutil's rmtree recurses, and its import costs a run 6 ms)."""
    todo = [(path, False)]
    while todo:
        here, emptied = todo.pop()
        if emptied:
            os.rmdir(here)
            continue
        todo.append((here, True))
        with os.scandir(here) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    todo.append((entry.path, False))
                else:
                    os.unlink(entry.path)


def _remove(folder: str) -> None:
    try:
        _remove_tree(folder)
    except OSError:
        pass


def _remove_unlocked(folder: str) -> None:
    """A stage being made or removed whose run is gone (its lock free): nothing in it to carry back."""
    try:
        lock = os.open(os.path.join(folder, "lock"), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        try:
            old = time.time() - os.lstat(folder).st_mtime > 60  # not one a run is making this moment
        except OSError:
            return
        if old:
            _remove(folder)
        return
    except OSError:
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # its run is still at it
    finally:
        os.close(lock)
    _remove(folder)


def finish_abandoned(state_dir: str, session: str) -> list[str]:
    """Carry back each stage whose run is gone (its lock free); the lines to say. Called before
    journal.finish_abandoned, whose sweeps then judge what came back."""
    root = os.path.join(state_dir, FOLDER)
    try:
        names = os.listdir(root)
    except OSError:
        return []
    lines: list[str] = []
    for name in names:
        if name.endswith(KEPT_SUFFIX):
            continue
        if BUSY_INFIX in name:  # a run's own being made or removed: what a killed one left goes
            _remove_unlocked(os.path.join(root, name))
            continue
        folder = os.path.join(root, name)
        try:
            lock = os.open(os.path.join(folder, "lock"), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue  # its run is still going
        stage = Stage.read(folder)
        if stage is None:
            os.close(lock)
            _remove(folder)
            continue
        stage.lock_fd = lock
        said, _judged = carry_back(stage, session)
        lines += [f"stockade: carried back git's changes to {stage.git_dir} from a run that was killed before it could", *said]
    return lines
