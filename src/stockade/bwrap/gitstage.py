"""A repository's git dir, staged so that git can write its own config inside the sandbox.

`.git/config` can make the host's git run programs later (core.fsmonitor,
aliases, filters), so the floor keeps it read-only inside. git writes it by
renaming `config.lock` over it, which a read-only bind refuses with EBUSY: `git
remote add`, `git push -u` and `git checkout BRANCH` of a remote branch fail.
Making the file writable is no answer: an editor or IDE runs `git status` on
the host every few seconds, and would run what the sandbox planted at once.

So the sandbox sees, at the git dir's path, a folder of stockade's own (the
stage): copies of the git dir's files and of its small state folders, and binds
of everything else (objects, refs, logs, hooks as the floor keeps them).
git's renames land in the stage; the host's git still sees its own files.
After the run, each change is carried back to the host, checked where it
matters:
- the config key by key: what git writes for ordinary work (gitcheck.inert_entry)
  is kept, anything else that was not there before is left out and named;
- `commondir` and `config.worktree`: never carried back, named;
- every other file or state folder as git left it. When the host changed the
  same file during the run, the newer of the two stays.
The checks after the run then see the git dir as though git had written it
directly (changes.py, gitcheck.py, sweep.py judge new hooks and repositories).

A run killed before it carries back leaves its stage with a manifest; the
next run carries it back (finish_abandoned), as journal.py does for sweeps.
"""

from __future__ import annotations

import fcntl
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.bwrap.args import Piece

FOLDER = "gitstage"
# Folders git makes, fills and removes whole during one operation: copied, so that git can remove them.
COPIED_FOLDERS = frozenset({"rebase-merge", "rebase-apply", "sequencer"})
# Files the floor keeps read-only: the config is judged by its keys, the others never carried back.
CONFIG = "config"
NEVER_CARRIED = frozenset({"commondir", "config.worktree"})
MAX_COPY_BYTES = 64 << 20  # a git dir whose files and state folders are larger is not staged
MAX_COPY_ENTRIES = 4096
KEPT_SUFFIX = ".kept"  # a stage set aside: not carried back again
MAX_STAGES = 8  # repositories staged in one run

Signature = str  # "kind:ino:size:mtime_ns:ctime_ns" of an entry, or "" when absent


def signature(path: str) -> Signature:
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    kind = "d" if stat.S_ISDIR(info.st_mode) else "l" if stat.S_ISLNK(info.st_mode) else "f" if stat.S_ISREG(info.st_mode) else "o"
    return f"{kind}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


def _mtime(sig: Signature) -> int:
    return int(sig.split(":")[3]) if sig else 0


class Stage:
    """One git dir's stage for one run: made before bwrap starts, carried back after it."""

    def __init__(self, folder: str, git_dir: str, identity: str) -> None:
        self.folder = folder  # STATE/gitstage/NAME: the manifest, the lock, the config as it was, and `git`
        self.git_dir = git_dir
        self.identity = identity  # the git dir's (dev, ino) at the start: carried back only to the same folder
        self.copied: dict[str, tuple[Signature, Signature]] = {}  # name -> (the stage's copy, the host's entry) at the start
        self.bound: list[str] = []  # names bound from the host: their mount points in the stage are skipped
        self.lock_fd = -1

    @property
    def staged(self) -> str:
        return os.path.join(self.folder, "git")

    def pieces(self) -> list[Piece]:
        """bwrap's mounts: the stage over the git dir, then each bound entry from the host (bwrap
        takes a bind's source from the host's tree, under any mount made before it)."""
        from stockade.bwrap import args as bw

        return [bw.BindFrom(self.staged, self.git_dir), *(bw.Bind(os.path.join(self.git_dir, name)) for name in self.bound)]

    def write_manifest(self) -> None:
        words = [self.git_dir, self.identity, str(len(self.bound)), *self.bound]
        for name, (copy, host) in self.copied.items():
            words += [name, copy, host]
        _write_new(os.path.join(self.folder, "manifest"), "\0".join(words).encode("utf-8", "surrogateescape"))

    @classmethod
    def read(cls, folder: str) -> Stage | None:
        try:
            with open(os.path.join(folder, "manifest"), "rb") as handle:
                words = handle.read().decode("utf-8", "surrogateescape").split("\0")
            stage = cls(folder, words[0], words[1])
            count = int(words[2])
            stage.bound = words[3 : 3 + count]
            rest = words[3 + count :]
            if len(rest) % 3:
                return None
            for index in range(0, len(rest), 3):
                stage.copied[rest[index]] = (rest[index + 1], rest[index + 2])
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


