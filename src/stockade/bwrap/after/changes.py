"""What the run created or changed among files that run code later (ESCAPES 58, 62, 64, 68).

Two kinds, both found by walking the project before and after the run:
- ordinary project work that runs later (a Makefile, a conftest.py) stays
  writable, and the end-of-run summary names each one created or changed;
- floor files in places that did not exist at the start (a repository made
  with `git init` during the run) could not be held read-only, so each one
  created or changed is renamed in its own folder to NAME.stockade-quarantine-SESSION.

The walk before the run records every project folder with its stamp (inode,
mtime, ctime: any entry added, removed or renamed changes them) and a digest
of its entries. After the run a folder with the same stamp is not listed; one
whose stamp changed is listed, and only if its entries differ (not just
files that came and went) are they matched against the patterns. The
files seen before are stamped again one by one. A run that created nothing
imports no pattern matcher.
"""

from __future__ import annotations

import errno
import os
import stat

from stockade.bwrap.parts import folders

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from stockade.bwrap.parts.globs import Tree

Stamps = dict[str, tuple[int, int, int, int]]  # inode, size, mtime, ctime (mtime can be set back, ctime cannot)


class Snapshot:
    """Runs-later files at one moment, and the project's folders (None when the walk was cut short)."""

    __slots__ = ("reported", "swept", "tree")

    def __init__(self, reported: Stamps | None = None, swept: Stamps | None = None, tree: Tree | None = None) -> None:
        self.reported: Stamps = reported or {}
        self.swept: Stamps = swept or {}
        self.tree = tree


