"""The daemon's registry of sessions: who may use the proxy, under which rules.

A session is found by its token (the Basic-auth password on the daemon's
loopback port, macOS; on Linux its door says whose a connection is);
the registry keeps only a SHA-256 of each token, so a lookup does not
compare secrets byte by byte and a memory dump shows no usable credential.
Sessions sharing an audit file share one writer, so their records are
appended by one file descriptor in order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stockade.proxy.audit import AuditError, AuditRecord, AuditWriter, now_iso
from stockade.proxy.control import SessionSpec
from stockade.proxy.rules.budget import Pace
from stockade.proxy.rules.decide import Decision, SessionRules
from stockade.proxy.rules.fake_names import Names


@dataclass
class Denial:
    """One denied destination of a session, for the summary after the run."""

    host: str
    port: int
    rule: str
    hint: str
    count: int = 1

    def to_dict(self, origin: str) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "rule": self.rule, "hint": self.hint, "count": self.count, "origin": origin}


# A session's denials each get a line of their own up to MAX_DENIAL_LINES; after that they are
# counted, one line per destination and reason (for up to MAX_COUNTED of them, then one line for
# the rest) written when the session ends. A sandbox that floods denied requests (the same host
# again and again, or a new name each time) grows the log by a bounded amount: about
# MAX_DENIAL_LINES records of at most a few KiB (audit.FIELD_LIMITS). The run's summary keeps
# MAX_COUNTED destinations.
MAX_DENIAL_LINES = 1000
MAX_COUNTED = 256

# Fairness: every session shares the daemon's one event loop, so a sandbox pipelining denied
# requests as fast as it can (~2,400/s) made every other session's requests 20x slower. Past a
# burst, a session's denials are answered at DENIAL_RATE a second: each waits for its slot
# (GCRA, one "theoretical arrival time" per session, whatever the number of connections).
DENIAL_RATE = 50.0
DENIAL_BURST = 200


@dataclass
class Repeats:
    """Denials of one destination for one reason past the session's budget, written as one line at the end."""

    record: AuditRecord  # the first of them, as it would have been written
    count: int = 1
    last: str = ""


@dataclass
class Session:
    spec: SessionSpec
    rules: SessionRules
    writer: AuditWriter
    denials: dict[tuple[str, int, str, str], Denial] = field(default_factory=dict)  # (host, port, hint, HTTP rule)
    ended: bool = False
    denial_lines: int = 0  # denials written as lines of their own
    repeats: dict[tuple[str, int, str], Repeats] = field(default_factory=dict)
    denial_pace: Pace = field(default_factory=lambda: Pace(DENIAL_RATE, DENIAL_BURST))
    approved: set[str] = field(default_factory=set)  # allow entries the user approved for this run (proxy/filter/approvals.py)
    declined: set[str] = field(default_factory=set)  # ... and those the user refused: not asked again
    always: list[dict[str, str]] = field(default_factory=list)  # answered "always": the run writes them when it ends
    asked: int = 0  # questions put to the user (approvals.ASKED_MAX bounds them, so answering does not become a habit)
    open_flows: dict[int, Any] = field(default_factory=dict)  # allowed flows with a start record and no end yet (tracking.Tracked)
    names: Names = field(default_factory=Names)  # the addresses the sandbox's resolver gave out (inside_dns.py)
    refused_names: int = 0  # distinct names the sandbox's resolver refused (daemon/inside_dns.py)
    export: Any = None  # the collector its records also go to (proxy/daemon/otlp.Export), and its counts when the session began
    export_mark: tuple[int, int] = (0, 0)

    def export_trouble(self) -> str:
        """What of the session's records did not reach the collector, as a line, or ""."""
        return self.export.trouble(self.export_mark) if self.export is not None else ""

    @property
    def stopped(self) -> str | None:
        """Why this session may not move another byte, or None while it may."""
        if self.ended:
            return ENDED_WITH_RUN
        if self.writer.broken:
            return f"audit log unwritable: {self.writer.broken}"
        return None

    def note_denial(self, host: str, port: int, decision: Decision) -> None:
        # Each kind of request refused by a host's HTTP rules gets a line of its own.
        told_apart = decision.rule.startswith(("http ", "refused: ", "no HTTP", "credential ", "git push "))
        key = (host, port, decision.hint, decision.rule if told_apart else "")
        if key in self.denials:
            self.denials[key].count += 1
        elif len(self.denials) < MAX_COUNTED:
            self.denials[key] = Denial(host, port, decision.rule, decision.hint)

    def own_line(self, record: AuditRecord) -> bool:
        """Whether a denial gets a line of its own now; if not, it is counted for a line at the end."""
        if self.denial_lines < MAX_DENIAL_LINES:
            self.denial_lines += 1
            return True
        key = (record.host, record.port, record.rule)
        if key not in self.repeats and len(self.repeats) >= MAX_COUNTED:
            key = ("*", 0, OVER_BUDGET)
        counted = self.repeats.get(key)
        if counted is None:
            first = record
            if key[2] == OVER_BUDGET:
                first = dataclasses.replace(record, host="*", port=0, rule=OVER_BUDGET, path=None, method=None, hint=None, sni=None)
            self.repeats[key] = Repeats(first, 1, record.time)
        else:
            counted.count += 1
            counted.last = record.time
        return False

    def repeat_records(self) -> list[AuditRecord]:
        """One line per destination counted past the budget: the first such denial, `repeats`
        saying how many it stands for, and when the last was."""
        return [dataclasses.replace(r.record, repeats=r.count, last_time=r.last) for r in self.repeats.values()]

    def denial_summary(self) -> list[dict[str, Any]]:
        return [d.to_dict(self.spec.origin) for d in self.denials.values()]