def prepare(state_dir: str, session: str, git_dirs: list[str]) -> list[Stage]:
    """A stage for each git dir that is still a plain folder and small enough; a git dir left
    out keeps the plan's read-only config (git config writes then fail there, as before)."""
    stages: list[Stage] = []
    for number, git_dir in enumerate(git_dirs[:MAX_STAGES]):
        folder = os.path.join(state_dir, FOLDER, f"{session}.{number}")
        try:
            stage = _prepare_one(folder, git_dir)
        except OSError:
            stage = None
        if stage is None:
            _remove(folder)
            continue
        stages.append(stage)
    return stages


def _prepare_one(folder: str, git_dir: str) -> Stage | None:
    identity = _identity(git_dir)
    if not identity:
        return None
    os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
    os.mkdir(folder, 0o700)
    stage = Stage(folder, git_dir, identity)
    stage.lock_fd = os.open(os.path.join(folder, "lock"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    fcntl.flock(stage.lock_fd, fcntl.LOCK_EX)
    os.mkdir(stage.staged, stat.S_IMODE(os.lstat(git_dir).st_mode) | 0o700)
    budget = [MAX_COPY_BYTES, MAX_COPY_ENTRIES]
    with os.scandir(git_dir) as entries:
        listed = list(entries)
    for entry in listed:
        source = os.path.join(git_dir, entry.name)
        target = os.path.join(stage.staged, entry.name)
        info = os.lstat(source)
        if stat.S_ISDIR(info.st_mode) and entry.name not in COPIED_FOLDERS:
            os.mkdir(target, 0o700)  # the mount point
            stage.bound.append(entry.name)
            continue
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode) or stat.S_ISDIR(info.st_mode)):
            _write_new(target, b"")  # a socket or FIFO (fsmonitor's): bound from the host
            stage.bound.append(entry.name)
            continue
        if not _copy(source, target, info, budget):
            return None
        stage.copied[entry.name] = (signature(target), signature(source))
    config = os.path.join(git_dir, CONFIG)
    if CONFIG in stage.copied and stage.copied[CONFIG][1].startswith("f:"):
        _copy_file(os.path.join(stage.staged, CONFIG), os.path.join(folder, "config.start"), 0o600)
    elif os.path.lexists(config):
        return None  # a linked or odd config: the plan's protection stays
    stage.write_manifest()
    return stage


def _copy(source: str, target: str, info: os.stat_result, budget: list[int]) -> bool:
    """Copy one entry without following links; False when over the budget."""
    budget[1] -= 1
    if budget[1] < 0:
        return False
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(source), target)
        return True
    if stat.S_ISREG(info.st_mode):
        budget[0] -= info.st_size
        if budget[0] < 0:
            return False
        _copy_file(source, target, stat.S_IMODE(info.st_mode))
        return True
    if stat.S_ISDIR(info.st_mode):
        os.mkdir(target, stat.S_IMODE(info.st_mode) | 0o700)
        with os.scandir(source) as entries:
            for entry in list(entries):
                inner = os.path.join(source, entry.name)
                if not _copy(inner, os.path.join(target, entry.name), os.lstat(inner), budget):
                    return False
        return True
    return True  # a socket or FIFO inside a state folder: left out


def _copy_file(source: str, target: str, mode: int) -> None:
    read_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(read_fd).st_mode):
            raise OSError(f"{source} is no longer a regular file")
        write_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode | 0o600)
        try:
            while True:
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                os.write(write_fd, chunk)
            os.fchmod(write_fd, mode)
        finally:
            os.close(write_fd)
    finally:
        os.close(read_fd)


def carry_back(stage: Stage, session: str) -> tuple[list[str], list[str]]:
    """(lines to say, paths in the git dir whose change the check after the run should not judge
    again: the config, judged here by its keys). The stage is removed, unless it could not be
    carried back, where it stays with a line naming it."""
    lines: list[str] = []
    judged: list[str] = []
    try:
        if _identity(stage.git_dir) != stage.identity:
            kept = _keep(stage)
            lines.append(
                f"stockade: {stage.git_dir} was replaced during the run, so git's changes to it inside were not carried back; they are in {kept}"
            )
            return lines, judged
        _carry(stage, session, lines, judged)
    except OSError as exc:
        kept = _keep(stage)
        lines.append(f"stockade: git's changes to {stage.git_dir} inside could not all be carried back ({exc}); the rest are in {kept}")
        return lines, judged
    _release(stage)
    _remove(stage.folder)
    return lines, judged


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


