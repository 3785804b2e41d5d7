"""Where one `stockade run` spends its time: marks along the way, said when STOCKADE_PHASES is set.

bench/run_all.py reads them to split a run into phases: the interpreter's
start (until this module, one of the first stockade imports, loads), the
imports, options and stored plan read, the checks before the start, bwrap
and the command, the checks after, and the exit. `clock` is the first mark
on the system's monotonic clock (`time.perf_counter`, CLOCK_MONOTONIC on
Linux), which the bench reads on its side of the fork too. Off, a mark costs
one boolean test.
"""

from __future__ import annotations

import os
import time

ENABLED = bool(os.environ.get("STOCKADE_PHASES"))
_marks: list[tuple[str, float]] = [("loaded", time.perf_counter())] if ENABLED else []


def mark(name: str) -> None:
    if ENABLED:
        _marks.append((name, time.perf_counter()))


def said() -> str:
    """One line: the first mark's clock, then each mark's milliseconds since it, in order ("" when off)."""
    if not ENABLED or not _marks:
        return ""
    first = _marks[0][1]
    return f"stockade-phases: clock={first:.6f} " + " ".join(f"{name}={(at - first) * 1000:.2f}" for name, at in _marks)
