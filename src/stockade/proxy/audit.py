"""Audit records: one JSON line per network decision, and per file or limit finding of a run,
written so none is lost or forged.

Writing: `O_APPEND`, one `write()` per record, no user-space buffer (a record
is in the kernel when `write` returns, so a dying daemon loses nothing), and
a failed write raises: the caller must stop the traffic it could not record.
Records never carry header values or bodies, and secrets in query strings
are redacted. `json.dumps` with `ensure_ascii` escapes every control byte, so
a host name carrying a newline or a terminal escape stays inside its record.

Size: a log past MAX_LOG_BYTES is rotated (`audit.jsonl` -> `audit.jsonl.1` ->
`audit.jsonl.2`; KEEP_ROTATED older files), so a sandbox flooding allowed
requests cannot fill the disk through it. The first line of each new file says
that it follows a rotation, and which older file (its size, its last record's
time) was deleted to make room: the loss, if any, is itself recorded.
Readers take the generations oldest first, so a session that spans a rotation
reads whole.

Tamper evidence: each line ends in a hash chained to the line before it
(audit_chain.py; `stockade audit --verify`).

Reading (for `stockade audit`): filters and follow mode, with no import
heavier than the standard library, since the CLI loads this on demand.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from stockade.core.errors import StockadeError
from stockade.profiles.domains import canonical_name
from stockade.proxy.audit_chain import ZERO, last_link, open_regular, seal, torn_tail, unchained_prefix

REDACTED = "REDACTED"
# Query keys whose values are credentials more often than not (compared
# lower-case with "-" read as "_"); suffixes catch client_secret, refresh_token,
# x-amz-signature and friends.
SENSITIVE_KEYS = frozenset({"token", "access_token", "key", "api_key", "apikey", "sig", "signature", "password", "passwd", "secret", "auth", "code"})
SENSITIVE_SUFFIXES = ("_token", "_secret", "_signature", "_password", "_key", "_auth")

ROTATION_WAIT = 30.0  # seconds a writer keeps finding the log rotated under it before it gives up
MAX_LOG_BYTES = int(os.environ.get("STOCKADE_AUDIT_MAX_BYTES", 64 << 20))  # the environment: tests only
KEEP_ROTATED = 2

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


# The most of each field a record keeps, in characters; generous for real traffic, and
# a bound on what one request can add to the log.
FIELD_LIMITS = {
    "host": 300, "sni": 300, "method": 40, "path": 2048, "rule": 600, "error": 600, "hint": 400, "address": 64, "scheme": 16,
    "moved_to": 2048, "operation": 300,
}  # fmt: skip
COMMAND_LIMIT = 2048  # characters of the session's command, all words together
PROCESS_LIMIT = 4096  # bytes of a record's `process`, as written (escapes counted): a process names itself
OPTIONAL = ("mcp", "agent_session", "tool_call", "process")  # fields a line leaves out when they say nothing


def _short_process(process: dict[str, Any]) -> dict[str, Any]:
    """A process within PROCESS_LIMIT whatever its names: each text cut to what fits once escaped."""

    def text(value: object, limit: int) -> str:
        found = str(value or "")
        while len(json.dumps(found, ensure_ascii=True)) > limit:
            found = found[: max(0, min(len(found) - 1, len(found) * 3 // 4))]
        return found

    argv: list[Any] = process["argv"] if isinstance(process.get("argv"), list) else []
    parents: list[Any] = process["parents"] if isinstance(process.get("parents"), list) else []
    return {
        **{key: process[key] for key in ("pid", "host_pid") if isinstance(process.get(key), int)},
        "exe": text(process.get("exe"), 256),
        "argv": [text(word, 128) for word in argv[:8]],
        "parents": [
            {"pid": parent.get("pid"), "exe": text(parent.get("exe"), 128), "argv0": text(parent.get("argv0"), 64)}
            for parent in parents[:8]
            if isinstance(parent, dict)
        ],
    }


def _command_length(command: list[str]) -> int:
    return sum(len(str(word)) for word in command)


def _shortened(command: list[str]) -> list[str]:
    kept: list[str] = []
    left = COMMAND_LIMIT
    for word in command:
        text = str(word)
        if left <= 0:
            break
        kept.append(text[:left])
        left -= len(text)
    return kept


class AuditError(StockadeError):
    """The audit log could not be written or read; traffic that cannot be recorded must stop."""


def now_iso(timestamp: float | None = None) -> str:
    """UTC time with milliseconds, e.g. 2025-01-31T12:00:00.123Z."""
    moment = datetime.fromtimestamp(time.time() if timestamp is None else timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def redact_path(path: str) -> str:
    """The request path with credential-like query values replaced, and no fragment."""
    base, _, query = path.partition("#")[0].partition("?")
    if not query:
        return path.partition("#")[0]
    parts = []
    for item in query.split("&"):
        key, sep, _value = item.partition("=")
        name = unquote_plus(key).strip().lower().replace("-", "_")
        if sep and (name in SENSITIVE_KEYS or name.endswith(SENSITIVE_SUFFIXES)):
            item = f"{key}={REDACTED}"
        parts.append(item)
    return f"{base}?{'&'.join(parts)}"


_SECRET_NAME = re.compile(
    r"(?i)(authorization|bearer|token|secret|passw|api[-_]?key|credential|cookie|private[-_]?key|_key(?=[=:]|$)|\bauth\b|\bpat\b)"
)
_USER_FLAGS = ("-u", "--user", "--proxy-user")  # curl, wget and the like: USER:PASSWORD
_PASSWORD_FLAG = {"sshpass": "-p", "docker": "-p", "podman": "-p", "nerdctl": "-p"}  # where -p is a password, not a port


@functools.lru_cache(maxsize=256)
def redacted_command(words: tuple[str, ...]) -> tuple[str, ...]:
    """A session's command as its records keep it, redacted once (each of its requests asks again)."""
    return tuple(redact_words(list(words)))


