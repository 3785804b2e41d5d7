"""Notices an agent session has been shown already: said once per session, not before every command.

An agent runs each shell command through its hook (cli/hook.py) as one
`stockade run`; the untrusted-policy line and the plan's notes would repeat
before every one of them, and an agent reads every line it is given. The hook
passes the agent's own session id (`--agent-session`); a digest of each line
said for it is kept in STATE/agent-sessions/ID, and those files are removed a
day after their last use. Without a session id, every line is said as before.
"""

from __future__ import annotations

import os
import time

KEEP_SECONDS = 86400
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")  # no `re`: this is on a run's path


def session_name(raw: object) -> str | None:
    """An agent's session id as a file name: its safe characters, at most 64; None when none is left."""
    if not isinstance(raw, str):
        return None
    name = "".join(ch for ch in raw if ch in _SAFE)[:64].lstrip(".")
    return name or None


def first_time(state_dir: str, session: str | None, line: str) -> bool:
    """Whether `line` is new to the agent `session` (and remember it); always True without one."""
    if not session:
        return True
    from hashlib import sha256

    folder = os.path.join(state_dir, "agent-sessions")
    path = os.path.join(folder, session)
    digest = sha256(line.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    try:
        with open(path, encoding="ascii") as handle:
            if digest in handle.read().split():
                return False
    except FileNotFoundError:
        _forget_old(folder)
    except OSError:
        return True
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{digest}\n".encode("ascii"))
        finally:
            os.close(fd)
    except OSError:
        pass
    return True


def _forget_old(folder: str) -> None:
    """Sessions unused for a day: their agents have ended."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for name in names:
        path = os.path.join(folder, name)
        try:
            if now - os.lstat(path).st_mtime > KEEP_SECONDS:
                os.unlink(path)
        except OSError:
            continue
