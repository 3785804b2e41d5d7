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
  is shown at its path, read-only, when it is a regular file of the user's
  that every user of the machine may already read (mode o+r, not a link):
  what the agent's Write tool writes is, and a private one (a Kerberos ticket
  cache, 0600) is not.
"""

from __future__ import annotations

import os
import stat
import time

from stockade.core.notices import KEEP_SECONDS, session_name

TMP = "/tmp"
MAX_NAMED = 32  # files shown from the command line at most
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
        os.utime(path)  # in use: kept another day
    except OSError:
        return None
    return path


def applies(project: str, cwd: str, writable: list[str]) -> bool:
    """A folder mounted over /tmp would hide a project, a working directory or a writable place in it."""
    return not any(place == TMP or place.startswith(TMP + "/") for place in (project, cwd, *writable))


def named_files(command: list[str]) -> tuple[list[str], list[str]]:
    """(host files under /tmp the command line names that the sandbox may read: regular, the user's,
    readable by every user, not through a link; those it names that exist but may not be read)."""
    found: list[str] = []
    refused: list[str] = []
    for word in command:
        start = word.find(TMP + "/")
        while start != -1 and len(found) < MAX_NAMED:
            if start == 0 or word[start - 1] in _ENDS:
                end = start
                while end < len(word) and word[end] not in _ENDS:
                    end += 1
                path = os.path.normpath(word[start:end])
                if path.startswith(TMP + "/") and path not in found and path not in refused:
                    shareable = _shareable(path)
                    if shareable:
                        found.append(path)
                    elif shareable is not None:
                        refused.append(path)
            start = word.find(TMP + "/", start + 1)
    return found, refused


def inside_folder(folder: str, path: str) -> bool:
    """Whether /tmp's `path`, in the session's folder, reaches no further than that folder (an
    earlier command may have left a link on the way)."""
    parent = os.path.realpath(os.path.dirname(folder + path[len(TMP) :]))
    return (parent == folder or parent.startswith(folder + "/")) and not os.path.islink(folder + path[len(TMP) :])


def _shareable(path: str) -> bool | None:
    """Whether the sandbox may read it; None when there is nothing there."""
    try:
        info = os.lstat(path)
        parent = os.path.realpath(os.path.dirname(path))
    except OSError:
        return None
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.getuid()
        and bool(info.st_mode & stat.S_IROTH)
        and (parent == TMP or parent.startswith(TMP + "/"))  # no folder on the way is a link out of /tmp
    )


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
        try:
            if now - os.lstat(path).st_mtime > KEEP_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue
