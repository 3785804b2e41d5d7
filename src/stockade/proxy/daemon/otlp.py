"""Each audit line also sent to an OpenTelemetry collector, as a log record over OTLP/HTTP.

The local JSON-lines log stays the record of truth: a line reaches the
exporter only after it is in the file, and nothing here can fail or slow the
write (the daemon's loop hands the line over and goes on). The OpenTelemetry
SDK batches and sends from a thread of its own (BatchLogRecordProcessor with
the OTLP/HTTP exporter, which retries with backoff within its timeout); at
most QUEUE records wait, and past that newer ones are counted as dropped, so a
collector that is down costs bounded memory. What did not reach the collector
is counted and named at the end of each run that had some (`trouble`).

Attribute names are stable (README "Sending the audit to OpenTelemetry"):
OpenTelemetry's semantic conventions where one fits (`server.address`,
`server.port`, `http.request.method`, `url.path`, `network.peer.address`,
`tls.server.name`), `stockade.*` for the rest, and `ocsf.*` for the OCSF
class the record maps to (Network Activity 4001, HTTP Activity 4002, DNS
Activity 4003; a run's file findings File System Activity 1001, its limits
Process Activity 1007) with its disposition (1 allowed, 2 blocked).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from stockade.proxy.export_settings import ExportSettings

QUEUE = 2048  # records waiting to be sent, at most
BATCH = 256
DELAY_MS = 1000
SCOPE = "stockade.audit"

# OCSF classes and the activity within each: Network Activity "Open" (1) and "Refuse" (5), HTTP
# Activity by method, DNS Activity "Query" (1); Session end is a Network Activity "Close" (2).
OCSF_NETWORK, OCSF_HTTP, OCSF_DNS = 4001, 4002, 4003
OCSF_FILE, OCSF_PROCESS, OCSF_API = 1001, 1007, 6003
# File System Activity by what the refused call tried (bwrap/after/denials.py's operations); a file
# moved aside is a "Rename" (5). Process Activity: a limit that killed is "Terminate" (2), pids "Launch" (1).
FILE_ACTIVITIES = {"create": 1, "read": 2, "write": 3, "remove": 4, "rename": 5, "change": 6, "check": 8}
LIMIT_ACTIVITIES = {"pids": 1, "memory": 2, "file_size": 2, "wall_time": 2}
HTTP_ACTIVITIES = {"CONNECT": 1, "DELETE": 2, "GET": 3, "HEAD": 4, "OPTIONS": 5, "POST": 6, "PUT": 7, "TRACE": 8, "PATCH": 9}


def attributes(record: dict[str, Any]) -> dict[str, Any]:
    """A record's (or an event line's) OpenTelemetry attributes: only str, int and bool values,
    and a key only where the record has the field."""
    out: dict[str, Any] = {}

    def put(name: str, value: object) -> None:
        if isinstance(value, bool | int | str) and value != "":
            out[name] = _utf8(value) if isinstance(value, str) else value

    if "event" in record:
        put("stockade.event", record["event"])
        for field in ("session", "head", "previous", "previous_head"):
            put(f"stockade.{field}", record.get(field))
        put("stockade.chain", record.get("chain"))
        if record.get("event") == "session-end":
            out.update({"ocsf.class_uid": OCSF_NETWORK, "ocsf.activity_id": 2})
        return out
    if "kind" in record:
        return _finding_attributes(record, out, put)
    allowed = record.get("decision") == "allow"
    for name, field in (
        ("stockade.session", "session"), ("stockade.decision", "decision"), ("stockade.rule", "rule"), ("stockade.scheme", "scheme"),
        ("stockade.phase", "phase"), ("stockade.flow", "flow"), ("stockade.mcp", "mcp"), ("stockade.hint", "hint"), ("stockade.chain", "chain"),
        ("stockade.error", "error"), ("stockade.bytes_up", "bytes_up"), ("stockade.bytes_down", "bytes_down"),
        ("stockade.duration_ms", "duration_ms"), ("stockade.repeats", "repeats"), ("server.address", "host"), ("server.port", "port"),
        ("http.request.method", "method"), ("url.path", "path"), ("tls.server.name", "sni"), ("network.peer.address", "address"),
    ):  # fmt: skip
        put(name, record.get(field))
    command = record.get("command")
    if isinstance(command, list):
        put("stockade.command", json.dumps(command, ensure_ascii=True))
    put("stockade.agent_session", record.get("agent_session"))
    put("stockade.tool_call", record.get("tool_call"))
    _process_attributes(record.get("process"), put)
    scheme, method = record.get("scheme"), record.get("method")
    if scheme == "dns":
        out.update({"ocsf.class_uid": OCSF_DNS, "ocsf.activity_id": 1})
    elif isinstance(method, str) and method:
        out.update({"ocsf.class_uid": OCSF_HTTP, "ocsf.activity_id": HTTP_ACTIVITIES.get(method.upper(), 99)})
    else:
        out.update({"ocsf.class_uid": OCSF_NETWORK, "ocsf.activity_id": 1 if allowed else 5})
    out["ocsf.disposition_id"] = 1 if allowed else 2
    return out


def _process_attributes(process: object, put: Any) -> None:
    """The process inside a record names (daemon/attribution.py, the checkpoint's watch), or the host's
    pid of a refused call (`--trace`)."""
    if not isinstance(process, dict):
        return
    put("process.pid", process.get("pid"))
    put("process.executable.path", process.get("exe"))
    if isinstance(process.get("argv"), list):
        put("process.command_args", json.dumps(process["argv"], ensure_ascii=True))
    parents = process.get("parents")
    if isinstance(parents, list) and parents and isinstance(parents[0], dict):
        put("process.parent.pid", parents[0].get("pid"))
    put("stockade.host_pid", process.get("host_pid"))


def _utf8(text: str) -> str:
    """A string the exporter can encode: a lone surrogate (a file name's byte that is not UTF-8) as its escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _finding_attributes(record: dict[str, Any], out: dict[str, Any], put: Any) -> dict[str, Any]:
    """A run's file or limit finding (proxy/audit.FindingRecord)."""
    for name, field in (
        ("stockade.session", "session"), ("stockade.kind", "kind"), ("stockade.decision", "decision"), ("stockade.rule", "rule"),
        ("stockade.limit", "limit"), ("stockade.operation", "operation"), ("stockade.moved_to", "moved_to"), ("stockade.error", "error"),
        ("stockade.mcp", "mcp"), ("stockade.agent_session", "agent_session"), ("stockade.tool_call", "tool_call"),
        ("stockade.chain", "chain"), ("file.path", "path"),
    ):  # fmt: skip
        put(name, record.get(field))
    command = record.get("command")
    if isinstance(command, list):
        put("stockade.command", json.dumps(command, ensure_ascii=True))
    _process_attributes(record.get("process"), put)
    kind = record.get("kind")
    if kind == "limit":
        out.update({"ocsf.class_uid": OCSF_PROCESS, "ocsf.activity_id": LIMIT_ACTIVITIES.get(str(record.get("limit")), 99)})
    elif kind == "container":
        out.update({"ocsf.class_uid": OCSF_API, "ocsf.activity_id": _api_activity(str(record.get("operation") or ""))})
    else:
        activity = 5 if kind == "moved" else FILE_ACTIVITIES.get(str(record.get("operation")), 99)
        out.update({"ocsf.class_uid": OCSF_FILE, "ocsf.activity_id": activity})
    out["ocsf.disposition_id"] = 1 if record.get("decision") == "allow" else 2
    return out


def _api_activity(call: str) -> int:
    """OCSF API Activity: 1 create, 2 read, 3 update, 4 delete."""
    method, _, path = call.partition(" ")
    if method == "DELETE":
        return 4
    if method in ("GET", "HEAD"):
        return 2
    return 1 if path.endswith("/create") else 3


def body(record: dict[str, Any]) -> str:
    """One line a person reads in the collector's UI."""
    if "event" in record:
        return f"stockade {record['event']}" + (f" session {record['session']}" if isinstance(record.get("session"), str) else "")
    if "kind" in record:
        what = record.get("limit") if record.get("kind") == "limit" else record.get("path")
        return f"{record.get('decision')} {record.get('kind')} {what} ({record.get('rule')})"
    where = f"{record.get('host')}:{record.get('port')}"
    request = " ".join(str(record[key]) for key in ("method", "path") if record.get(key))
    request = f" {request}" if request else ""
    return f"{record.get('decision')} {record.get('scheme')} {where}{request} ({record.get('rule')})"


def _nanoseconds(stamp: object) -> int | None:
    if not isinstance(stamp, str):
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1_000_000_000)
    except ValueError:
        return None


class Export:
    """One collector's exporter; `send` never blocks and never raises."""

    def __init__(self, settings: ExportSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._handed = 0  # records given to the SDK
        self.last_error = ""
        self.failing_since = ""  # when the current run of failed sends began (UTC), "" while sends succeed
        self._logger: Any = None
        self._provider: Any = None
        self._broken = ""

    @property
    def waiting(self) -> int:
        return self._handed - self.sent - self.failed

    def _start(self) -> None:
        import getpass
        import socket

        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        s = self.settings
        exporter = OTLPLogExporter(
            session=_bounded_session(),
            endpoint=s.endpoint,
            headers=dict(s.headers),
            timeout=s.timeout,
            compression=Compression.Gzip if s.compression == "gzip" else Compression.NoCompression,
            certificate_file=s.certificate or None,
            client_key_file=s.client_key or None,
            client_certificate_file=s.client_certificate or None,
        )
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = str(os.getuid())
        resource = Resource.create({"service.name": "stockade", "service.version": _version(), "host.name": socket.gethostname(), "user.name": user})
        self._provider = LoggerProvider(resource=resource)
        counted = _counted(exporter, self)
        processor = BatchLogRecordProcessor(
            counted, schedule_delay_millis=DELAY_MS, max_export_batch_size=BATCH, max_queue_size=QUEUE, export_timeout_millis=s.timeout * 1000
        )
        self._provider.add_log_record_processor(processor)
        self._logger = self._provider.get_logger(SCOPE)

    def send(self, line: bytes) -> None:
        """Queue one sealed audit line (proxy/audit.py); counted as dropped when QUEUE wait already."""
        try:
            record = json.loads(line)
            with self._lock:
                if self._broken:
                    self.dropped += 1
                    return
                if self.waiting >= QUEUE:
                    self.dropped += 1
                    return
                if self._logger is None:
                    self._start()
                self._handed += 1
            self._emit(record)
        except Exception as error:  # noqa: BLE001 - an exporter that cannot start must never cost the audit write
            with self._lock:
                self._broken = self._broken or f"{type(error).__name__}: {error}"
                self.dropped += 1

    def _emit(self, record: dict[str, Any]) -> None:
        from opentelemetry._logs import SeverityNumber

        denied = record.get("decision") == "deny"
        self._logger.emit(
            timestamp=_nanoseconds(record.get("time")),
            severity_number=SeverityNumber.WARN if denied else SeverityNumber.INFO,
            severity_text="WARN" if denied else "INFO",
            body=_utf8(body(record)),
            attributes=attributes(record),
            event_name=_utf8("stockade." + str(record.get("event") or record.get("kind") or "network")),
        )

    def counts(self) -> tuple[int, int]:
        """(failed, dropped) so far: a session compares them at its start and its end."""
        with self._lock:
            return self.failed, self.dropped

    def trouble(self, since: tuple[int, int]) -> str:
        """A line for the end of a run while this collector is failing, or when records were lost since
        `since`; else "". (A run's own last records are sent after it ends: the collector's state then is
        what a run can say.)"""
        with self._lock:
            failed, dropped, failing = self.failed, self.dropped, self.failing_since
        lost = (failed - since[0]) + (dropped - since[1])
        if not lost and not failing and not self._broken:
            return ""
        why = self._broken or self.last_error or "the collector did not take them"
        when = f", failing since {failing}" if failing else ""
        return (
            f"audit records are not reaching the collector {self.settings.endpoint} ({why}{when}; {failed + dropped} not sent so far); "
            "the local audit log has every one"
        )

    def close(self, timeout: float = 2.0) -> None:
        """Send what waits, for at most `timeout` seconds (the daemon is stopping)."""
        if self._provider is None:
            return
        try:
            self._provider.force_flush(int(timeout * 1000))  # no shutdown: it would wait out a send still retrying (its thread dies with us)
        except Exception:  # noqa: BLE001, S110 - a collector that is down at exit loses what waits; the local log has it
            pass


def _counted(inner: Any, export: Export) -> Any:
    """The OTLP exporter, counting what it sent and what it could not (the SDK imported only now)."""
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    class Counted(LogRecordExporter):
        def __init__(self, inner: LogRecordExporter, export: Export) -> None:
            self.inner = inner
            self.export_ = export

        def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
            try:
                result = self.inner.export(batch)
            except Exception as error:  # noqa: BLE001
                result, reason = LogRecordExportResult.FAILURE, f"{type(error).__name__}: {error}"
            else:
                reason = "the collector did not take them (unreachable, or it refused)"
            with self.export_._lock:
                if result == LogRecordExportResult.SUCCESS:
                    self.export_.sent += len(batch)
                    self.export_.last_error = self.export_.failing_since = ""
                else:
                    self.export_.failed += len(batch)
                    self.export_.last_error = reason
                    if not self.export_.failing_since:
                        from stockade.proxy.audit import now_iso

                        self.export_.failing_since = now_iso()
            return result

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(self.inner.force_flush(timeout_millis))

        def shutdown(self) -> None:
            self.inner.shutdown()

    return Counted(inner, export)


class Exports:
    """The daemon's exporters, one per collector and settings."""

    def __init__(self) -> None:
        self._by_settings: dict[ExportSettings, Export] = {}

    def get(self, settings: ExportSettings) -> Export:
        found = self._by_settings.get(settings)
        if found is None:
            found = self._by_settings[settings] = Export(settings)
        return found

    def close(self) -> None:
        for export in self._by_settings.values():
            export.close()


def _bounded_session() -> Any:
    """The exporter's HTTP session: a collector's answer is its status alone (its body is never read: a
    hostile one could send gigabytes), and a redirect is a failure (it would otherwise count as sent,
    and the records would be gone)."""
    import requests

    class Bounded(requests.Session):
        def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> requests.Response:
            kwargs["stream"], kwargs["allow_redirects"] = True, False
            response = super().request(method, url, *args, **kwargs)
            response._content, response._content_consumed = b"", True
            response.close()
            if 300 <= response.status_code < 400:
                response.status_code, response.reason = 421, f"the collector redirects ({response.headers.get('Location', '?')[:200]})"
            return response

    return Bounded()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stockade")
    except PackageNotFoundError:
        return "unknown"
