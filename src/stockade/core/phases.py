"""Where one `stockade run` spends its time: marks along the way, said when STOCKADE_PHASES is set.

bench/run_all.py reads them to split a run into phases (interpreter and
imports, reading the stored plan, the checks before the start, bwrap and the
command, the checks after). Off, a mark costs one boolean test.
"""

from __future__ import annotations

import os
import time

ENABLED = bool(os.environ.get("STOCKADE_PHASES"))
_marks: list[tuple[str, float]] = []


def mark(name: str) -> None:
    if ENABLED:
        _marks.append((name, time.perf_counter()))


def said() -> str:
    """One line: each mark's milliseconds since the first, in order ("" when off)."""
    if not ENABLED or not _marks:
        return ""
    first = _marks[0][1]
    return "stockade-phases: " + " ".join(f"{name}={(at - first) * 1000:.2f}" for name, at in _marks)
