"""The bench's report formatting on made-up samples: cheap, and what RESULTS.md readers rely on."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from common import MB_S, MS, Section, Series, comparisons, render, table  # noqa: E402
from run_all import make_plan  # noqa: E402


def startup_section() -> Section:
    series = [
        Series("bare bwrap", (0.005, 0.006, 0.004)),
        Series("stockade", (0.100, 0.090, 0.110)),
        Series("srt", (0.350, 0.360, 0.300)),
    ]
    return Section("Startup", "what", MS, series, "bare bwrap", [("stockade", "srt")])


def test_table_shows_median_min_max_and_the_difference_from_the_baseline() -> None:
    lines = table(startup_section()).splitlines()
    assert lines[0] == "| what | median ms | min | max | vs bare bwrap |"
    assert lines[2] == "| bare bwrap | 5.0 | 4.0 | 6.0 | +0.0 ms (1.0x) |"
    assert lines[3] == "| stockade | 100.0 | 90.0 | 110.0 | +95.0 ms (20.0x) |"


def test_per_command_column_for_a_loop() -> None:
    section = Section("loop", "", MS, [Series("a", (1.0, 2.0, 3.0))], "a", per=100)
    assert table(section).splitlines()[2] == "| a | 2000.0 | 1000.0 | 3000.0 | 20.0 | +0.0 ms (1.0x) |"


def test_comparison_says_faster_or_slower_by_the_medians() -> None:
    assert comparisons(startup_section()) == ["stockade is 3.5x faster than srt (stockade vs srt: 100.0 vs 350.0 ms)"]
    speeds = Section("dl", "", MB_S, [Series("stockade", (100.0,)), Series("srt", (200.0,))], "stockade", [("stockade", "srt")])
    assert comparisons(speeds) == ["stockade is 2.0x slower than srt (stockade vs srt: 100 vs 200 MB/s)"]
    assert "| srt | 200 | 200 | 200 | 2.00x |" in render(speeds)


def test_close_medians_are_called_close() -> None:
    section = Section("s", "", MS, [Series("stockade", (0.100,)), Series("srt", (0.102,))], "stockade", [("stockade", "srt")])
    assert comparisons(section)[0].startswith("stockade and srt are within 5% of each other")


def test_missing_srt_rows_give_no_comparison() -> None:
    section = Section("s", "", MS, [Series("stockade", (0.1,))], "stockade", [("stockade", "srt")])
    assert comparisons(section) == []


def test_plan_scales_the_long_workloads_with_runs() -> None:
    assert make_plan(None, quick=False).loop_runs == 3
    quick = make_plan(None, quick=True)
    assert (quick.startup_runs, quick.loop_count, quick.size_mb) == (5, 20, 50)
    assert make_plan(40, quick=False).download_runs == 10
