"""Sandbox denials from `log stream --style ndjson`, and the policy line that would allow each.

Pure: lines in, `Violation`s and one-line hints out. The kernel reports a
denial as an `eventMessage` such as

    Sandbox: cat(4242) deny(1) file-read-data /Users/me/.ssh/id_ed25519

and, because every deny rule of our profile carries `(with message TAG)`,
the run's tag is part of that message; repeated denials are folded into
`Sandbox: 3 duplicate reports for cat deny(1) file-read-data ...`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from stockade.profiles.model import NetworkMode
from stockade.profiles.paths import is_within
from stockade.seatbelt.profile import SENSITIVE_MACH_SERVICES, Entry, RuleIndex

_OPERATION = r"(?P<operation>[a-z][a-z0-9*-]*)"
_REPORT = re.compile(r"Sandbox: (?P<process>.+?)\((?P<pid>\d+)\) (?:System Policy: )?deny\((?P<count>\d+)\) " + _OPERATION + r"(?: (?P<target>.*))?$")
_DUPLICATES = re.compile(
    r"Sandbox: (?P<dups>\d+) duplicate reports? for (?P<process>.+?) deny\((?P<count>\d+)\) " + _OPERATION + r"(?: (?P<target>.*))?$"
)
_ADDRESS = re.compile(r"^(?P<host>.+):(?P<port>\d+|\*)$")
SUMMARY_LIMIT = 20
# Lookups macOS libraries try on their own in every process (diagnostics,
# analytics); denied, harmless, and not something a policy should change.
NOISE: frozenset[tuple[str, str]] = frozenset(
    {
        ("mach-lookup", "com.apple.diagnosticd"),
        ("mach-lookup", "com.apple.analyticsd"),
        ("mach-lookup", "com.apple.analyticsd.messagetracer"),
    }
)


@dataclass(frozen=True)
class Violation:
    """One denied operation: which process tried what on which target."""

    process: str
    operation: str
    target: str = ""
    pid: int | None = None
    count: int = 1

    @property
    def key(self) -> tuple[str, str]:
        return (self.operation, self.target)


def parse_message(message: str, tag: str) -> Violation | None:
    """A `Violation` from one kernel message carrying our tag, else None."""
    if tag not in message:
        return None
    for line in message.replace(tag, " ").splitlines():
        line = line.strip()
        if match := _REPORT.search(line):
            return _violation(match, pid=int(match["pid"]), count=1)
        if match := _DUPLICATES.search(line):
            return _violation(match, pid=None, count=int(match["dups"]))
    return None


def _violation(match: re.Match[str], *, pid: int | None, count: int) -> Violation:
    target = (match["target"] or "").strip()
    return Violation(process=match["process"], operation=match["operation"], target=target, pid=pid, count=count)


def parse_line(line: str, tag: str) -> Violation | None:
    """One line of `log stream --style ndjson` (banner lines and other events give None)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    message = record.get("eventMessage")
    return parse_message(message, tag) if isinstance(message, str) else None


def parse_lines(lines: Iterable[str], tag: str) -> list[Violation]:
    return [v for v in (parse_line(line, tag) for line in lines) if v is not None]


def merge(violations: Iterable[Violation]) -> list[Violation]:
    """One entry per (operation, target), counts added, first process kept; order of first sight."""
    merged: dict[tuple[str, str], Violation] = {}
    for v in violations:
        seen = merged.get(v.key)
        merged[v.key] = v if seen is None else Violation(seen.process, seen.operation, seen.target, seen.pid, seen.count + v.count)
    return list(merged.values())


# ---- hints: the policy line that would allow a denial ----


def display_path(path: str, home: str) -> str:
    """`~/x` for paths in the home folder, as a policy would spell them."""
    home = home.rstrip("/")
    if home and is_within(path, home) and home != "/":
        return "~" + path[len(home) :]
    return path


def _logical(path: str) -> str:
    """The /tmp, /var, /etc spelling of a /private path (what a user writes)."""
    for link in ("/tmp", "/var", "/etc"):
        if path == "/private" + link or path.startswith("/private" + link + "/"):
            return path[len("/private") :]
    return path


def _first(entries: tuple[Entry, ...], path: str) -> Entry | None:
    return next((e for e in entries if e.matches(path)), None)


def _is_write(operation: str) -> bool:
    return operation.startswith("file-write") or operation in ("file-link", "file-mknod")


def hint(v: Violation, index: RuleIndex) -> str:
    """What to change (or why nothing can), in one line."""
    if v.operation.startswith("file-"):
        return _file_hint(v, index)
    if v.operation.startswith("network"):
        return _network_hint(v, index)
    if v.operation == "mach-lookup":
        if v.target in SENSITIVE_MACH_SERVICES:
            return "this service acts for you outside the sandbox (keychain, pasteboard, Launch Services); never allowed"
        return "this macOS service is not on stockade's allowlist; no policy line allows it"
    if v.operation in ("appleevent-send", "lsopen"):
        return "Apple Events and opening apps run code outside the sandbox; never allowed"
    if v.operation == "process-exec":
        return "this tool acts outside the sandbox or as another user; never run inside it"
    if v.operation in ("signal",) or v.operation.startswith("process-info"):
        return "only processes of this sandbox can be signalled or inspected; no policy line changes that"
    if v.operation.startswith("sysctl"):
        return "this kernel setting is not readable in the sandbox; no policy line allows it"
    return "not allowed by stockade's macOS profile; no policy line allows it"


