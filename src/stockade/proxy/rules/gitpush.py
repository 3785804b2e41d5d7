"""A git push over smart HTTP, judged by the refs it updates before any byte of it goes upstream.

A push is `POST .../git-receive-pack`. Its body starts with the ref-update
commands, pkt-lines (four hex digits of length, then the payload):

    0077<old-oid> <new-oid> refs/heads/agent/x\\0 report-status side-band-64k ...
    003f<old-oid> <new-oid> refs/heads/other
    0000                                        (flush: the commands end)
    [push options, then a flush, if the client asked for them]
    PACK...                                     (the objects: up to gigabytes)

`shallow <oid>` lines may come before the commands. A body of a flush
alone is git's probe before a large push: it updates nothing and passes. The daemon holds the
body back (`PushGate`, the flow's `request.stream`) until the commands are
read, up to MAX_COMMAND_BYTES, then judges every ref against the host's
`push` patterns: all covered, and the held bytes and the rest go on; any
not covered, and the flow is cut with nothing of its body sent, so the
server's receive-pack reads an empty request and updates nothing. A
command section that does not read as git writes it (too long, a broken
pkt-line, a bad ref name, a signed push's certificate) is refused too, and
so is a push asking for push options (`git push -o`): they update no ref
themselves, but forges act on them, on refs no pattern names (GitLab's
`merge_request.target=main` with `merge_request.merge_when_pipeline_succeeds`
merges the pushed branch into main).

Deletions (`new-oid` all zeros) and force pushes are judged like any
update: the patterns say which refs may change, and a force push cannot be
told from a fast-forward without the repository.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from stockade.profiles.gitrefs import first_match, ref_name_problem, shown_ref

MAX_COMMAND_BYTES = 1 << 20  # more than 10,000 ref updates: a push that large is refused
MAX_PKT = 65520  # git's LARGE_PACKET_MAX
REFS_SHOWN = 360  # characters of ref names in one audit rule

_HEX = re.compile(rb"^[0-9a-fA-F]{4}$")
_COMMAND = re.compile(rb"^([0-9a-f]{40}|[0-9a-f]{64}) ([0-9a-f]{40}|[0-9a-f]{64}) (.+)$", re.DOTALL)
_SHALLOW = re.compile(rb"^shallow ([0-9a-f]{40}|[0-9a-f]{64})$")


@dataclass(frozen=True)
class RefUpdate:
    old: str
    new: str
    ref: str

    @property
    def deletes(self) -> bool:
        return set(self.new) == {"0"}


class CommandReader:
    """Reads the command section of a receive-pack request as its bytes come.

    After `feed`: `error` says why the section is refused, or `done` is set with
    `commands` (the whole section read), or more bytes are needed."""

    def __init__(self, limit: int = MAX_COMMAND_BYTES) -> None:
        self.buffer = bytearray()
        self.position = 0
        self.limit = limit
        self.commands: list[RefUpdate] = []
        self.done = False
        self.error: str | None = None

    def feed(self, data: bytes) -> None:
        if self.done or self.error:
            return
        self.buffer += data
        while not self.done and not self.error:
            if self.position >= self.limit:
                self.error = f"its ref-update commands are longer than {self.limit >> 10} KiB"
                return
            head = bytes(self.buffer[self.position : self.position + 4])
            if len(head) < 4:
                return
            if not _HEX.match(head):
                self.error = "its body does not start with git's ref-update commands (pkt-lines)"
                return
            length = int(head, 16)
            if length == 0:
                self.position += 4
                self.done = True  # none at all is git's probe before a large push: receive-pack then reads nothing more
                return
            if length < 5 or length > MAX_PKT:
                self.error = f"a pkt-line of length {length} in its ref-update commands"
                return
            if len(self.buffer) < self.position + length:
                if self.position + length > self.limit:
                    self.error = f"its ref-update commands are longer than {self.limit >> 10} KiB"
                return
            payload = bytes(self.buffer[self.position + 4 : self.position + length])
            self.position += length
            self._line(payload)

    def _line(self, payload: bytes) -> None:
        if payload.endswith(b"\n"):
            payload = payload[:-1]
        if payload.startswith(b"push-cert"):
            self.error = "a signed push (push-cert) is not read by stockade"
            return
        if _SHALLOW.match(payload) and not self.commands:
            return
        command, _, capabilities = payload.partition(b"\0")  # receive-pack reads a ref name up to a NUL on every line
        if b"push-options" in capabilities:  # on any line: receive-pack reads capabilities on each
            self.error = "push options (git push -o) are not let through: forges act on them (a merge request merged for you)"
            return
        match = _COMMAND.match(command)
        if match is None:
            self.error = "a line of its ref-update commands is not <old-oid> <new-oid> <ref>"
            return
        try:
            ref = match.group(3).decode("utf-8")
        except UnicodeDecodeError:
            self.error = "a ref name that is not UTF-8"
            return
        problem = ref_name_problem(ref)
        if problem:
            self.error = problem
            return
        self.commands.append(RefUpdate(match.group(1).decode(), match.group(2).decode(), ref))


def refs_text(commands: Iterable[RefUpdate], limit: int = REFS_SHOWN) -> str:
    """The refs of a push, for a record: `refs/heads/a, refs/heads/b (delete)`, cut with a count of the rest."""
    names = [shown_ref(c.ref) + (" (delete)" if c.deletes else "") for c in commands]
    kept: list[str] = []
    for number, name in enumerate(names):
        if kept and sum(len(k) + 2 for k in kept) + len(name) > limit:
            return ", ".join(kept) + f" and {len(names) - number} more"
        kept.append(name)
    return ", ".join(kept)


def judge_refs(patterns: tuple[str, ...], commands: list[RefUpdate]) -> tuple[bool, str, str | None]:
    """(allowed, the rule that decided, the first ref no pattern covers) for a push's ref updates: all or nothing."""
    if not commands:
        return True, "http push of no ref (git's probe before a large push; nothing is updated)", None
    refs = refs_text(commands)
    for command in commands:
        if first_match(patterns, command.ref) is None:
            return False, f"git push {refs}: no push rule covers {shown_ref(command.ref)}", command.ref
    used = ", ".join(dict.fromkeys(str(first_match(patterns, c.ref)) for c in commands))
    return True, f"http push {used} ({refs})", None


class PushGate:
    """A `request.stream` callable: holds a push's body back until its commands are read and judged.

    `refuse(rule, ref)` is called once for a refused push (nothing of it has gone on; the
    caller cuts the flow), `allow(rule)` once for an allowed one (the held bytes go on now)."""

    def __init__(self, patterns: tuple[str, ...], allow: Callable[[str], None], refuse: Callable[[str, str | None], None]) -> None:
        self.patterns = patterns
        self.reader: CommandReader | None = CommandReader()
        self.on_allow = allow
        self.on_refuse = refuse
        self.refused = False

    def __call__(self, chunk: bytes) -> list[bytes]:
        reader = self.reader
        if reader is None:
            return [chunk] if chunk else []
        if self.refused:
            return []
        if chunk:
            reader.feed(chunk)
        elif not reader.done and not reader.error:
            reader.error = "its body ended before its ref-update commands did"
        if reader.error:
            self.refused = True
            self.on_refuse(f"git push refused: {reader.error}", None)
            return []
        if not reader.done:
            return []  # held back: never an empty chunk, which would end a chunked body upstream
        allowed, rule, ref = judge_refs(self.patterns, reader.commands)
        if not allowed:
            self.refused = True
            self.on_refuse(rule, ref)
            return []
        self.on_allow(rule)
        held = bytes(reader.buffer)
        self.reader = None
        return [held]