def _carry(stage: Stage, session: str, lines: list[str], judged: list[str]) -> None:
    names = set(os.listdir(stage.staged)) - set(stage.bound)
    for name in sorted(names | set(stage.copied)):
        copy_then, host_then = stage.copied.get(name, ("", ""))  # a name not there at the start: absent then on the host too
        inside = os.path.join(stage.staged, name)
        host = os.path.join(stage.git_dir, name)
        copy_now, host_now = signature(inside), signature(host)
        if copy_now == copy_then:
            continue  # not changed inside
        shown = f".git/{name}" if os.path.basename(stage.git_dir) == ".git" else os.path.join(stage.git_dir, name)
        if name in NEVER_CARRIED:
            lines.append(f"stockade: {shown} was changed inside; not kept: it names where git reads config and hooks (change it outside the sandbox)")
            continue
        if host_now != host_then and _mtime(host_now) >= _mtime(copy_now):
            if name == CONFIG:
                lines.append(f"stockade: {shown} was changed inside and outside during the run; the outside one is kept")
            continue  # the host's newer change stays
        if name == CONFIG:
            if _carry_config(stage, inside, host, shown, session, lines):
                judged.append(host)
            continue
        if not copy_now:
            _remove_entry(host)
        else:
            _replace(inside, host, session)


def _carry_config(stage: Stage, inside: str, host: str, shown: str, session: str, lines: list[str]) -> bool:
    """The config as changed inside, less each entry it gained that could run a program."""
    from stockade.bwrap.gitcheck import inert_entry
    from stockade.profiles import gitconfig

    if not signature(inside).startswith("f:"):
        lines.append(f"stockade: {shown} was replaced inside by something other than a file; not kept")
        return False
    before = gitconfig.read(os.path.join(stage.folder, "config.start")) if stage.copied.get(CONFIG, ("", ""))[1] else []
    after = gitconfig.read(inside)
    if before is None or after is None:
        lines.append(f"stockade: {shown} as changed inside is not a config git would read (or is over 1 MiB); not kept")
        return False
    left = _count(before)
    refused: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    for key, value in after:
        if left.get((key, value), 0) > 0:
            left[(key, value)] -= 1
            kept.append((key, value))
        elif inert_entry(key, value):
            kept.append((key, value))
        else:
            refused.append((key, value))
    if not refused:
        _replace(inside, host, session)
        return True
    if kept != before:  # else the host's file stays as it is, byte for byte
        start = _read_start(stage)
        if kept[: len(before)] == before and start is not None:  # only entries added: the host's text, then them
            text = start + ("" if not start or start.endswith("\n") else "\n") + render(kept[len(before) :])
        else:
            text = render(kept)
        _write_replacing(host, text.encode("utf-8", "surrogateescape"), session, stat.S_IMODE(os.lstat(inside).st_mode))
    keys = ", ".join(dict.fromkeys(key for key, _value in refused))
    lines.append(
        f"stockade: {shown}: kept git's changes made inside, except {keys}: "
        "a key that makes git run a program or read other config is not carried out of the sandbox (set it outside if you meant it)"
    )
    return True


def _read_start(stage: Stage) -> str | None:
    """The config's text at the start, as copied then."""
    from stockade.profiles import gitconfig

    data = gitconfig.read_regular(os.path.join(stage.folder, "config.start"), gitconfig.MAX_CONFIG_BYTES)
    return None if data is None else data.decode("utf-8", "surrogateescape")


def _count(entries: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
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
    return os.path.join(os.path.dirname(host), f".{os.path.basename(host)}.stockade-{session}")


def _replace(inside: str, host: str, session: str) -> None:
    """Put the stage's entry at the host's path in one rename: a file, a link or a state folder."""
    info = os.lstat(inside)
    temp = _temp_name(host, session)
    _remove_entry(temp)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(inside), temp)
    elif stat.S_ISREG(info.st_mode):
        _copy_file(inside, temp, stat.S_IMODE(info.st_mode))
    elif stat.S_ISDIR(info.st_mode):
        _copy(inside, temp, info, [1 << 62, 1 << 30])
    else:
        return  # a FIFO or socket made inside: nothing to carry
    if stat.S_ISDIR(info.st_mode) or os.path.isdir(host) and not os.path.islink(host):
        _remove_entry(host)  # rename cannot replace a folder, nor put a folder over anything
    os.rename(temp, host)


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
    """rmtree without following links (shutil's import costs a run 6 ms)."""
    for _root, folders, files, root_fd in os.fwalk(path, topdown=False):
        for name in files:
            os.unlink(name, dir_fd=root_fd)
        for name in folders:
            try:
                os.rmdir(name, dir_fd=root_fd)
            except NotADirectoryError:  # a link to a folder is listed with the folders
                os.unlink(name, dir_fd=root_fd)
    os.rmdir(path)


def _remove(folder: str) -> None:
    try:
        _remove_tree(folder)
    except OSError:
        pass


def finish_abandoned(state_dir: str, session: str) -> list[str]:
    """Carry back each stage whose run is gone (its lock free); the lines to say."""
    root = os.path.join(state_dir, FOLDER)
    try:
        names = os.listdir(root)
    except OSError:
        return []
    lines: list[str] = []
    for name in names:
        if name.endswith(KEPT_SUFFIX):
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
            continue
        stage.lock_fd = lock
        said, _judged = carry_back(stage, session)
        lines += [f"stockade: carried back git's changes to {stage.git_dir} from a run that was killed before it could", *said]
    return lines
