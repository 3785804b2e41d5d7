"""Line numbers for keys of a TOML document, so every error can say FILE:LINE.

tomllib returns plain dicts without positions; this scanner follows table
headers and `key =` lines, which is all a policy file uses.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\"' -]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\"'.-]+(?:\s*\.\s*[A-Za-z0-9_\"'-]+)*)\s*=")


def where_written(sources: tuple[str, ...], value: str, home: str) -> tuple[str | None, int | None]:
    """(file, line) of the first policy file among `sources` that spells `value` in quotes (as
    written, or with ~ for the home), or (None, None): for an error about one entry's value."""
    spellings = {value, "~" + value[len(home) :] if value.startswith(home.rstrip("/") + "/") else value}
    for source in sources:
        if source.startswith("builtin:"):
            continue
        try:
            with open(source, encoding="utf-8", errors="replace") as handle:
                lines = handle.read(1 << 20).splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, start=1):
            if any(f'"{spelled}"' in line or f"'{spelled}'" in line for spelled in spellings):
                return source, number
    return None, None


def _clean(key: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in key.split("."))


class KeyLines:
    """Maps (table, key) to the 1-based line where the key is written."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self._keys: dict[tuple[str, str], int] = {}
        self._tables: dict[str, int] = {}
        table = ""
        depth = 0  # inside a multi-line array: skip its lines
        for number, line in enumerate(self.lines, start=1):
            stripped = _strip_comment(line)
            if depth == 0:
                header = _HEADER.match(stripped)
                if header and not stripped.lstrip().startswith("[["):
                    table = _clean(header.group(1))
                    self._tables.setdefault(table, number)
                    continue
                key = _KEY.match(stripped)
                if key:
                    full = _clean(key.group(1))
                    if "." in full:  # dotted key: network.allow = [...]
                        sub, _, leaf = full.rpartition(".")
                        self._keys.setdefault((f"{table}.{sub}".strip("."), leaf), number)
                        self._tables.setdefault(f"{table}.{sub}".strip("."), number)
                    else:
                        self._keys.setdefault((table, full), number)
            if depth or _KEY.match(stripped):
                depth = max(depth + _bracket_delta(stripped.split("=", 1)[1] if depth == 0 else stripped), 0)

    def key(self, table: str, key: str) -> int | None:
        return self._keys.get((table, key))

    def table(self, table: str) -> int | None:
        """The line of a table's header; for a table only named as a prefix ([a.b] names a), the first such header."""
        found = self._tables.get(table)
        if found is None:
            found = min((line for name, line in self._tables.items() if name.startswith(table + ".")), default=None)
        return found

    def item(self, table: str, key: str, value: str) -> int | None:
        """Line of one list item, falling back to its key's line."""
        start = self.key(table, key)
        if start is None:
            return None
        for number in range(start, min(len(self.lines), start + 500) + 1):
            line = self.lines[number - 1]
            if f'"{value}"' in line or f"'{value}'" in line:
                return number
        return start


def _outside_strings(text: str) -> list[tuple[int, str]]:
    """(index, character) of each character outside TOML strings; a backslash escapes the next
    character inside a basic ("...") string, never inside a literal ('...') one."""
    out: list[tuple[int, str]] = []
    quote, escaped = "", False
    for index, ch in enumerate(text):
        if escaped:
            escaped = False
        elif quote:
            if ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        else:
            out.append((index, ch))
    return out


def _strip_comment(line: str) -> str:
    """Drop a trailing comment that is not inside a string."""
    for index, ch in _outside_strings(line):
        if ch == "#":
            return line[:index]
    return line


def _bracket_delta(text: str) -> int:
    """Open minus closed brackets and braces outside strings."""
    return sum(1 if ch in "[{" else -1 for _index, ch in _outside_strings(text) if ch in "[{]}")