def redact_words(words: list[str]) -> list[str]:
    """A command's words as a record keeps them, whatever a run put on its command line: the value of
    an argument whose name says secret (`--token=X`, `--password X`, `Authorization: Bearer X`,
    `AWS_SECRET_ACCESS_KEY=X`), a URL's user and password and its secret query values, and tokens
    that announce themselves (ghp_..., AKIA..., xoxb-..., JWTs) are REDACTED."""
    from stockade.profiles.secretforms import TOKEN_PREFIX, USERINFO

    out: list[str] = []
    hide = after_user = False
    program = os.path.basename(str(words[0])) if words else ""
    for word in words:
        text = str(word)
        if hide and text:
            out.append(REDACTED)
            hide = False
            continue
        if after_user:
            after_user = False
            name, sep, _password = text.partition(":")
            if sep:
                out.append(f"{name}:{REDACTED}")
                continue
        if text in _USER_FLAGS:
            after_user = True
        if text == _PASSWORD_FLAG.get(program) or (program.startswith(("mysql", "mariadb")) and text.startswith("-p") and len(text) > 2):
            out.append(REDACTED if len(text) > 2 else text)
            hide = len(text) == 2
            continue
        shown = USERINFO.sub(lambda match: match.group(0).split("://", 1)[0] + "://" + REDACTED + "@", text)
        if any(space in shown for space in " \t\n"):  # a script (`sh -c '...'`): its secrets where they stand
            out.append(TOKEN_PREFIX.sub(REDACTED, _redact_script(shown)))
            continue
        if "://" in shown and "?" in shown:
            shown = redact_path(shown)
        shown = TOKEN_PREFIX.sub(REDACTED, shown)
        if _SECRET_NAME.search(shown):
            for separator in ("=", ":"):
                name, sep, value = shown.partition(separator)
                if sep and value.strip() and "://" not in name + sep + value[:2]:
                    shown = f"{name}{sep}{' ' if value.startswith(' ') else ''}{REDACTED}"
                    break
            else:
                hide = shown.startswith("-")  # `--password VALUE`: the value is the next word
        out.append(shown)
    return out


