"""Bookkeeping for one audited flow or tunnel: its record in progress and its fate.

Every decision ends in exactly one final audit line: a denial is written at
once, an allowed flow when it ends (with bytes and duration), after a start
line written before its first byte went upstream. `Tracked` makes
"exactly one" hold however many hooks see the flow, and carries the cut
switch that the tunnel meter obeys.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field

from stockade.proxy.audit import AuditError, AuditRecord
from stockade.proxy.filter.sessions import Session
from stockade.proxy.rules.decide import Decision

logger = logging.getLogger(__name__)


@dataclass
class Tracked:
    session: Session
    record: AuditRecord
    started: float = field(default_factory=time.monotonic)
    written: bool = False
    cut: str | None = None  # set: the connection must be closed now (the meter closes it)

    @property
    def must_close(self) -> str | None:
        """Why the traffic must stop now: a denial, an ended session or a broken audit log."""
        return self.cut or self.session.stopped

    def opened(self) -> bool:
        """Write the start record of an allowed flow, before its first byte goes upstream; False if it
        could not be written (the flow must then be refused: it would pass unrecorded)."""
        self.record.flow = self.record.flow or os.urandom(6).hex()
        start = dataclasses.replace(self.record, phase="start", bytes_up=0, bytes_down=0, duration_ms=0)
        try:
            self.session.writer.write(start)
        except AuditError as exc:
            logger.error("%s; refusing all traffic of the sessions that log there", exc)
            self.cut = str(exc)
            return False
        self.session.open_flows[id(self)] = self  # the session's end writes its end if nothing else has
        return True

    def deny(self, decision: Decision) -> bool:
        """Record a denial (once) and cut the traffic; False if the record could not be written."""
        self.cut = decision.rule
        if self.written:
            return True
        self.record.decision = "deny"
        self.record.rule = decision.rule
        self.record.hint = decision.hint or None
        self.session.note_denial(self.record.host, self.record.port, decision)
        if not self.session.own_line(self.record):
            self.written = True  # counted into the line the session writes when it ends
            return True
        return self._write()

    def finish(self, *, bytes_up: int | None = None, bytes_down: int | None = None, error: str | None = None) -> bool:
        """Write the final record of an allowed flow (once); False if it could not be written."""
        if self.written:
            return True
        if bytes_up is not None:
            self.record.bytes_up = bytes_up
        if bytes_down is not None:
            self.record.bytes_down = bytes_down
        if error:
            self.record.error = error
        return self._write()

    def _write(self) -> bool:
        self.written = True
        self.session.open_flows.pop(id(self), None)
        self.record.duration_ms = int((time.monotonic() - self.started) * 1000)
        try:
            self.session.writer.write(self.record)
        except AuditError as exc:
            # Like mitmproxy's Save: traffic must not pass unrecorded. The writer is
            # now broken, so `stopped` refuses this session's every next byte.
            logger.error("%s; refusing all traffic of the sessions that log there", exc)
            self.cut = str(exc)
            return False
        return True
