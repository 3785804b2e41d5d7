"""/tmp inside a run: an agent session's own, kept between its commands, and the files a command names.

Every sandbox gets a fresh /tmp (mounts.py). An agent runs each shell command
as its own `stockade run`, so a script one command left in /tmp was gone for
the next, and a file the agent's own Write tool put at /tmp/script.py (on the
host) was "can't open file" inside. So:

- With `--agent-session` (the hook gives it), /tmp is that session's folder,
  STATE/agent-tmp/ID (0700): what one command leaves there the next one finds.
  A session's folder is removed a day after its last command, as its notices
  are (core/notices.py). It has no size limit of its own (tmp_size bounds the
  tmpfs only). Not where the project or a writable place lies under /tmp:
  mounting over /tmp would hide it.
- A host file under /tmp that the command line names (`python3 /tmp/script.py`)
  is shown at its path as a read-only copy taken at the start, when it is a
  regular file of the user's that every user of the machine may already read:
  mode o+r, every folder on the way o+x, no link (read through folder
  handles, so a path swapped meanwhile reads nothing else). What an agent's
  Write tool writes is; a private one (a Kerberos ticket cache, 0600, or a
  file in a 0700 folder) is not. Not when /tmp holds the project, a writable
  place or a hidden one: the copy would show through the plan's masks.
"""

from __future__ import annotations

import os
import stat
import time

from stockade.core.notices import KEEP_SECONDS, session_name

TMP = "/tmp"
MAX_NAMED = 32  # files shown from the command line at most
MAX_BYTES = 16 << 20  # a named file larger than this is not copied in
LAST_USE = ".last-use"  # beside a session's folder: its mtime is the session's last command
_ENDS = " \t\n'\";|&<>()`$=,"


def session_tmp(state_dir: str, session: str | None) -> str | None:
    """The agent session's /tmp folder, made if need be; None without a session (or a usable folder)."""
    name = session_name(session)
    if name is None:
        return None
    folder = os.path.join(state_dir, "agent-tmp")
    path = os.path.join(folder, name)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not os.path.isdir(path):
            _forget_old(folder)
            os.mkdir(path, 0o700)
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return None
    except OSError:
        return None
    touch_last_use(path)  # in use: kept another day
    return path


def applies(project: str, cwd: str, writable: list[str]) -> bool:
    """A folder mounted over /tmp would hide a project, a working directory or a writable place in it."""
    return not any(place == TMP or place.startswith(TMP + "/") for place in (project, cwd, *writable))


def named_files(command: list[str]) -> tuple[list[tuple[str, bytes]], list[str]]:
    """(the content of each host file under /tmp the command line names that the sandbox may read;
    the paths it names of files it may not). Read here, once, through no link (`_read_shared`):
    the sandbox gets a copy, never a bind a swapped path could redirect."""
    found: list[tuple[str, bytes]] = []
    refused: list[str] = []
    for word in command:
        start = word.find(TMP + "/")
        while start != -1 and len(found) + len(refused) < MAX_NAMED:
            if start == 0 or word[start - 1] in _ENDS:
                end = start
                while end < len(word) and word[end] not in _ENDS:
                    end += 1
                path = os.path.normpath(word[start:end])
                if path.startswith(TMP + "/") and path not in refused and all(path != seen for seen, _data in found):
                    data = _read_shared(path)
                    if isinstance(data, bytes):
                        found.append((path, data))
                    elif data is False:
                        refused.append(path)
            start = word.find(TMP + "/", start + 1)
    return found, refused


def _read_shared(path: str) -> bytes | bool | None:
    """The file's content when every user of the machine may already read it: each folder from /tmp
    down searchable by all (o+x) and no link, the file the user's own, regular and o+r, at most
    MAX_BYTES. False when it exists but may not be shown; None when it is not a file there."""
    parts = path[len(TMP) + 1 :].split("/")
    try:
        folder = os.open(TMP, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for name in parts[:-1]:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode):
                return None if not stat.S_ISLNK(info.st_mode) else False
            if not info.st_mode & stat.S_IXOTH:
                return False  # a private folder: its files are not "readable by every user"
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            os.close(folder)
            folder = inner
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError:
            return False  # a link (ELOOP), or not ours to read
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                return None
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or not info.st_mode & stat.S_IROTH:
                return False
            if info.st_size > MAX_BYTES:
                return False
            data = b""
            while len(data) <= MAX_BYTES:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                data += chunk
            return data if len(data) <= MAX_BYTES else False
        finally:
            os.close(fd)
    except OSError:
        return None
    finally:
        os.close(folder)


def inside_folder(folder: str, path: str) -> bool:
    """Whether /tmp's `path`, in the session's folder, reaches no further than that folder (an
    earlier command may have left a link on the way, which bwrap would follow to make its mount point)."""
    target = folder + path[len(TMP) :]
    parent = os.path.realpath(os.path.dirname(target))
    return (parent == folder or parent.startswith(folder + "/")) and not os.path.islink(target)


def hides_under_tmp(walls: dict[str, object]) -> bool:
    """Whether the plan hides something under /tmp (a deny rule, a project there): a copy bound at a
    named path would show through that mask."""
    hidden = walls.get("hidden") if isinstance(walls, dict) else None
    entries = hidden if isinstance(hidden, list) else []
    return any(isinstance(entry, list) and entry and str(entry[0]).startswith(TMP + "/") for entry in entries)


def remove_mount_point(folder: str, path: str) -> None:
    """Unlink the empty file bwrap made at /tmp's `path` in the session's `folder`, walking down
    from the folder through no link (an earlier or this command may have put one on the way)."""
    parts = path[len(TMP) + 1 :].split("/")
    try:
        current = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        for name in parts[:-1]:
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            os.close(current)
            current = inner
        info = os.stat(parts[-1], dir_fd=current, follow_symlinks=False)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.unlink(parts[-1], dir_fd=current)
    except OSError:
        return
    finally:
        os.close(current)


def touch_last_use(folder: str) -> None:
    """When the session last ran a command, kept beside its folder where the sandbox cannot set it."""
    try:
        fd = os.open(folder + LAST_USE, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(fd)
        os.utime(folder + LAST_USE)
    except OSError:
        pass


def _forget_old(folder: str) -> None:
    """Sessions whose last command is a day old: their agents have ended."""
    import shutil

    now = time.time()
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(LAST_USE):
            continue
        try:
            used = os.lstat(path + LAST_USE).st_mtime  # the folder's own mtime is the sandbox's to set
        except OSError:
            used = 0.0
        if now - used > KEEP_SECONDS:
            shutil.rmtree(path, ignore_errors=True)
            try:
                os.unlink(path + LAST_USE)
            except OSError:
                pass