def patterns(project: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from stockade.profiles.floor import reported_patterns, swept_patterns

    return reported_patterns(project), swept_patterns(project)


def from_matches(reported: tuple[str, ...], swept: tuple[str, ...], matches: dict[str, list[str]], tree: Tree | None) -> Snapshot:
    """A snapshot from a walk that included `reported` and `swept` (the planning walk does)."""
    return Snapshot(
        reported=_stamps(p for pattern in reported for p in matches[pattern]),
        swept={
            **_stamps((p for pattern in swept if not pattern.endswith("/*") for p in matches[pattern]), dirs=False),
            **_stamps(p for pattern in swept if pattern.endswith("/*") for p in matches[pattern] if not p.endswith(".sample")),
        },
        tree=tree,
    )


def take_since(roots: tuple[str, ...], reported: tuple[str, ...], swept: tuple[str, ...], before: Snapshot) -> Snapshot:
    """The snapshot after the run, listing only folders under `roots` (the project and the other
    writable places the plan walked) that changed since `before`; a root inside another is walked
    from its own entry only."""
    if before.tree is None:
        from stockade.bwrap.parts import globs

        matches, _notes = globs.expand((*reported, *swept))
        return from_matches(reported, swept, matches, None)
    found: dict[str, list[str]] = {pattern: [] for pattern in (*reported, *swept)}
    locked: list[str] = []
    matcher = None
    stack = [(root, False) for root in roots]  # (folder, made during the run)
    elsewhere = set(roots)

    def under(folder: str, names: Iterable[str], had: set[str] | None) -> list[tuple[str, bool]]:
        """The subfolders to go on with, new when `had` did not list them; a root is walked from its own entry."""
        subs = ((os.path.join(folder, name), had is not None and name not in had) for name in names)
        return [(sub, new) for sub, new in subs if sub not in elsewhere]

    while stack:
        folder, new = stack.pop()
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        known = before.tree.get(folder)
        if known is not None and known[0] == folders.folder_stamp(info):
            stack += under(folder, known[1], None)
            continue
        had = set(known[1]) if known is not None else set()
        if known is not None:  # touched: the same entries (files that came and went)?
            listed = folders.listing(folder)
            if listed is not None and listed[0] == known[2]:
                stack += under(folder, listed[1], had)
                continue
        from stockade.bwrap.parts import globs  # new entries: now the patterns are needed

        if matcher is None:
            matcher = globs.Patterns((*reported, *swept))
        walked = globs.list_folder(folder, matcher, found, None)
        if walked is not None:
            stack += under(folder, (os.path.basename(sub) for sub in walked[1]), had)
        elif (new or known is not None) and _locked(info):
            locked.append(folder)  # readable when planned, or made by the run: locked inside it
    after = from_matches(reported, swept, found, None)
    after.reported = {**_stamps(before.reported), **after.reported}
    after.swept = {**_stamps(before.swept), **after.swept, **_stamps(locked)}
    return after


def _locked(info: os.stat_result) -> bool:
    """A folder of ours that its owner may not read or search: the run took the permission away
    (a folder locked before the run was hidden from it, mounts.plan_view), so what it holds cannot
    be checked, and the folder itself is moved aside like a runs-later file."""
    return info.st_uid == os.geteuid() and info.st_mode & 0o500 != 0o500 and not folders.AS_ROOT


def stamp(info: os.stat_result) -> tuple[int, int, int, int]:
    """A file's stamp (Stamps): what changes with any write, rename or content swap."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _stamps(paths: Iterable[str], dirs: bool = True) -> Stamps:
    """`dirs=False`: leave out real folders (a swept name matched itself: `.git`, `.vscode`,
    `.git/hooks` count as a file or a link; what is inside a real one has its own `/*` pattern)."""
    state: Stamps = {}
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not dirs and stat.S_ISDIR(info.st_mode):
            continue
        state[path] = stamp(info)
    return state


def changes(before: Stamps, after: Stamps) -> list[tuple[str, str]]:
    """(path, "created" | "changed") for each watched file the run touched."""
    found = [(path, "created") for path in after if path not in before]
    found += [(path, "changed") for path, stamp in after.items() if path in before and before[path] != stamp]
    return sorted(found)


QUARANTINE_SUFFIX = ".stockade-quarantine-"


def quarantine(paths: list[str], session: str, roots: list[str] | None = None) -> list[tuple[str, str]]:
    """Rename each path to NAME.stockade-quarantine-SESSION in its own folder; (original, new name).

    The folder is reached from its writable root one component at a time
    with O_NOFOLLOW, and the rename happens relative to that folder's fd: a
    concurrent sandbox that swaps a parent for a symlink makes the move fail,
    never aims it at a host file. Renamed files no longer have the name that
    makes a tool run them, and stay where the user will see them.
    """
    moved: list[tuple[str, str]] = []
    roots = roots or ["/"]
    for path in paths:
        done = _rename_aside(path, session, roots)
        while done in (errno.EACCES, errno.EPERM) and _strictly_inside(os.path.dirname(path), roots):
            # the run took write permission off the folder: move the folder aside instead
            path = os.path.dirname(path)
            done = _rename_aside(path, session, roots)
        if done in (errno.EACCES, errno.EPERM) and _give_back_access(os.path.dirname(path), roots):
            done = _rename_aside(path, session, roots)  # a writable root itself, which cannot move
        if isinstance(done, str):
            moved.append((path, done))
    return moved


def _rename_aside(path: str, session: str, roots: list[str]) -> str | int:
    """The new path, or the errno of the failed move."""
    parent = _open_parent(path, roots)
    if parent is None:
        return errno.ENOENT
    name = os.path.basename(path)
    new_name = _aside_name(name, f"{QUARANTINE_SUFFIX}{session}")
    for number in range(2, 1000):  # a second move of one name in one run must not replace the first
        try:
            os.lstat(new_name, dir_fd=parent)
        except OSError:
            break
        new_name = _aside_name(name, f"{QUARANTINE_SUFFIX}{session}-{number}")
    try:
        os.rename(name, new_name, src_dir_fd=parent, dst_dir_fd=parent)
        return os.path.join(os.path.dirname(path), new_name)
    except OSError as exc:
        return exc.errno or errno.EIO
    finally:
        os.close(parent)


NAME_MAX = 255  # bytes in one name on every Linux filesystem stockade meets


def _aside_name(name: str, suffix: str) -> str:
    """NAME + suffix, its name cut (and a digest of it kept) where the whole would pass NAME_MAX:
    a name too long to take the suffix must still be moved aside."""
    whole = name + suffix
    if len(os.fsencode(whole)) <= NAME_MAX:
        return whole
    import hashlib

    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:12]
    room = NAME_MAX - len(os.fsencode(suffix)) - len(digest) - 1
    cut = os.fsencode(name)[:room].decode("utf-8", "ignore")  # never half a character
    return f"{cut}~{digest}{suffix}"


def _give_back_access(folder: str, roots: list[str]) -> bool:
    """A writable root of ours that the run made unwritable (chmod 555 .) so nothing could be
    moved out of it: the permission is given back. Its own path is not in the sandbox's reach
    (its parent is not writable), so changing it by name is safe."""
    if folder not in roots:
        return False
    try:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return False
        os.chmod(folder, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
        return True
    except OSError:
        return False


def _strictly_inside(path: str, roots: list[str]) -> bool:
    return any(path.startswith(root.rstrip("/") + "/") for root in roots)


def _open_parent(path: str, roots: list[str]) -> int | None:
    """An O_PATH fd of path's folder, reached from its writable root without following links."""
    inside = [root for root in roots if path == root or path.startswith(root.rstrip("/") + "/")]
    if not inside:
        return None
    root = max(inside, key=len)
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return None
    for part in os.path.relpath(os.path.dirname(path), root).split("/"):
        if part in ("", "."):
            continue
        try:
            child = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = child
    return fd
