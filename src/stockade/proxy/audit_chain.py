"""Tamper evidence for the audit log: every line carries a hash chained to the line before it.

Each line the writer appends ends in `"chain":"H"`, where H is the SHA-256 of
the previous line's H (64 hex digits; 64 zeros for a file's first chained
line) followed by the line's own bytes without that field. Changing, inserting
or removing a line then breaks every later link, and `stockade audit --verify`
names the first line that does not follow the one before it.

Each generation of the log (audit.jsonl, .1, .2) is its own chain; the
rotation note that opens a new generation carries the head of the one it
follows (`previous_head`), so a removed generation in between shows too.
A line cut short by a full disk or a killed writer is no record: the next line
chains to the last whole one, and the verifier skips such lines the same way
(and counts them). Lines written before chaining began (an older stockade's)
may only come before a file's first chained line.

What this does not stop: someone with the user's own rights (the sandbox never
has them: the log is hidden from it) can rewrite the whole chain, or cut the
tail of the log. The chain proves a log was not edited in the middle since its
heads were seen elsewhere: each session's end line in the log carries the
head, and the OpenTelemetry export sends every line's hash off the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

ZERO = "0" * 64
FIELD = b',"chain":"'
_SEALED = re.compile(rb',"chain":"([0-9a-f]{64})"\}\n?$')
TAIL_BYTES = 65536  # more than any whole record (fields are bounded: audit.FIELD_LIMITS)


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


def last_link(fd: int, size: int) -> str:
    """The link of the last whole chained line in the first `size` bytes of an open log; ZERO where
    there is none (an empty file, or one whose last whole line came before chaining began)."""
    start = max(0, size - TAIL_BYTES)
    tail = os.pread(fd, size - start, start)
    for line in reversed(tail.split(b"\n")):
        if not _whole(line):
            continue  # torn, or cut by the window's start
        found = unsealed(line)
        return found[1] if found else ZERO
    return ZERO


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
    torn: int = 0  # lines cut short, skipped
    head: str = ZERO  # the newest file's last link
    broken: str = ""  # the first line that does not follow: where and why

    @property
    def ok(self) -> bool:
        return not self.broken


def verify(paths: list[Path]) -> Verdict:
    """Check each file's chain, oldest generation first, and that each rotation note names the head
    of the generation before it; stops at the first break."""
    verdict = Verdict()
    previous_head: str | None = None  # the older generation's head, when it is still there
    for path in paths:
        try:
            lines = _read_regular(path).split(b"\n")
        except FileNotFoundError:
            previous_head = None
            continue
        verdict.files.append(str(path))
        link, chained = ZERO, False
        for number, line in enumerate(lines, start=1):
            if not line:
                continue
            if not _whole(line):
                verdict.torn += 1
                continue
            found = unsealed(line + b"\n")
            if found is None:
                if chained:
                    verdict.broken = f"{path}, line {number}: a line with no link among linked ones (inserted)"
                    return verdict
                verdict.unchained += 1
                continue
            body, own = found
            expected = hashlib.sha256(link.encode("ascii") + body).hexdigest()
            if own != expected:
                why = "it, or one before it, was changed, removed or inserted"
                verdict.broken = f"{path}, line {number}{_which(body)}: does not follow the line before it ({why})"
                return verdict
            if not chained and previous_head is not None:
                named = json.loads(body).get("previous_head")
                if json.loads(body).get("event") == "rotated" and named != previous_head:
                    verdict.broken = f"{path}, line {number}: the rotation note does not name the head of the older file (a generation was replaced)"
                    return verdict
            chained, link = True, own
            verdict.records += 1
        previous_head = link if chained else None
        verdict.head = link
    return verdict


def _which(body: bytes) -> str:
    record = json.loads(body)
    said = [f"{key} {record[key]}" for key in ("time", "session") if isinstance(record.get(key), str)]
    return f" ({', '.join(said)})" if said else ""


def _read_regular(path: Path) -> bytes:
    """A log file's bytes: never through a link, never waiting on a FIFO put in its place."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)
