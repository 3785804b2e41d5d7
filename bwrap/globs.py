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

from stockade.profiles.paths import glob_base, glob_to_regex, is_glob

MAX_ENTRIES = 500_000  # a walk stops here; the run's notes say so


def expand(patterns: tuple[str, ...]) -> tuple[dict[str, list[str]], list[str]]:
    """({pattern: existing paths it matches}, notes); a plain path matches itself if it exists."""
    found: dict[str, list[str]] = {pattern: [] for pattern in patterns}
    notes: list[str] = []
    by_base: dict[str, list[tuple[str, re.Pattern[str]]]] = defaultdict(list)
    for pattern in patterns:
        if not is_glob(pattern):
            if os.path.lexists(pattern):
                found[pattern].append(pattern)
            continue
        by_base[glob_base(pattern)].append((pattern, re.compile(glob_to_regex(pattern))))
    for base, regexes in by_base.items():
        if not _walk(base, regexes, found):
            notes.append(f"stopped expanding globs under {base} after {MAX_ENTRIES} entries")
    return found, notes


class _Patterns:
    """The patterns under one base, indexed by their last path component.

    Most entries of a big tree match nothing; a set lookup on the name (or
    one combined regex for wildcard names) rules them out before any
    full-path regex runs.
    """

    def __init__(self, items: list[tuple[str, re.Pattern[str]]]) -> None:
        self.by_name: dict[str, list[tuple[str, re.Pattern[str]]]] = defaultdict(list)
        self.wild: list[tuple[str, re.Pattern[str]]] = []
        wild_names: list[str] = []
        for pattern, regex in items:
            last = pattern.rsplit("/", 1)[-1]
            if is_glob(last):
                self.wild.append((pattern, regex))
                wild_names.append(glob_to_regex(last)[1:-1])
            else:
                self.by_name[last].append((pattern, regex))
        self.wild_name = re.compile("^(?:" + "|".join(wild_names) + ")$") if wild_names else None

    def matching(self, name: str, path: str) -> list[str]:
        candidates = self.by_name.get(name, [])
        if self.wild_name is not None and self.wild_name.match(name):
            candidates = [*candidates, *self.wild]
        return [pattern for pattern, regex in candidates if regex.match(path)]


def _walk(base: str, regexes: list[tuple[str, re.Pattern[str]]], found: dict[str, list[str]]) -> bool:
    """Add matches to `found`; False when the walk stopped at MAX_ENTRIES."""
    patterns = _Patterns(regexes)
    stack = [base]
    seen = 0
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        return False
                    for pattern in patterns.matching(entry.name, entry.path):
                        found[pattern].append(entry.path)
                    if entry.is_dir(follow_symlinks=False) and (not AS_ROOT or sandbox_can_enter(entry.stat(follow_symlinks=False))):
                        stack.append(entry.path)
        except OSError:
            continue
    return True


AS_ROOT = os.geteuid() == 0


def sandbox_can_enter(folder: os.stat_result) -> bool:
    """Whether root inside the sandbox's user namespace can enter this folder.

    Only uid 0 and gid 0 are mapped there, and capabilities do not apply to
    files of unmapped owners, so another user's 0700 folder is closed to
    the sandbox (and to bwrap setting it up) though host root walks it.
    Nothing inside it can be reached, so nothing inside needs a mount.
    """
    if folder.st_uid == 0 and folder.st_gid == 0:
        return True
    if folder.st_uid == 0:
        return bool(folder.st_mode & stat.S_IXUSR)
    if folder.st_gid == 0:
        return bool(folder.st_mode & stat.S_IXGRP)
    return bool(folder.st_mode & stat.S_IXOTH)