def _file_hint(v: Violation, index: RuleIndex) -> str:
    path = v.target
    origin = index.origin
    shown = display_path(_logical(path), index.home)
    if _first(index.hidden, path):
        return "stockade's own state is hidden from every sandbox; no policy line allows it"
    if entry := _first(index.deny_read, path):
        return f'blocked by [filesystem] deny_read "{display_path(entry.text, index.home)}" in {origin}: remove that entry to allow it'
    if not _is_write(v.operation):
        return "no policy line allows this; everything else is readable"
    if entry := _first(index.read_only, path):
        return (
            f'mandatory floor: "{display_path(entry.text, index.home)}" runs code later outside the sandbox '
            "and stays read-only; change it outside the sandbox"
        )
    if entry := _first(index.deny_write, path):
        return f'blocked by [filesystem] deny_write "{display_path(entry.text, index.home)}" in {origin}: remove that entry to allow it'
    if _first(index.no_create, path):
        return f"{shown} would hold a protected path, so it cannot be created in the sandbox: create it outside once"
    if _first(index.no_rename, path):
        return f"{shown} holds a protected path, so it cannot be moved or deleted in the sandbox"
    if _first(index.writable, path):
        return "inside a writable place, but this kind of change is not allowed (links, device files)"
    return f'add "{_suggest_root(path, index)}" to [filesystem] allow_write in {origin}'


def _suggest_root(path: str, index: RuleIndex) -> str:
    """The folder to make writable: the file's folder, unless that is $HOME or a top-level folder."""
    logical = _logical(path)
    parent = os.path.dirname(logical)
    home = index.home.rstrip("/")
    too_broad = parent in ("/", home) or os.path.dirname(parent) == "/"
    return display_path(logical if too_broad else parent, index.home)


def _network_hint(v: Violation, index: RuleIndex) -> str:
    target = v.target
    origin = index.origin
    if v.operation != "network-outbound":
        return "listening for connections is not allowed in the sandbox; no policy line allows it"
    if target.startswith("/"):
        socket = _logical(target)
        if index.network_mode is NetworkMode.NONE:
            return f'the network is off: set [network] mode = "allowlist" and unix_sockets = ["{socket}"] in {origin}'
        return f'add "{socket}" to [network] unix_sockets in {origin}'
    address = _ADDRESS.match(target)
    where = address["host"] + ":" + address["port"] if address else target
    if index.network_mode is NetworkMode.NONE:
        return f"the network is off: add the host it meant to reach ({where}) to [network] allow in {origin}"
    return f"direct connection to {where} refused: only the proxy in HTTPS_PROXY is reachable, and it applies [network] allow"


def file_findings(violations: Iterable[Violation], index: RuleIndex) -> list[dict[str, object]]:
    """The file denials as the report's data, in the shape Linux's --trace gives (bwrap/after/denials.py)."""
    found: list[dict[str, object]] = []
    for v in merge(violations):
        if not v.operation.startswith("file-"):
            continue
        operation = "write" if _is_write(v.operation) else "read"
        rule = hint(v, index)
        found.append({"path": _logical(v.target), "operation": operation, "syscall": v.operation, "errno": "", "rule": rule, "wall": _wall(rule)})
    return found


def _wall(rule: str) -> str:
    """The kind of wall (bwrap/after/denials.py WALLS) a file hint names, so learn treats both backends alike."""
    for words, wall in (
        ("deny_read", "deny_read"), ("deny_write", "deny_write"), ("stockade's own state", "floor"), ("mandatory floor", "floor"),
        ("protected path", "floor"), ("to [filesystem] allow_write", "outside_write"),
    ):  # fmt: skip
        if words in rule:
            return wall
    return ""


# ---- rendering ----


def printable(text: str) -> str:
    """Text from the log, with control characters shown as escapes (never sent to the terminal)."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def summary(violations: Iterable[Violation], index: RuleIndex, limit: int = SUMMARY_LIMIT) -> list[str]:
    """The lines stockade prints on stderr after a run; empty when nothing was denied."""
    merged = [v for v in merge(violations) if v.key not in NOISE]
    if not merged:
        return []
    total = sum(v.count for v in merged)
    lines = [f"stockade: the sandbox denied {total} operation{'s' if total != 1 else ''} (policy: {printable(index.origin)}):"]
    for v in merged[:limit]:
        times = f" x{v.count}" if v.count > 1 else ""
        lines.append(f"  {v.operation} {printable(v.target)} ({printable(v.process)}{times}): {printable(hint(v, index))}")
    if len(merged) > limit:
        lines.append(f"  ... and {len(merged) - limit} more")
    return lines
