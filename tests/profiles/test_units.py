from __future__ import annotations

import pytest

from stockade.profiles.units import format_duration, format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [("4G", 4 << 30), ("512m", 512 << 20), ("1.5GiB", 3 << 29), ("100", 100), (2048, 2048), ("1K", 1024)],
)
def test_sizes(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "4X", "-1G", "G", 0, True, "0"])
def test_bad_sizes(text: str | int) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("10s", 10), ("1h30m", 5400), ("500ms", 0.5), (5, 5), (2.5, 2.5), ("2d", 172800)],
)
def test_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10", "5x", "0s", -3, False, "1h 2q"])
def test_bad_durations(text: str | float) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_round_trip_formatting() -> None:
    assert format_size(4 << 30) == "4G" and format_size(1000) == "1000"
    assert format_duration(1800) == "30m" and format_duration(0.5) == "500ms" and format_duration(90) == "90s"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 0.0, -1, 1e300, "100000000000d"])
def test_a_duration_is_a_finite_positive_number(value: float | str) -> None:
    with pytest.raises(ValueError, match="positive"):
        parse_duration(value)
