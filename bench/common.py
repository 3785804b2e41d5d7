"""Shared bench helpers: samples taken side by side, their Markdown tables, and the versions behind them."""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Series:
    """One contender's samples on one workload, in the workload's own unit (seconds, or MB/s)."""

    name: str
    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class Unit:
    """How a section shows its figures: seconds become ms, MB/s stay MB/s."""

    label: str
    scale: float = 1.0
    digits: int = 1
    higher_is_better: bool = False

    def show(self, value: float) -> str:
        return f"{value * self.scale:.{self.digits}f}"


MS = Unit("ms", 1000.0)
MS_FINE = Unit("ms", 1000.0, digits=3)
SECONDS = Unit("s", 1.0, digits=2)
MB_S = Unit("MB/s", 1.0, digits=0, higher_is_better=True)


@dataclass(frozen=True)
class Contender:
    """One way to run a workload's sample; `before` and `after` run untimed around each sample (stop a daemon, clear
    files; wait for the daemon a cold run started, so its start does not load the next contender's sample)."""

    name: str
    argv: Sequence[str]
    cwd: Path
    env: dict[str, str]
    before: Callable[[], None] | None = None
    after: Callable[[], None] | None = None


def run_checked(argv: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """stdout of a command that must succeed; a failure stops the bench with the command's own stderr."""
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)[:200]}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def time_once(contender: Contender) -> float:
    """Wall time of one sample from fork to exit: what a caller waits for."""
    if contender.before is not None:
        contender.before()
    start = time.perf_counter()
    done = subprocess.run(list(contender.argv), cwd=contender.cwd, env=contender.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)
    elapsed = time.perf_counter() - start
    if contender.after is not None:
        contender.after()
    if done.returncode != 0:
        raise SystemExit(f"{contender.name}: exit {done.returncode}: {done.stderr.decode(errors='replace').strip()[-2000:]}")
    return elapsed


def rounds(contenders: Sequence[Contender], runs: int, sample: Callable[[Contender], list[float]], warmup: int = 1) -> list[Series]:
    """Every contender once per round, the starting one rotating, so load drifts and order effects hit all alike.

    The first `warmup` rounds are not kept: they fill the page cache, compile and cache stockade's seccomp filter,
    and start its daemon.
    """
    kept: dict[str, list[float]] = {c.name: [] for c in contenders}
    for index in range(warmup + runs):
        shift = index % len(contenders)
        for contender in [*contenders[shift:], *contenders[:shift]]:
            values = sample(contender)
            if index >= warmup:
                kept[contender.name] += values
    return [Series(c.name, tuple(kept[c.name])) for c in contenders]


def timed_rounds(contenders: Sequence[Contender], runs: int, warmup: int = 1) -> list[Series]:
    """Wall times of `runs` interleaved rounds, in seconds."""
    return rounds(contenders, runs, lambda c: [time_once(c)], warmup)


@dataclass(frozen=True)
class Section:
    """One table: a workload's contenders, the baseline they are compared with, and the stockade/srt pairs to compare."""

    title: str
    note: str
    unit: Unit
    series: list[Series]
    baseline: str
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (stockade row, srt row)
    per: int = 1  # commands in one sample: >1 adds a per-command column

    def find(self, name: str) -> Series | None:
        return next((s for s in self.series if s.name == name), None)


def versus(value: float, base: float, unit: Unit) -> str:
    """A figure against the baseline of the same run: the ratio, plus the difference when lower is better."""
    ratio = value / base if base else float("inf")
    if unit.higher_is_better:
        return f"{ratio:.2f}x"
    return f"{(value - base) * unit.scale:+.{unit.digits}f} {unit.label} ({ratio:.1f}x)"


def table(section: Section) -> str:
    """The section's Markdown table: median, min and max of each row, and each row against the baseline."""
    unit = section.unit
    base = section.find(section.baseline)
    head = f"| what | median {unit.label} | min | max |"
    rule = "|---|---:|---:|---:|"
    if section.per > 1:
        head += " per command ms |"
        rule += "---:|"
    head += f" vs {section.baseline} |"
    rule += "---:|"
    rows = [head, rule]
    for series in section.series:
        cells = [series.name, unit.show(series.median), unit.show(series.low), unit.show(series.high)]
        if section.per > 1:
            cells.append(f"{series.median / section.per * 1000:.1f}")
        cells.append(versus(series.median, base.median, unit) if base else "")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def comparisons(section: Section) -> list[str]:
    """One sentence per stockade/srt pair, from the medians of this run."""
    lines = []
    for ours, theirs in section.pairs:
        a, b = section.find(ours), section.find(theirs)
        if a is None or b is None:
            continue
        factor = a.median / b.median if section.unit.higher_is_better else b.median / a.median
        shown = f"{section.unit.show(a.median)} vs {section.unit.show(b.median)} {section.unit.label}"
        if 0.95 < factor < 1.05:
            lines.append(f"stockade and srt are within 5% of each other ({ours} vs {theirs}: {shown})")
        elif factor >= 1:
            lines.append(f"stockade is {factor:.1f}x faster than srt ({ours} vs {theirs}: {shown})")
        else:
            lines.append(f"stockade is {1 / factor:.1f}x slower than srt ({ours} vs {theirs}: {shown})")
    return lines


def render(section: Section) -> str:
    """The section as Markdown: heading, what was measured, the table, the srt comparisons."""
    parts = [f"## {section.title}", section.note, table(section)]
    lines = comparisons(section)
    if lines:
        parts.append("\n".join(f"- {line}" for line in lines))
    return "\n\n".join(parts)


def first_line(argv: Sequence[str]) -> str:
    """The first line a `--version` style command prints, or why there is none."""
    if shutil.which(argv[0]) is None and not os.path.isabs(argv[0]):
        return "not installed"
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    except OSError as error:
        return f"not runnable ({error.strerror})"
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else f"exit {done.returncode}"


def script_python(command: Sequence[str]) -> str:
    """The interpreter behind a console script (its shebang), so we can ask it for its packages' versions."""
    try:
        with open(command[0], "rb") as handle:
            line = handle.readline().decode(errors="replace").strip()
    except OSError:
        return command[0]
    return line[2:].strip().split()[0] if line.startswith("#!") else command[0]


def package_version(python: str, name: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({name!r}))"
    return first_line([python, "-c", code])


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, str]:
    """What the figures depend on outside the tools themselves."""
    return {
        "kernel": f"{platform.system()} {platform.release()}",
        "CPU": f"{cpu_model()}, {os.cpu_count()} cores",
        "bwrap": first_line(["bwrap", "--version"]),
        "bench Python": sys.version.split()[0],
    }
