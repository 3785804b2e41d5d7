"""Project folders as the walks see them: stamps, entry digests, which ones the sandbox can enter.

Lean on purpose (os and stat only): the end of every run and the plan
cache's check use it, and neither should import the pattern matcher unless a
folder really changed.
"""

from __future__ import annotations

import os
import stat

try:  # CPython's own sha256: hashlib would load OpenSSL first, 3-5 ms on every run
    from _sha256 import sha256  # 3.11
except ImportError:
    try:
        from _sha2 import sha256  # 3.12 and later
    except ImportError:
        from hashlib import sha256

AS_ROOT = os.geteuid() == 0


def folder_stamp(info: os.stat_result) -> tuple[int, int, int]:
    """Changes whenever an entry is added, removed or renamed in the folder (and on chmod)."""
    return (info.st_ino, info.st_mtime_ns, info.st_ctime_ns)


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


def walked_into(entry: os.DirEntry[str]) -> bool:
    """A subfolder the walks descend into: a real folder (links are not followed) the sandbox can enter."""
    return entry.is_dir(follow_symlinks=False) and (not AS_ROOT or sandbox_can_enter(os.lstat(entry.path)))


def digest(entries: list[str]) -> bytes:
    """One value for a folder's entry names and kinds ("name/" for folders, "name//" for links:
    no entry can be named either way)."""
    return sha256("\0".join(sorted(entries)).encode("utf-8", "surrogateescape")).digest()


def entry_word(entry: os.DirEntry[str]) -> str:
    """A file turned into a link is a new entry: planning hides what links in denied folders point to."""
    if entry.is_dir(follow_symlinks=False):
        return entry.name + "/"
    return entry.name + "//" if entry.is_symlink() else entry.name


def listing(folder: str) -> tuple[bytes, list[str]] | None:
    """(digest of its entries, the subfolders walked into), None if unreadable."""
    words: list[str] = []
    subfolders: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                words.append(entry_word(entry))
                if walked_into(entry):
                    subfolders.append(entry.name)
    except OSError:
        return None
    return digest(words), subfolders
