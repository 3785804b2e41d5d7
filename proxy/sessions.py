"""The daemon's registry of sessions: who may use the proxy, under which rules.

A session is found by its token (the Basic-auth password on the daemon's
loopback port, macOS; on Linux its door says whose a connection is);
the registry keeps only a SHA-256 of each token, so a lookup does not
compare secrets byte by byte and a memory dump shows no usable credential.
Sessions sharing an audit file share one writer, so their records are
appended by one file descriptor in order.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stockade.proxy.audit import AuditWriter
from stockade.proxy.control import SessionSpec
from stockade.proxy.decide import Decision, SessionRules


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


@dataclass
class Session:
    spec: SessionSpec
    rules: SessionRules
    writer: AuditWriter
    denials: dict[tuple[str, int], Denial] = field(default_factory=dict)
    ended: bool = False

    @property
    def stopped(self) -> str | None:
        """Why this session may not move another byte, or None while it may."""
        if self.ended:
            return "session ended"
        if self.writer.broken:
            return f"audit log unwritable: {self.writer.broken}"
        return None

    def note_denial(self, host: str, port: int, decision: Decision) -> None:
        key = (host, port)
        if key in self.denials:
            self.denials[key].count += 1
        else:
            self.denials[key] = Denial(host, port, decision.rule, decision.hint)

    def denial_summary(self) -> list[dict[str, Any]]:
        return [d.to_dict(self.spec.origin) for d in self.denials.values()]


class Registry:
    """Token -> session, and session id -> session."""

    def __init__(self, open_writer: Callable[[str], AuditWriter] = AuditWriter) -> None:
        self._open_writer = open_writer
        self._by_digest: dict[bytes, Session] = {}
        self._by_id: dict[str, Session] = {}
        self._writers: dict[str, AuditWriter] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def register(self, spec: SessionSpec) -> tuple[str, Session]:
        """Add a session and return its new token; ValueError for bad rules, AuditError for a bad log."""
        if spec.session_id in self._by_id:
            raise ValueError(f"session {spec.session_id!r} is already registered")
        rules = SessionRules.parse(spec.allow, spec.deny, spec.mode)
        writer = self._writers.get(spec.audit_path)
        if writer is None or writer.broken:
            writer = self._open_writer(spec.audit_path)
            self._writers[spec.audit_path] = writer
        token = secrets.token_urlsafe(32)
        session = Session(spec, rules, writer)
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
        self._by_digest = {d: s for d, s in self._by_digest.items() if s is not session}
        if not any(s.writer is session.writer for s in self._by_id.values()):
            # Not closed here: tunnels cut by the end still write their final record.
            # The file closes when the last of them lets go of the writer.
            self._writers.pop(session.spec.audit_path, None)
        return session


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
