"""A reader for git's config files: enough to find what makes git run a program.

stockade reads git config in-process (never by running `git config`) for two
reasons: the plan cache must see every file planning reads (bwrap/plan/plan_cache.py
records reads made through `open`), and a check after a run must not run the
host's git on a repository a sandbox just wrote.

The grammar follows git-config(1): `[section]`, `[section "subsection"]` and
the old `[section.subsection]`; `name = value` or a bare `name` (true); `#` and
`;` comments; double quotes; the escapes \\\\ \\" \\n \\t \\b; a backslash at the end of
a line continues the value. Section and key names are case-insensitive,
subsections are not. Anything else is a syntax error, as it is for git.
"""

from __future__ import annotations

import os
import stat

MAX_CONFIG_BYTES = 1 << 20
MAX_INCLUDE_DEPTH = 10  # git's own limit

Entry = tuple[str, str]  # ("section.subsection.name" with section and name lower-cased, value)


class ConfigSyntaxError(ValueError):
    pass


def parse(text: str) -> list[Entry]:
    """Every entry in file order; ConfigSyntaxError where git would refuse the file."""
    entries: list[Entry] = []
    section: str | None = None
    lines = text.replace("\r\n", "\n").split("\n")  # git reads CRLF as LF (a config edited on Windows)
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(" \t")
        index += 1
        if line.startswith("\ufeff") and index == 1:
            line = line[1:]
        while line.startswith("["):
            section, line = _header(line, index)
            line = line.lstrip(" \t")
        if not line or line[0] in "#;":
            continue
        if section is None:
            raise ConfigSyntaxError(f"line {index}: an entry before any [section]")
        name, rest = _name(line, index)
        if rest is None:
            entries.append((f"{section}.{name}", "true"))
            continue
        value, index = _value(rest, lines, index)
        entries.append((f"{section}.{name}", value))
    return entries


def _header(line: str, number: int) -> tuple[str, str]:
    """(the section's key prefix, what follows `]` on the line)."""
    quote = line.find('"')
    close = line.find("]")
    if close < 0:
        raise ConfigSyntaxError(f"line {number}: an unclosed [section]")
    if quote < 0 or quote > close:
        inside = line[1:close]
        if not _is_name(inside, dots=True):
            raise ConfigSyntaxError(f"line {number}: a bad section name")
        head, _, sub = inside.partition(".")
        return (f"{head.lower()}.{sub.lower()}" if sub else head.lower()), line[close + 1 :]
    name = line[1:quote].strip(" \t")
    if line[quote - 1] not in " \t":  # git ends a section's name at a space: `[remote"o"]` is refused
        raise ConfigSyntaxError(f"line {number}: a subsection's quote right after the section name")
    if not _is_name(name, dots=False):
        raise ConfigSyntaxError(f"line {number}: a bad section name")
    subsection: list[str] = []
    position = quote + 1
    while position < len(line) and line[position] != '"':
        if line[position] == "\\" and position + 1 < len(line):
            position += 1
        subsection.append(line[position])
        position += 1
    if line[position + 1 : position + 2] != "]":
        raise ConfigSyntaxError(f"line {number}: a bad subsection")
    return f"{name.lower()}.{''.join(subsection)}", line[position + 2 :]


def _is_name(name: str, *, dots: bool) -> bool:
    allowed = "-." if dots else "-"
    return bool(name) and all(c.isascii() and (c.isalnum() or c in allowed) for c in name)


def _name(line: str, number: int) -> tuple[str, str | None]:
    end = 0
    while end < len(line) and line[end].isascii() and (line[end].isalnum() or line[end] == "-"):
        end += 1
    name = line[:end]
    if not name or not name[0].isalpha():
        raise ConfigSyntaxError(f"line {number}: a bad key name")
    rest = line[end:].lstrip(" \t")
    if not rest:
        return name.lower(), None
    if rest[0] in "#;":  # git refuses a bare key followed by a comment
        raise ConfigSyntaxError(f"line {number}: a comment after the bare key {name}")
    if rest[0] != "=":
        raise ConfigSyntaxError(f"line {number}: expected '=' after {name}")
    return name.lower(), rest[1:]


ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "b": "\b"}


