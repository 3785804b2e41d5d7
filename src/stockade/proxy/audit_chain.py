"""Tamper evidence for the audit log: every line carries a hash chained to the line before it.

Each line the writer appends ends in `"chain":"H"`, where H is the SHA-256 of
the previous line's H (64 hex digits; 64 zeros for a file's first chained
line) followed by the line's own bytes without that field. Changing, inserting
or removing a line then breaks every later link, and `stockade audit --verify`
names the first line that does not follow the one before it.

Each generation of the log (audit.jsonl, .1, .2) is its own chain; the
rotation note that opens a new generation carries the head of the one it
follows (`previous_head`), so a generation replaced or removed in between
shows too. Nothing outside the chain is taken on trust:
- a line cut short (a full disk, a killed writer) is ended by the next writer,
  which says so in a `torn` line giving its length, chained like any other;
  a line that is no record and is not so announced is an insertion;
- lines an older stockade wrote before chaining began are counted by the
  `chain-start` line that begins the chain in that file (how many lines, how
  many bytes): lines added to or removed from that prefix show.

What this does not stop: someone with the user's own rights (the sandbox never
has them: the log is hidden from it) can rewrite the whole chain, or cut the
tail of the log. The chain proves a log was not edited since its heads were
seen elsewhere: each session's end line in the log carries the head, and the
OpenTelemetry export sends every line's hash off the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

ZERO = "0" * 64
FIELD = b',"chain":"'
_SEALED = re.compile(rb',"chain":"([0-9a-f]{64})"\}\n?$')
CHUNK = 65536


def seal(line: bytes, previous: str) -> tuple[bytes, str]:
    """The line (one JSON object ending in `}` and a newline) with its link to `previous` added
    as its last field, and that link."""
    body = line.rstrip(b"\n")
    link = hashlib.sha256(previous.encode("ascii") + body).hexdigest()
    return body[:-1] + FIELD + link.encode("ascii") + b'"}\n', link


def unsealed(line: bytes) -> tuple[bytes, str] | None:
    """(the line as it was hashed, its link), or None for a line with no link."""
    match = _SEALED.search(line)
    if match is None:
        return None
    return line[: match.start()] + b"}", match.group(1).decode("ascii")


def _lines_backward(fd: int, size: int) -> Iterator[bytes]:
    """The whole lines of the first `size` bytes of an open file, last first, without their newlines;
    the text after the last newline (a torn tail) is none. Reads as far back as a long line needs."""
    position, buffer, past_tail = size, b"", False
    while position > 0:
        step = min(CHUNK, position)
        position -= step
        buffer = os.pread(fd, step, position) + buffer
        if not past_tail:
            cut = buffer.rfind(b"\n")
            if cut < 0:
                continue
            buffer, past_tail = buffer[:cut], True
        parts = buffer.split(b"\n")
        buffer = parts[0]
        yield from reversed(parts[1:])
    if past_tail:
        yield buffer  # the file's first line


def last_link(fd: int, size: int) -> tuple[str, bool]:
    """(the link of the last whole line in the first `size` bytes of an open log, whether it has one):
    ZERO and False for an empty file, or one whose last record came before chaining began."""
    for line in _lines_backward(fd, size):
        if not _whole(line):
            continue  # an empty line, or one that is no record
        found = unsealed(line)
        return (found[1], True) if found else (ZERO, False)
    return ZERO, False


def torn_tail(fd: int, size: int) -> int:
    """How many bytes follow the last newline (a line a writer did not finish); 0 when none do."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    position = size
    while position > 0:
        step = min(CHUNK, position)
        position -= step
        cut = os.pread(fd, step, position).rfind(b"\n")
        if cut >= 0:
            return size - (position + cut + 1)
    return size


def unchained_prefix(fd: int, size: int, torn: int) -> dict[str, int]:
    """What a `chain-start` line says of the lines before it: how many, in how many bytes (a torn
    tail among them, ended by the newline written before it)."""
    newlines, position = 0, 0
    while position < size:
        chunk = os.pread(fd, min(CHUNK * 16, size - position), position)
        if not chunk:
            break
        newlines += chunk.count(b"\n")
        position += len(chunk)
    return {"unchained_lines": newlines + (1 if torn else 0), "unchained_bytes": size + (1 if torn else 0)}


