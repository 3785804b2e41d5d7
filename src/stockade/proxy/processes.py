"""A process of a sandbox described from /proc, the same way wherever a record names one.

The daemon names the process behind a connection (daemon/attribution.py); a
run's checkpoint watch names the process that first wrote a file
(bwrap/running/checkpointing.py). Both describe it while it waits on them,
so it is still there to be read: its pid as the sandbox numbers it, its
executable, its arguments (at most ARGS words and ARG_CHARS characters,
credentials that look like one redacted), and its parents.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ARGS = 32
ARG_CHARS = 1024
PARENTS = 16


def describe(pid: int, parents: list[dict[str, Any]]) -> dict[str, Any]:
    """`pid` as a record names it, with `parents` (nearest first) already found by the caller."""
    return {"pid": inside_pid(pid), "exe": exe(pid), "argv": argv(pid), "parents": parents}


def parent_entry(pid: int) -> dict[str, Any]:
    """A parent as a record names it: its pid inside, executable and first argument."""
    words = argv(pid)
    return {"pid": inside_pid(pid), "exe": exe(pid), "argv0": words[0] if words else ""}


def inside_pid(pid: int) -> int:
    """The pid as the sandbox's own pid namespace numbers it (the last of NSpid)."""
    return status(pid)[0]


def status(pid: int) -> tuple[int, int]:
    """(the pid inside, the parent's pid on this side) from /proc/PID/status; (-1, -1) for a process
    that is gone (never its number on this side: a record's pids are the sandbox's)."""
    inside, parent = -1, -1
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"PPid:"):
                    parent = int(line.split()[-1])
                elif line.startswith(b"NSpid:"):
                    inside = int(line.split()[-1])
                    break  # NSpid comes after PPid
    except (OSError, ValueError, IndexError):
        pass
    return inside, parent


def exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")[:ARG_CHARS]
    except OSError:
        return ""


def argv(pid: int) -> list[str]:
    """The arguments, bounded, credentials in them redacted (audit.redact_words)."""
    from stockade.proxy.audit import redact_words

    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(ARG_CHARS * 4)
    except OSError:
        return []
    words, left = [], ARG_CHARS
    for part in raw.split(b"\0")[:ARGS]:
        if left <= 0:
            break
        word = part.decode("utf-8", "backslashreplace")[:left]
        left -= len(word)
        words.append(word)
    while words and not words[-1]:
        words.pop()
    return redact_words(words)