OVER_BUDGET = f"more denied destinations than the {MAX_COUNTED} counted one by one"


class Registry:
    """Token -> session, and session id -> session."""

    def __init__(self, open_writer: Callable[[str], AuditWriter] = AuditWriter, exports: Any = None) -> None:
        self._open_writer = open_writer
        self._exports = exports  # proxy/daemon/otlp.Exports, the daemon's: a collector per settings
        self._by_digest: dict[bytes, Session] = {}
        self._by_id: dict[str, Session] = {}
        self._writers: dict[tuple[str, object], AuditWriter] = {}  # by (log, collector): two writers of one log keep one chain

    def __len__(self) -> int:
        return len(self._by_id)

    def register(self, spec: SessionSpec) -> tuple[str, Session]:
        """Add a session and return its new token; ValueError for bad rules, AuditError for a bad log."""
        if spec.session_id in self._by_id:
            raise ValueError(f"session {spec.session_id!r} is already registered")
        rules = SessionRules.parse(spec.allow, spec.deny, spec.mode, spec.http)
        if spec.credentials:
            from stockade.proxy.filter.placeholders import secrets_of

            rules = dataclasses.replace(rules, secrets=secrets_of(spec.credentials))
        key = (spec.audit_path, spec.export)
        writer = self._writers.get(key)
        export = None
        if spec.export is not None and self._exports is not None:
            export = self._exports.get(spec.export)
        if writer is None or writer.broken:
            writer = self._open_writer(spec.audit_path)
            writer.tee = export.send if export is not None else None
            self._writers[key] = writer
        token = secrets.token_urlsafe(32)
        session = Session(spec, rules, writer, export=export, export_mark=export.counts() if export is not None else (0, 0))
        self._by_digest[_digest(token)] = session
        self._by_id[spec.session_id] = session
        return token, session

    def lookup(self, token: str) -> Session | None:
        return self._by_digest.get(_digest(token))

    def get(self, session_id: str) -> Session | None:
        return self._by_id.get(session_id)

    def end(self, session_id: str) -> Session | None:
        """Remove a session; its live connections see `stopped` and are cut."""
        session = self._by_id.pop(session_id, None)
        if session is None:
            return None
        session.ended = True
        for flow in list(session.open_flows.values()):
            flow.finish(error=ENDED_WITH_RUN)  # its end now, not whenever the cut connection notices
        try:
            for record in session.repeat_records():
                session.writer.write(record)
            # The chain's head as the session ends (proxy/audit_chain.py), a line no reader takes for a record.
            session.writer.write_event({"event": "session-end", "time": now_iso(), "session": session_id, "head": session.writer.head})
        except AuditError:
            pass  # the writer is broken; the run's end says the audit failed
        self._by_digest = {d: s for d, s in self._by_digest.items() if s is not session}
        if not any(s.writer is session.writer for s in self._by_id.values()):
            # Not closed here: tunnels cut by the end still write their final record.
            # The file closes when the last of them lets go of the writer.
            self._writers.pop((session.spec.audit_path, session.spec.export), None)
        return session

    def close_exports(self) -> None:
        """Send what waits for each collector, briefly (the daemon is stopping)."""
        if self._exports is not None:
            self._exports.close()


ENDED_WITH_RUN = "ended with the run"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