def _value(rest: str, lines: list[str], index: int) -> tuple[str, int]:
    out: list[str] = []
    pending_space = ""
    quoted = False
    text = rest.lstrip(" \t\r")  # git's isspace(): a CR is a blank too
    position = 0
    while True:
        if position >= len(text):
            if quoted:
                raise ConfigSyntaxError(f"line {index}: an unclosed quote")
            return "".join(out), index
        char = text[position]
        position += 1
        if char == "\\":
            if position >= len(text):  # a continuation line
                if index >= len(lines):
                    if quoted:  # git refuses a quote left open at the end of the file
                        raise ConfigSyntaxError(f"line {index}: an unclosed quote")
                    return "".join(out), index
                text, position = lines[index], 0
                index += 1
                continue
            escaped = text[position]
            position += 1
            if escaped not in ESCAPES:
                raise ConfigSyntaxError(f"line {index}: a bad escape \\{escaped}")
            out.append(pending_space + ESCAPES[escaped])
            pending_space = ""
        elif char == '"':
            out.append(pending_space)
            pending_space = ""
            quoted = not quoted
        elif not quoted and char in "#;":
            return "".join(out), index
        elif not quoted and char in " \t\r":
            if any(out):  # as git: blanks count only after something (`"" -x` reads as "-x")
                pending_space += char  # kept only if something follows
        else:
            out.append(pending_space + char)
            pending_space = ""


def read_regular(path: str, limit: int) -> bytes | None:
    """Up to `limit` bytes of a regular file (links followed, as git does); None for anything
    else. A sandbox can leave a FIFO or a link to a terminal where git data goes: opening it
    without O_NONBLOCK, or reading it, would hang planning or the check after a run."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size < limit and (chunk := os.read(fd, limit - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read(path: str) -> list[Entry] | None:
    """The file's entries; None if it is missing, unreadable, not a regular file, too large or not valid."""
    data = read_regular(path, MAX_CONFIG_BYTES + 1)
    if data is None or len(data) > MAX_CONFIG_BYTES:
        return None
    try:
        return parse(data.decode("utf-8", "surrogateescape"))
    except ConfigSyntaxError:
        return None


def with_includes(path: str, home: str, seen: tuple[str, ...] = ()) -> tuple[list[Entry], list[str]]:
    """(entries of `path` and of every file it includes, the included files' paths).

    Every `include.path` and `includeIf.*.path` counts, whatever its condition:
    for stockade, a file that could be included is a file that can make git
    run something.
    """
    entries = read(path) or []
    found: list[Entry] = []
    included: list[str] = []
    for key, value in entries:
        found.append((key, value))
        if not (key == "include.path" or (key.startswith("includeif.") and key.endswith(".path"))):
            continue
        target = expand_path(value, os.path.dirname(path), home)
        if target is None or target in seen or len(seen) >= MAX_INCLUDE_DEPTH:
            continue
        included.append(target)
        more, deeper = with_includes(target, home, (*seen, path))
        found += more
        included += deeper
    return found, included


def expand_path(value: str, base: str, home: str) -> str | None:
    """A path value as git reads it: `~/` is home, a relative one is relative to `base`."""
    if not value:
        return None
    if value.startswith("~/"):
        value = os.path.join(home, value[2:])
    elif value.startswith("~"):
        return None  # ~user: another user's home is not ours to protect
    elif value.startswith("%(prefix)/"):
        return None
    return os.path.normpath(os.path.join(base, value))


def values(entries: list[Entry], key: str) -> list[str]:
    return [value for name, value in entries if name == key]
