"""Expand `deny_read`/`deny_write` globs against the filesystem at sandbox start.

A mount needs a concrete path, so `**/.env` becomes the list of `.env` files
that exist now. One walk per base folder serves every pattern under it;
symlinked folders are not followed (a link out of the project is masked by
its own target's rules, not walked into).
"""

from __future__ import annotations

import os
import re
import stat
from collections import defaultdict

from stockade.bwrap.parts import folders
from stockade.profiles.paths import glob_base, glob_to_regex, is_glob, is_within

MAX_ENTRIES = 500_000  # a walk stops here; the run's notes say so


# folder: (its stamp, its subfolders' names, the digest of its entries); see folders.py
Tree = dict[str, tuple[tuple[int, int, int], list[str], bytes]]


def expand(
    patterns: tuple[str, ...],
    tree: Tree | None = None,
    tree_root: str = "",
    locked: list[str] | None = None,
    shared: list[str] | None = None,
    more_roots: tuple[str, ...] = (),
    cut: list[str] | None = None,
) -> tuple[dict[str, list[str]], list[str]]:
    """({pattern: existing paths it matches}, notes); a plain path matches itself if it exists.

    With `tree`, every folder listed under `tree_root` and `more_roots` (the
    other writable places) is recorded there with its stamp and subfolders, so
    the end of the run can tell which folders changed without listing the
    others again (changes.py); a walk of `more_roots` does not enter
    `tree_root`, walked on its own. A walk cut short at MAX_ENTRIES leaves none
    of its root's folders in `tree` (the project's: none at all). With
    `locked`, folders of ours that the walk cannot read or search go there,
    unwalked (list_folder). With `shared`, the regular files under `tree_root`
    and `more_roots` that have other hard links go there (hardlinks.py). With
    `cut`, the roots whose walk was cut short go there.
    """
    found: dict[str, list[str]] = {pattern: [] for pattern in patterns}
    notes: list[str] = []
    by_base: dict[str, list[str]] = defaultdict(list)
    for pattern in patterns:
        if not is_glob(pattern):
            try:
                os.lstat(pattern)
                found[pattern].append(pattern)
            except (FileNotFoundError, NotADirectoryError):
                pass
            except OSError:
                found[pattern].append(pattern)  # cannot tell whether it is there: the caller decides
            continue
        by_base[glob_base(pattern)].append(pattern)
    stopped: list[str] = []
    for base, under in by_base.items():
        recorded = base == tree_root or base in more_roots
        if not _walk(
            base, Patterns(under), found, tree if recorded else None, locked, shared if recorded else None,
            skip=tree_root if base in more_roots else None,
        ):  # fmt: skip
            notes.append(f"stopped expanding globs under {base} after {MAX_ENTRIES} entries")
            if recorded:
                stopped.append(base)
    if cut is not None:
        cut += stopped
    if tree is not None:  # a partial record would make every unlisted folder look new
        if tree_root in stopped:
            tree.clear()
        for base in stopped:
            for folder in [folder for folder in tree if is_within(folder, base) and not is_within(folder, tree_root)]:
                del tree[folder]
    return found, notes


class Patterns:
    """Glob patterns indexed by their last path component.

    Most entries of a big tree match nothing; a set lookup on the name (or
    one combined regex for wildcard names) rules them out before any
    full-path regex runs, and a pattern's full-path regex is compiled only
    when some name is a candidate for it (most never are). A wildcard name
    under a literal folder name (`**/hooks/*`, every floor folder's) is looked
    up by that folder's name instead: every name matches `*`.
    """

    def __init__(self, patterns: list[str] | tuple[str, ...]) -> None:
        self.by_name: dict[str, list[str]] = defaultdict(list)
        self.by_parent: dict[str, list[str]] = defaultdict(list)
        self.wild: list[str] = []
        self.compiled: dict[str, re.Pattern[str]] = {}
        wild_names: list[str] = []
        for pattern in patterns:
            _rest, _slash, last = pattern.rpartition("/")
            parent = _rest.rpartition("/")[2]
            if is_glob(last) and "**" not in last and parent and not is_glob(parent):
                self.by_parent[parent].append(pattern)
            elif is_glob(last):
                self.wild.append(pattern)
                wild_names.append(glob_to_regex(last)[1:-1])
            else:
                self.by_name[last].append(pattern)
        self.wild_name = re.compile("^(?:" + "|".join(wild_names) + ")$") if wild_names else None

    def matching(self, name: str, path: str) -> list[str]:
        candidates = self.by_name.get(name, [])
        if self.wild_name is not None and self.wild_name.match(name):
            candidates = [*candidates, *self.wild]
        if self.by_parent:
            under = self.by_parent.get(path[: len(path) - len(name) - 1].rpartition("/")[2])
            if under:
                candidates = [*candidates, *under]
        return [pattern for pattern in candidates if self._regex(pattern).match(path)]

    def _regex(self, pattern: str) -> re.Pattern[str]:
        regex = self.compiled.get(pattern)
        if regex is None:
            regex = self.compiled[pattern] = re.compile(glob_to_regex(pattern))
        return regex


def _walk(
    base: str,
    patterns: Patterns,
    found: dict[str, list[str]],
    tree: Tree | None,
    locked: list[str] | None = None,
    shared: list[str] | None = None,
    skip: str | None = None,
) -> bool:
    """Add matches to `found`, not entering `skip`; False when the walk stopped at MAX_ENTRIES."""
    stack = [base]
    seen = 0
    while stack:
        folder = stack.pop()
        listed = list_folder(folder, patterns, found, tree, locked, shared)
        if listed is None:
            continue
        seen += listed[0]
        if seen > MAX_ENTRIES:
            return False
        stack += [sub for sub in listed[1] if sub != skip]
    return True


def linked_elsewhere(entry: os.DirEntry[str]) -> bool:
    """A regular file with more than one hard link (one lstat: the listing does not say)."""
    try:
        return entry.stat(follow_symlinks=False).st_nlink > 1
    except OSError:
        return False


def list_folder(
    folder: str,
    patterns: Patterns,
    found: dict[str, list[str]],
    tree: Tree | None,
    locked: list[str] | None = None,
    shared: list[str] | None = None,
) -> tuple[int, list[str]] | None:
    """Match one folder's entries into `found`; (entries seen, subfolders to visit), None if unreadable.

    With `locked`, a folder of this (unprivileged) user that its owner may not read or search
    goes there instead: the walk cannot see what is inside, but a sandbox can chmod its own
    folder back, so planning hides it whole rather than plan as if it were empty.
    """
    subfolders: list[str] = []
    words: list[str] = []
    try:
        info = os.lstat(folder)
        locked_out = info.st_uid == os.geteuid() and info.st_mode & 0o500 != 0o500 and stat.S_ISDIR(info.st_mode)  # a file root is no folder
        if locked is not None and not folders.AS_ROOT and locked_out:
            locked.append(folder)
            return None
        with os.scandir(folder) as entries:
            for entry in entries:
                words.append(folders.entry_word(entry))
                for pattern in patterns.matching(entry.name, entry.path):
                    found[pattern].append(entry.path)
                if folders.walked_into(entry):
                    subfolders.append(entry.path)
                elif shared is not None and entry.is_file(follow_symlinks=False) and linked_elsewhere(entry):
                    shared.append(entry.path)
    except OSError:
        return None
    if tree is not None:
        tree[folder] = (folders.folder_stamp(info), [os.path.basename(sub) for sub in subfolders], folders.digest(words))
    return len(words), subfolders
