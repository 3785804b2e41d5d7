"""Sizes ("4G") and durations ("30m") as written in policies and options: the one parser and formatter of each."""

from __future__ import annotations

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$"
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = r"(\d+(?:\.\d+)?)(ms|s|m|h|d)"


def parse_size(value: int | str) -> int:
    """Bytes from an integer or a string like "512M", "4G", "1.5GiB"."""
    if isinstance(value, bool):
        raise ValueError('expected a size such as "4G" or "512M"')
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("a size must be positive")
        return value
    if value.isdigit():  # the common spelling, without loading re (--max-output is on every hooked command)
        return parse_size(int(value))
    import re

    match = re.match(_SIZE, value, re.IGNORECASE)
    if not match:
        raise ValueError(f'bad size {value!r}: write a number with K, M, G or T, e.g. "4G"')
    number = float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if number < 1:
        raise ValueError(f"bad size {value!r}: it must be at least one byte")
    return int(number)


MAX_DURATION = 100 * 365 * 86400.0  # a century: longer ones overflow the clock's arithmetic, and mean "no limit"


def parse_duration(value: int | float | str) -> float:
    """Seconds from a number or a string like "30m", "1h30m", "500ms"; positive and at most MAX_DURATION."""
    if isinstance(value, bool):
        raise ValueError('expected a duration such as "30m" or "10s"')
    if isinstance(value, (int, float)):
        if not 0 < value <= MAX_DURATION:  # NaN compares false with everything: caught here too
            raise ValueError(f"a duration must be a positive number of seconds up to a century, not {value!r}")
        return float(value)
    import re

    text = value.strip().replace(" ", "")
    parts = re.findall(_DURATION_PART, text, re.IGNORECASE)
    if not text or "".join(n + u for n, u in parts).lower() != text.lower():
        raise ValueError(f'bad duration {value!r}: write e.g. "30m", "90s" or "1h30m"')
    seconds = sum(float(n) * _DURATION_UNITS[u.lower()] for n, u in parts)
    if not 0 < seconds <= MAX_DURATION:
        raise ValueError(f"bad duration {value!r}: it must be positive and at most a century (leave the key out for no limit)")
    return seconds


def format_size(size: int) -> str:
    for unit, factor in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def format_duration(seconds: float) -> str:
    """The shortest spelling parse_duration reads back as the same value ("7d", "1h", "90s", "500ms", "0.0004s")."""
    if seconds >= 1 and float(seconds).is_integer():
        whole = int(seconds)
        for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
            if whole % factor == 0:
                return f"{whole // factor}{unit}"
        return f"{whole}s"
    milliseconds = round(seconds * 1000, 9)
    if milliseconds >= 1 and float(milliseconds).is_integer():
        return f"{int(milliseconds)}ms"
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"
