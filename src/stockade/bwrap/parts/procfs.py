"""What /proc says of a process: its state letter and its children. On every run's path: os only."""

from __future__ import annotations

import os


def state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat (R, S, T, Z...), None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    end = text.rfind(")")  # the name may hold anything, even ") "
    return text[end + 2 : end + 3] or None


def children(pid: int) -> list[int] | None:
    """The children of every thread of `pid` (a thread may fork); None when it is gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                found += [int(word) for word in handle.read().split()]
        except (OSError, ValueError):
            continue
    return found
