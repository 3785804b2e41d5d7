"""Files of the project that are hard links to files elsewhere are made its own before a run.

uv and pnpm hard-link every installed file into their store and into every
environment that uses it. A write in place to such a file inside the project
(`open(..., "w")`, a shell's `>`) changes the one inode all of them share: the
store, and another project's environment, which then runs it on the host.
Read-only binds would stop that, but bwrap pays for each mount (hundreds for a
venv's packages cost over 100 ms a run); so before the run each such file is
replaced by a copy of itself (same bytes, mode, times and owner; a rename, so
no reader sees half a file), and the project's files are then its own. The
store keeps its copy; uv or pnpm link again at their next install, and the
next run copies again. Only files linked outside the project are copied (a
file whose every link is in the project spreads nothing), holes kept, at
most MAX_COPY_BYTES of data a run; what is left over stays linked, named.

Git's objects are copied too: git never writes one in place, but a sandbox can
(a local clone shares them with its source, whose next checkout would then run
what the sandbox wrote). The project walk finds them (globs.py); a plan kept
from an earlier run is not used when a folder it lists changed and now holds
one (plan_cache.py). A hard link made to a project file from outside while a
plan stays valid is not seen until the folder changes.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

MAX_COPY_BYTES = 256 << 20  # data one run copies to make files its own; the rest stay linked, named


def to_copy(paths: list[str], kept: dict[tuple[int, int], int] | None = None) -> list[str]:
    """Of the walk's multiply linked files, those a write could spread from: not a file whose
    every link is one of `paths` (linked only within the project, where a write changes nothing
    outside it; a run that links one file many times costs no copy), nor one whose other links
    are a checkpoint's (`kept`: inode -> links in stockade's hidden store, which a run copies
    before any write in place, checkpoints/store.py)."""
    kept = kept or {}
    candidates = list(paths)
    names: dict[tuple[int, int], list[str]] = {}
    links: dict[tuple[int, int], int] = {}
    for path in candidates:
        try:
            info = os.lstat(path)
        except OSError:
            continue  # gone: make_own finds nothing to copy
        key = (info.st_dev, info.st_ino)
        names.setdefault(key, []).append(path)
        links[key] = info.st_nlink
    inside_only = {path for key, group in names.items() if len(group) + kept.get(key, 0) >= links[key] for path in group}
    return [path for path in candidates if path not in inside_only]


def make_own(paths: list[str], budget: int = MAX_COPY_BYTES) -> tuple[int, list[str]]:
    """(files copied, one line per file that could not be): each still linked elsewhere,
    replaced by a copy of itself, holes kept; past `budget` bytes of data (a run's file_size,
    or MAX_COPY_BYTES) the rest stay linked, each named."""
    copied, failed = 0, []
    for path in paths:
        try:
            size = _data_size(path)
            if size > budget:
                failed.append(
                    f"{path} is a hard link shared with other places, and copying its {size >> 20} MiB of data is over what a run copies "
                    f"({budget >> 20} MiB): it stays linked, so a write inside would change them too (cp it over itself outside the sandbox)"
                )
                continue
            if _make_own(path):
                copied += 1
                budget -= size
        except OSError as error:
            failed.append(
                f"{path} is a hard link shared with other places and could not be copied ({error.strerror}): a write inside would change them too"
            )
    return copied, failed


def _data_size(path: str) -> int:
    """Bytes of data a copy writes: the file's allocated blocks (a sparse file's holes are none)."""
    info = os.stat(path, follow_symlinks=False)
    return min(info.st_size, info.st_blocks * 512)


def _make_own(path: str) -> bool:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
        return False
    folder, name = os.path.split(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".stockade-copy", dir=folder)
    try:
        with open(path, "rb") as source, os.fdopen(handle, "wb") as target:
            _copy_data(source.fileno(), target.fileno(), info.st_size)
        shutil.copystat(path, temporary, follow_symlinks=False)
        if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (0, 0):
            os.chown(temporary, info.st_uid, info.st_gid)
        if os.lstat(path).st_ino != info.st_ino:
            raise OSError(0, "it changed while being copied")
        os.rename(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    return True


def _copy_data(source: int, target: int, size: int) -> None:
    """Copy the data extents only (SEEK_DATA/SEEK_HOLE), so holes stay holes, then set the size."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(source, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after offset
            break
        end = os.lseek(source, start, os.SEEK_HOLE)
        os.lseek(source, start, os.SEEK_SET)
        os.lseek(target, start, os.SEEK_SET)
        left = end - start
        while left > 0:
            chunk = os.read(source, min(left, 1 << 20))
            if not chunk:
                break
            os.write(target, chunk)
            left -= len(chunk)
        offset = end
    os.ftruncate(target, size)


def any_in(folder: str) -> bool:
    """Whether `folder` holds a regular file linked elsewhere (for a kept plan's changed folders)."""
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_nlink > 1:
                    if to_copy([entry.path]):
                        return True
    except OSError:
        return False
    return False
