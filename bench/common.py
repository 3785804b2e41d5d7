"""Shared timing helpers: medians of many runs, measured side by side in one process."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    name: str
    samples: tuple[float, ...]  # seconds

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000

    @property
    def min_ms(self) -> float:
        return min(self.samples) * 1000

    @property
    def max_ms(self) -> float:
        return max(self.samples) * 1000


def stockade_command() -> list[str]:
    """The installed console script if there is one, else this interpreter's module."""
    found = shutil.which("stockade")
    return [found] if found else [sys.executable, "-m", "stockade.cli.main"]


def time_command(name: str, argv: Sequence[str], runs: int, *, cwd: str | None = None, env: dict[str, str] | None = None, warmup: int = 3) -> Timing:
    """Wall time of `argv` from fork to exit, `runs` times (after `warmup` unmeasured runs)."""
    samples = []
    for index in range(warmup + runs):
        start = time.perf_counter()
        result = subprocess.run(list(argv), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            raise SystemExit(f"{name}: exit {result.returncode}: {result.stderr.decode(errors='replace').strip()}")
        if index >= warmup:
            samples.append(elapsed)
    return Timing(name, tuple(samples))


def interleaved(commands: dict[str, Sequence[str]], runs: int, **kwargs: object) -> list[Timing]:
    """Alternate the commands run by run, so load changes hit all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name] += time_command(name, argv, 1, warmup=0, **kwargs).samples  # type: ignore[arg-type]
    for name, argv in commands.items():  # warm-up effects are in run 1; drop nothing, medians are robust
        pass
    return [Timing(name, tuple(values)) for name, values in samples.items()]


def table(timings: list[Timing], baseline: str) -> str:
    base = next(t for t in timings if t.name == baseline).median_ms
    rows = ["| what | median ms | min | max | vs " + baseline + " |", "|---|---:|---:|---:|---:|"]
    for t in timings:
        rows.append(f"| {t.name} | {t.median_ms:.1f} | {t.min_ms:.1f} | {t.max_ms:.1f} | +{t.median_ms - base:.1f} ms |")
    return "\n".join(rows)


def machine() -> str:
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{os.uname().sysname} {os.uname().release}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, {bwrap}"
