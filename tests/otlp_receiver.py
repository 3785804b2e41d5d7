"""A small OTLP/HTTP logs receiver on 127.0.0.1 for the tests: what a collector would get, decoded."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """POST /v1/logs bodies (protobuf ExportLogsServiceRequest), each log record as a dict:
    body, severity, attributes, resource attributes, and the request's headers."""

    def __init__(self, status: int = 200) -> None:
        self.records: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.status = status
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    data = gzip.decompress(data)
                if receiver.status == 200 and self.path == "/v1/logs":
                    receiver._take(data, dict(self.headers))
                self.send_response(receiver.status if self.path == "/v1/logs" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _take(self, data: bytes, headers: dict[str, str]) -> None:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        request = ExportLogsServiceRequest()
        request.ParseFromString(data)
        found = []
        for resource_logs in request.resource_logs:
            resource = {a.key: _value(a.value) for a in resource_logs.resource.attributes}
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    plain = MessageToDict(record)
                    found.append({
                        "body": record.body.string_value, "severity": record.severity_text, "time": record.time_unix_nano,
                        "event_name": plain.get("eventName", ""), "attributes": {a.key: _value(a.value) for a in record.attributes},
                        "resource": resource, "scope": scope_logs.scope.name,
                    })  # fmt: skip
        with self._lock:
            self.records += found
            self.headers.append({k.lower(): v for k, v in headers.items()})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None