_SCRIPT_SECRETS = (
    (re.compile(r"(?i)((?:proxy-)?authorization\s*:\s*)(?:(?:bearer|basic|token)\s+)?[^\s'\"]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)(\b[\w.-]*(?:token|secret|passw|api[-_]?key|credential|cookie)[\w.-]*=)[^\s'\"&;]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)(\s--?[\w-]*(?:token|secret|passw|api[-_]?key)[\w-]*\s+)(?!-)[^\s'\"]+"), r"\1" + REDACTED),
)


def _redact_script(text: str) -> str:
    for pattern, replacement in _SCRIPT_SECRETS:
        text = pattern.sub(replacement, text)
    return text


@dataclass
class AuditRecord:
    """One decision; `bytes_*` and `duration_ms` are final when the flow ends."""

    session: str
    command: list[str]
    # "http", "tls" (CONNECT tunnel carrying TLS), "tcp", "ssh" (raw TCP opening like SSH), "connect" (nothing seen yet);
    # "dns" (the sandbox's resolver), "udp" and "icmp" (packets refused in the sandbox's namespace: daemon/packet_log.py)
    scheme: str
    host: str
    port: int
    decision: str  # "allow" | "deny"
    rule: str
    time: str = field(default_factory=now_iso)
    method: str | None = None
    path: str | None = None
    sni: str | None = None
    bytes_up: int = 0
    bytes_down: int = 0
    duration_ms: int = 0
    error: str | None = None
    address: str | None = None  # the IP the proxy connected to, when it did
    hint: str | None = None  # for denials: the line to add under [network]
    # An allowed flow has two records with the same `flow` id: "start", written before its
    # first byte goes upstream, and "end" with bytes and duration. A denial is one "end".
    phase: str = "end"
    flow: str | None = None
    # A denial line can stand for more: the same session denied the same destination for the
    # same reason `repeats` more times, up to `last_time` (written when the session ends).
    repeats: int = 0
    last_time: str | None = None
    mcp: str | None = None  # the agent's MCP server the run was (`stockade run --mcp NAME`); left out of the line when None
    agent_session: str | None = None  # the agent session whose hook started the run; left out when None
    tool_call: str | None = None  # the agent's tool call that was the run (its id in the agent's transcript); left out when None
    process: dict[str, object] | None = None  # the process inside that made the connection, where the kernel told (daemon/attribution.py)

    def who(self) -> dict[str, Any]:
        """The fields that say whose record this is (SessionSpec.who), to make another like it."""
        return {"session": self.session, "command": self.command, "mcp": self.mcp, "agent_session": self.agent_session, "tool_call": self.tool_call}

    def to_line(self) -> bytes:
        """One line of JSON, ASCII only, ending in exactly one newline, its fields cut to FIELD_LIMITS
        (a `truncated` list names the ones that were): a sandbox chooses its paths and host names,
        and must not grow the log by what it sends."""
        return _line(vars(self), self.command)  # not asdict: no deep copy


KINDS = ("file", "limit", "moved", "container")


@dataclass
class FindingRecord:
    """What a run found off the network: a file access the sandbox refused (`--trace`), a limit
    reached, a file written at a protected path and moved aside (once the command ended), a call on
    the container engine's API (as it is judged: containers/gate.py, `path` the image). A network
    record has no `kind`; readers that total traffic skip records that have one."""

    session: str
    command: list[str]
    kind: str  # one of KINDS
    rule: str  # why, in a phrase: the wall that refused, the limit and its value, what the moved path could do
    decision: str = "deny"  # a moved file was written, but never takes effect where it was written
    time: str = field(default_factory=now_iso)
    path: str | None = None  # the file (a host path; for "file", as the sandbox named it)
    moved_to: str | None = None  # "moved": where the file now is
    operation: str | None = None  # "file": read, write, exec...; "container": the Engine API call, "POST /containers/create"
    limit: str | None = None  # "limit": memory, pids, file_size or wall_time
    error: str | None = None
    mcp: str | None = None
    agent_session: str | None = None
    tool_call: str | None = None
    process: dict[str, object] | None = None  # where the kernel told which process it was
    repeats: int | None = None  # a record that stands for this many more of its kind, not written one by one

    def to_line(self) -> bytes:
        data = {name: value for name, value in vars(self).items() if value is not None or name not in FINDING_OPTIONAL}
        return _line(data, self.command)