def _whole(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


@dataclass
class Verdict:
    """What `verify` found in one log and its rotated generations."""

    files: list[str] = field(default_factory=list)
    records: int = 0  # chained lines checked
    unchained: int = 0  # lines from before chaining began
    torn: int = 0  # lines cut short, each announced by the line after it (or the last line of the newest file)
    head: str = ZERO  # the newest file's last link
    broken: str = ""  # the first line that does not follow: where and why

    @property
    def ok(self) -> bool:
        return not self.broken


def verify(paths: list[Path]) -> Verdict:
    """Check each file's chain, oldest generation first, that no generation is missing between two
    that are there, and that each rotation note names the head of the generation before it; stops at
    the first break."""
    verdict = Verdict()
    older_head: str | None = None  # the older generation's head, when it is there
    missing: Path | None = None
    for path in paths:
        try:
            with open_regular(path) as handle:
                data = handle.read()
        except FileNotFoundError:
            if verdict.files:
                missing = missing or path
            older_head = None
            continue
        if missing is not None:
            verdict.broken = f"{missing} is missing, between {verdict.files[-1]} and {path} (a generation was removed)"
            return verdict
        verdict.files.append(str(path))
        why = _verify_file(path, data, older_head, verdict)
        if why:
            verdict.broken = why
            return verdict
        older_head = verdict.head
    return verdict


def _verify_file(path: Path, data: bytes, older_head: str | None, verdict: Verdict) -> str:
    """Check one generation; "" when it holds, else where and why it does not."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the file ends whole
    announced = {index for index in range(len(lines) - 1) if _says_torn(lines[index + 1], len(lines[index]))}
    link, chained, prefix_lines, offset = ZERO, False, 0, 0
    for index, line in enumerate(lines):
        number, where = index + 1, offset
        offset += len(line) + 1
        whole = _whole(line)
        found = unsealed(line + b"\n") if whole else None
        if not chained and found is None and index not in announced:
            prefix_lines += 1  # before the chain: an older stockade's lines, which the chain-start line counts
            verdict.unchained += 1
            continue
        if index in announced:
            verdict.torn += 1  # cut short, and the next line says so
            continue
        if not whole:
            if index == len(lines) - 1 and not data.endswith(b"\n"):
                verdict.torn += 1  # the newest line, cut short, and no line after it yet
                break
            return f"{path}, line {number}: a line that is no record, and no writer said it cut one short (inserted)"
        if found is None:
            return f"{path}, line {number}: a line with no link among linked ones (inserted)"
        body, own = found
        record = json.loads(body)
        if record.get("event") == "torn" and index - 1 not in announced:
            return f"{path}, line {number}: says the line before it was cut short, and it was not (a line was removed or changed)"
        if not chained and prefix_lines:
            counted = (record.get("unchained_lines"), record.get("unchained_bytes"))
            if record.get("event") != "chain-start" or counted != (prefix_lines, where):
                return f"{path}, line {number}: the lines before the chain began were added to or removed (or never counted)"
        elif record.get("event") == "chain-start":
            return f"{path}, line {number}: a chain-start line where the chain had begun (inserted)"
        if own != hashlib.sha256(link.encode("ascii") + body).hexdigest():
            why = "it, or one before it, was changed, removed or inserted"
            return f"{path}, line {number}{_which(record)}: does not follow the line before it ({why})"
        if record.get("event") == "rotated" and older_head is not None and record.get("previous_head") != older_head:
            return f"{path}, line {number}: the rotation note does not name the head of the older file (a generation was replaced)"
        chained, link = True, own
        verdict.records += 1
    verdict.head = link
    return ""


def _says_torn(line: bytes, length: int) -> bool:
    """Whether `line` is a sealed `torn` line saying the line before it, `length` bytes, was cut short."""
    found = unsealed(line + b"\n") if _whole(line) else None
    if found is None:
        return False
    record = json.loads(found[0])
    return record.get("event") == "torn" and record.get("bytes") == length


def _which(record: dict[str, object]) -> str:
    said = [f"{key} {record[key]}" for key in ("time", "session") if isinstance(record.get(key), str)]
    return f" ({', '.join(said)})" if said else ""


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading if it is a regular file: never through a symlink, never waiting
    on a FIFO (a custom log's folder may be one a sandbox writes; its generations are hidden
    since, but were not always). FileNotFoundError if absent, OSError if anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
