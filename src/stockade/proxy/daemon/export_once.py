"""Sends a run's own audit lines to the collector, in a process the run does not wait for.

The daemon exports the network records it writes (otlp.py); the lines a run
writes itself after its command ended (bwrap/after/findings_log.py) come here
on stdin, as one JSON object: the log they are in, the export settings the run
read from the user's environment, and the lines. This process sends them with
the same exporter and its bounds, waits at most its timeout, and where any did
not reach the collector appends an `export-failed` line to that log, so the
record of truth says what the collector lacks.
"""

from __future__ import annotations

import json
import sys

from stockade.proxy.daemon.otlp import Export
from stockade.proxy.export_settings import ExportSettings

MAX_INPUT = 8 << 20  # bytes read from stdin: a run's findings are a few records


def main() -> int:
    try:
        message = json.loads(sys.stdin.buffer.read(MAX_INPUT))
        settings = ExportSettings.from_dict(message["settings"])
        log = str(message["log"])
        lines = [str(line).encode("ascii") for line in message["lines"]]
    except (ValueError, KeyError, TypeError, UnicodeError):
        return 2  # not from a run of ours: nothing to send, nowhere to say so
    export = Export(settings)
    for line in lines:
        export.send(line)
    export.close(timeout=settings.timeout + 1)
    failed, dropped = export.counts()
    lost = failed + dropped + export.waiting
    if lost:
        _note(log, lost, export.last_error or "the collector did not take them", settings.endpoint, lines)
    return 1 if lost else 0


def _note(log: str, lost: int, why: str, endpoint: str, lines: list[bytes]) -> None:
    from stockade.proxy.audit import AuditError, AuditWriter

    sessions = sorted({str(session) for session in (json.loads(line).get("session") for line in lines) if session})
    try:
        writer = AuditWriter(log)
        try:
            writer.write_event({"event": "export-failed", "sessions": sessions, "records": lost, "collector": endpoint, "why": why[:600]})
        finally:
            writer.close()
    except AuditError:
        pass  # the log itself failed: the run said so when it wrote the lines


if __name__ == "__main__":
    sys.exit(main())