FINDING_OPTIONAL = (*OPTIONAL, "path", "moved_to", "operation", "limit", "error", "repeats")


def _line(data: dict[str, Any], command: list[str]) -> bytes:
    if any(data.get(name) is None for name in OPTIONAL):
        data = {name: value for name, value in data.items() if name not in OPTIONAL or value is not None}
    cut = [name for name, limit in FIELD_LIMITS.items() if isinstance(data.get(name), str) and len(data[name]) > limit]
    if cut or _command_length(command) > COMMAND_LIMIT:
        data = {**data, **{name: data[name][: FIELD_LIMITS[name]] for name in cut}}
        if _command_length(command) > COMMAND_LIMIT:
            data["command"] = _shortened(command)
            cut.append("command")
        data["truncated"] = cut
    process = data.get("process")
    if isinstance(process, dict) and len(json.dumps(process, ensure_ascii=True, default=str)) > PROCESS_LIMIT:
        data = {**data, "process": _short_process(process), "truncated": [*data.get("truncated", ()), "process"]}
    line = json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str)
    if "\n" in line or "\r" in line:  # cannot happen with json.dumps; a record is never split
        raise AuditError("audit record would span lines")
    return line.encode("ascii") + b"\n"


class AuditWriter:
    """Appends records to one file; reopens it if it was moved or deleted."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.broken: str | None = None  # set after a failed write: nothing more goes through
        self._fd = -1
        self._ino: tuple[int, int] | None = None
        self._size = 0
        self._link, self._link_at = ZERO, -1  # the last line this writer sealed, and where the file then ended
        self.head = ZERO  # the chain's head after this writer's last line (audit_chain.py)
        self.tee: Callable[[bytes], None] | None = None  # also given each line once it is in the file (proxy/daemon/otlp.py)
        self._open()

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                os.close(fd)
                raise OSError(f"{self.path} is not a regular file")
        except OSError as exc:
            self.broken = f"cannot open audit log {self.path}: {exc}"
            raise AuditError(self.broken) from exc
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._ino = fd, (info.st_dev, info.st_ino)
        self._size = info.st_size
        self._link_at = -1  # another file: its own last line is read before the next is sealed

    def _moved(self) -> bool:
        """Whether the path names another file than the one this writer holds (rotated, or removed)."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return True
        return self._fd < 0 or (info.st_dev, info.st_ino) != self._ino

    def write(self, record: AuditRecord | FindingRecord) -> None:
        """Append one record; AuditError if it did not reach the file in full."""
        self.write_line(record.to_line())

    def write_event(self, event: dict[str, object]) -> None:
        """A line that is no record (readers skip lines with an "event"), chained like one."""
        self.write_line(json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n")

    def write_line(self, data: bytes) -> None:
        """Append one line under the file's lock, rotating first when it would grow past MAX_LOG_BYTES.

        Every check is made holding the lock of the file the path names: a writer that rotated the
        log meanwhile (another daemon sharing it) has already moved it, and this one opens the new
        file; a writer never appends to a generation after its successor's first line named its head."""
        if self.broken:
            raise AuditError(self.broken)
        try:
            # Each round lost means another writer rotated, which is progress; only a log rotated
            # without end (a loop renaming it) runs out the clock.
            deadline = time.monotonic() + ROTATION_WAIT
            while time.monotonic() < deadline:
                if self._fd < 0 or self._moved():
                    self._open()
                fd = self._fd
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    if self._moved():
                        continue  # rotated while we waited for the lock: the new file, next time round
                    size = os.fstat(fd).st_size
                    if size + len(data) > MAX_LOG_BYTES and size > 0:
                        self._rotate(size)  # leaves self._fd the new file; the old one's lock goes with it below
                        fcntl.flock(self._fd, fcntl.LOCK_EX)
                        try:
                            self._write(data)
                        finally:
                            fcntl.flock(self._fd, fcntl.LOCK_UN)
                        return
                    self._write(data)
                    return
                finally:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                    except OSError:
                        pass
                    if fd != self._fd:
                        os.close(fd)
            raise OSError("the log kept being rotated under this writer")
        except (OSError, AuditError) as exc:
            self.broken = f"cannot write audit log {self.path}: {exc}"
            raise AuditError(self.broken) from exc

    def _write(self, data: bytes) -> None:
        """One line, sealed (audit_chain.py), whole or not at all, with the lock of self._fd held: a
        write cut short (a full disk) is cut back to the last whole line, so every reader of JSON lines
        can go on. A torn tail another writer left is ended first, and said (a `torn` line); lines of
        an older stockade before the chain's first are counted in a `chain-start` line."""
        start = os.fstat(self._fd).st_size  # O_APPEND: where this line begins
        lines = b""
        if self._link_at == start:
            previous = self._link
        else:
            previous, chained = last_link(self._fd, start)
            torn = torn_tail(self._fd, start)
            lead = b"\n" if torn else b""
            if start and not chained:
                lines, previous = self._sealed_event(lead, {"event": "chain-start", **unchained_prefix(self._fd, start, torn)}, previous)
            elif torn:
                lines, previous = self._sealed_event(lead, {"event": "torn", "bytes": torn}, previous)
        sealed, link = seal(data, previous)
        lines += sealed
        view = memoryview(lines)
        try:
            while view:
                written = os.write(self._fd, view)
                if written <= 0:
                    raise OSError("short write")
                view = view[written:]
        except OSError:
            if len(view) < len(lines):
                try:
                    os.ftruncate(self._fd, start)
                except OSError:
                    pass  # the next line ends the torn one and says so (torn_tail)
            raise
        self._size = start + len(lines)
        self._link, self._link_at = link, start + len(lines)
        self.head = link
        if self.tee is not None:
            for line in lines.splitlines(keepends=True):
                if line.strip():
                    self.tee(line)  # never raises (otlp.Export.send): the line is written whatever becomes of its copy

    @staticmethod
    def _sealed_event(lead: bytes, event: dict[str, object], previous: str) -> tuple[bytes, str]:
        line, link = seal(json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n", previous)
        return lead + line, link

    def _rotate(self, size: int) -> None:
        """Shift the generations up one, dropping the oldest, and put a new file at the path whose first
        line says so: which file was dropped, and the head of the one it follows. The caller holds the
        current file's lock throughout, so no writer appends to it once the note names its head.

        The new file is written aside and renamed over the path, and the current one is linked to
        `.1` before that: the path never goes missing, so no other writer creates a file there (and
        appends to it) before the note is in."""
        dropped = None
        oldest = rotated_path(self.path, KEEP_ROTATED)
        try:
            info = os.lstat(oldest)
            if info.st_size or not stat.S_ISREG(info.st_mode):  # an empty one (made to be hidden) held nothing
                dropped = {"file": oldest.name, "bytes": info.st_size, "last_record": _last_time(oldest)}
        except FileNotFoundError:
            pass
        head, _chained = last_link(self._fd, size)
        note = {"event": "rotated", "time": now_iso(), "previous": rotated_path(self.path, 1).name, "dropped": dropped, "previous_head": head}
        aside = self.path.with_name(f".{self.path.name}.rotating-{os.getpid()}-{os.urandom(4).hex()}")
        old = self._fd
        self._fd = os.open(aside, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            self._link_at = -1
            self._write(json.dumps(note, ensure_ascii=True).encode() + b"\n")
            # locked before it is at the path: no other writer appends to it (or rotates it) before the caller's line
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            for generation in range(KEEP_ROTATED, 1, -1):
                try:
                    os.replace(rotated_path(self.path, generation - 1), rotated_path(self.path, generation))
                except FileNotFoundError:
                    pass
            self._retire(rotated_path(self.path, 1))
            os.replace(aside, self.path)
        except BaseException:
            os.close(self._fd)
            self._fd = old  # the caller still holds its lock, and closes it
            self._link_at = -1
            try:
                os.unlink(aside)
            except OSError:
                pass
            raise
        info = os.fstat(self._fd)
        self._ino, self._size = (info.st_dev, info.st_ino), info.st_size
        self._remove_stray_asides()

    def _remove_stray_asides(self) -> None:
        """New generations a writer killed mid-rotation left aside (its process is gone)."""
        prefix = f".{self.path.name}.rotating-"
        try:
            names = [name for name in os.listdir(self.path.parent) if name.startswith(prefix)]
        except OSError:
            return
        for name in names:
            pid = name[len(prefix) :].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                try:
                    os.unlink(self.path.parent / name)
                except OSError:
                    pass

    def _retire(self, first: Path) -> None:
        """Make the current file the first rotated generation while the path still names it."""
        try:
            os.link(self.path, first, follow_symlinks=False)
        except FileExistsError:
            os.replace(self.path, first)  # a stray file there (not ours to keep): replaced, as rotation would
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            os.replace(self.path, first)  # a filesystem without hard links: the path is missing for a moment

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


@dataclass(frozen=True)
class AuditFilter:
    """What `stockade audit` asked to see."""

    session: str | None = None
    denied_only: bool = False
    host: str | None = None  # a name, "*.suffix" or an address
    since: datetime | None = None
    mcp: str | None = None  # only this MCP server's runs
    tool_call: str | None = None  # only the run of this agent tool call
    agent_session: str | None = None  # only the runs of this agent session
    pid: int | None = None  # only what this process inside made (its pid in the sandbox)

    def matches(self, record: dict[str, object]) -> bool:
        if self.mcp is not None and record.get("mcp") != self.mcp:
            return False
        if self.tool_call is not None and record.get("tool_call") != self.tool_call:
            return False
        if self.agent_session is not None and record.get("agent_session") != self.agent_session:
            return False
        if self.pid is not None and not _made_by(record, self.pid):
            return False
        if self.session is not None and not str(record.get("session", "")).startswith(self.session):
            return False  # a unique start of the id, as the table shows it (cli/audit_cmd.py)
        if self.denied_only and record.get("decision") != "deny":
            return False
        if self.host is not None and not _host_matches(self.host, str(record.get("host", ""))):
            return False
        if self.since is not None:
            try:
                stamp = datetime.fromisoformat(str(record.get("time", "")))
            except ValueError:
                return False
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            if stamp < self.since:
                return False
        return True


def read_records(path: str | os.PathLike[str], where: AuditFilter = AuditFilter()) -> Iterator[dict[str, object]]:
    """Final records in file order that pass `where`, then each allowed flow that has a start but
    no end (the daemon stopped under it), marked `"incomplete": true`. Lines that are not records
    (a torn line) are skipped."""
    open_flows: dict[object, dict[str, object]] = {}
    for generation in range(KEEP_ROTATED, -1, -1):  # the oldest rotated file first
        try:
            handle = open_regular(rotated_path(Path(path), generation))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise AuditError(f"cannot read audit log {path}: {exc}") from exc
        with handle:
            for line in handle:
                record = _parse(line)
                if record is None or "event" in record:  # torn, or a rotation note
                    continue
                if record.get("phase") == "start":
                    open_flows[record.get("flow")] = record
                    continue
                if record.get("flow"):
                    open_flows.pop(record.get("flow"), None)
                if where.matches(record):
                    yield record
    for record in open_flows.values():
        if where.matches(record):
            yield {**record, "incomplete": True}


def follow_records(
    path: str | os.PathLike[str],
    where: AuditFilter = AuditFilter(),
    *,
    poll: float = 0.25,
    stop: Callable[[], bool] = lambda: False,
    from_start: bool = True,
) -> Iterator[dict[str, object]]:
    """Like `tail -F`: yield matching records as they are appended, across rotation, until `stop()`."""
    handle = None
    identity: tuple[int, int] | None = None
    pending = b""
    while True:
        if handle is None:
            try:
                handle = open(path, "rb")
                info = os.fstat(handle.fileno())
                identity = (info.st_dev, info.st_ino)
                if not from_start:
                    handle.seek(0, os.SEEK_END)
                pending = b""
            except FileNotFoundError:
                handle = None
        if handle is not None:
            chunk = handle.read()
            if chunk:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    record = _parse(line)
                    if record is not None and "event" not in record and record.get("phase") != "start" and where.matches(record):
                        yield record
                continue
            try:
                info = os.stat(path)
                if (info.st_dev, info.st_ino) != identity or info.st_size < handle.tell():
                    handle.close()  # rotated or truncated: start over on the new file
                    handle, from_start = None, True
                    continue
            except FileNotFoundError:
                pass
        if stop():
            if handle is not None:
                handle.close()
            return
        time.sleep(poll)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`30s`, `10m`, `2h`, `1d`, `1w` ago, or an ISO date/time (UTC unless it says otherwise)."""
    now = now or datetime.now(UTC)
    value = text.strip()
    match = _DURATION.fullmatch(value)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise AuditError(f"--since {text!r}: use a duration like 10m, 2h, 1d or a date like 2025-01-31T12:00") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def dropped_by_rotation(path: str | os.PathLike[str]) -> list[dict[str, object]]:
    """What rotation deleted to make room, as the rotation notes at the top of each generation say
    (oldest first): each a dict with file, bytes and last_record."""
    dropped: list[dict[str, object]] = []
    for generation in range(KEEP_ROTATED, -1, -1):
        try:
            with open_regular(rotated_path(Path(path), generation)) as handle:
                note = _parse(handle.readline())
        except OSError:
            continue
        what = note.get("dropped") if note is not None and note.get("event") == "rotated" else None
        if isinstance(what, dict):
            dropped.append(what)
    return dropped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: not ours to judge
    return True


def rotated_path(path: Path, generation: int) -> Path:
    """`audit.jsonl` for generation 0, `audit.jsonl.N` for the Nth older one."""
    return path if generation == 0 else path.with_name(f"{path.name}.{generation}")


def generations(log: str | None) -> list[str]:
    """A log and every rotated file of it that is kept: all read as records, so all stockade's own."""
    if not log:
        return []
    return [str(rotated_path(Path(log), generation)) for generation in range(KEEP_ROTATED + 1)]


def _last_time(path: Path) -> str | None:
    """The time of the last whole record in a log (read from its tail only)."""
    try:
        with open_regular(path) as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 65536))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        record = _parse(line)
        if record is not None and isinstance(record.get("time"), str):
            return str(record["time"])
    return None


def _parse(line: bytes) -> dict[str, object] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _made_by(record: dict[str, object], pid: int) -> bool:
    """Whether the process inside with this pid made the record's connection, or started the one that did."""
    process = record.get("process")
    if not isinstance(process, dict):
        return False
    chain = process.get("parents")
    return process.get("pid") == pid or (isinstance(chain, list) and any(isinstance(p, dict) and p.get("pid") == pid for p in chain))


def _host_matches(pattern: str, host: str) -> bool:
    wanted = pattern.strip()
    if wanted.startswith("*."):
        return host.endswith("." + _canonical(wanted[2:]))
    return host == _canonical(wanted)


def _canonical(name: str) -> str:
    try:
        return canonical_name(name)
    except ValueError:  # an address or an odd name: compare as typed
        return name.strip().lower().rstrip(".")
