"""Audit records to an OpenTelemetry collector: what arrives and under which names; a collector that is
down costs bounded memory and loses nothing of the local log; the user's own headers are sent."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stockade.proxy.audit import AuditRecord
from stockade.proxy.audit_chain import verify
from stockade.proxy.control import SessionSpec
from stockade.proxy.daemon import otlp
from stockade.proxy.export_settings import ExportSettings, settings_for
from stockade.proxy.filter.sessions import Registry
from tests.otlp_receiver import Receiver


@pytest.fixture
def receiver() -> Receiver:
    found = Receiver()
    yield found  # type: ignore[misc]
    found.stop()


def _line(**fields: object) -> bytes:
    record = AuditRecord(session="s1", command=["curl", "x"], scheme="https", host="api.test", port=443, decision="allow", rule="allow api.test")
    for name, value in fields.items():
        setattr(record, name, value)
    return record.to_line()


def _wait(predicate: object, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({}, {"ocsf.class_uid": 4001, "ocsf.activity_id": 1, "ocsf.disposition_id": 1}, id="tunnel-allowed"),
        pytest.param(
            {"decision": "deny", "rule": "no allow rule"}, {"ocsf.class_uid": 4001, "ocsf.activity_id": 5, "ocsf.disposition_id": 2}, id="refused"
        ),
        pytest.param(
            {"method": "POST", "path": "/v1/x"},
            {"ocsf.class_uid": 4002, "ocsf.activity_id": 6, "http.request.method": "POST", "url.path": "/v1/x"},
            id="http",
        ),
        pytest.param({"scheme": "dns", "port": 0, "decision": "deny"}, {"ocsf.class_uid": 4003, "ocsf.disposition_id": 2}, id="dns"),
        pytest.param({"mcp": "github"}, {"stockade.mcp": "github"}, id="mcp"),
    ],
)
def test_each_record_maps_to_stable_names(fields: dict[str, object], expected: dict[str, object]) -> None:
    record = json.loads(_line(**fields))
    found = otlp.attributes(record)
    assert {name: found.get(name) for name in expected} == expected
    assert found["server.address"] == "api.test" and found["stockade.session"] == "s1" and found["stockade.command"] == '["curl", "x"]'
    assert all(isinstance(value, str | int | bool) for value in found.values())


def test_records_reach_the_collector_with_the_user_s_headers(receiver: Receiver) -> None:
    settings = settings_for(
        receiver.url, {"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20tok,x-team=infra", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
    )
    export = otlp.Export(settings)
    for n in range(10):
        export.send(_line(host=f"h{n}.test", chain=f"{n:064x}"))
    export.send(b'{"event":"session-end","session":"s1","head":"' + b"a" * 64 + b'","chain":"' + b"b" * 64 + b'"}\n')
    export.close()
    assert len(receiver.records) == 11, receiver.records
    first = receiver.records[0]
    assert first["body"] == "allow https h0.test:443 (allow api.test)" and first["severity"] == "INFO"
    assert first["attributes"]["stockade.chain"] == f"{0:064x}" and first["event_name"] == "stockade.network"
    assert first["resource"]["service.name"] == "stockade" and first["scope"] == "stockade.audit"
    assert receiver.records[-1]["attributes"]["stockade.head"] == "a" * 64
    assert receiver.headers[0]["authorization"] == "Bearer tok" and receiver.headers[0]["x-team"] == "infra"
    assert export.counts() == (0, 0) and export.trouble((0, 0)) == ""


def test_a_collector_that_is_down_costs_bounded_memory_and_is_reported(receiver: Receiver) -> None:
    receiver.stop()  # nothing listens there now
    export = otlp.Export(ExportSettings(receiver.url + "/v1/logs", timeout=1.0))
    for n in range(otlp.QUEUE * 3):
        export.send(_line(host=f"h{n}.test"))
        assert export.waiting <= otlp.QUEUE
    failed, dropped = export.counts()
    assert dropped >= otlp.QUEUE  # the third and more: counted, not kept
    assert _wait(lambda: export.counts()[0] > 0)
    said = export.trouble(export.counts())  # said while failing, even when nothing of a run's own was lost yet
    assert "are not reaching the collector" in said and "failing since" in said and "the local audit log has every one" in said
    export.close(timeout=0.5)


def test_an_exporter_that_cannot_start_never_fails_the_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: otlp.Export) -> None:
        raise RuntimeError("no SDK here")

    monkeypatch.setattr(otlp.Export, "_start", broken)
    registry = Registry(exports=otlp.Exports())
    spec = SessionSpec("s1", ["curl"], "/", audit_path=str(tmp_path / "audit.jsonl"), export=ExportSettings("http://127.0.0.1:9/v1/logs"))
    _token, session = registry.register(spec)
    session.writer.write(AuditRecord(session="s1", command=["curl"], scheme="https", host="a.test", port=443, decision="deny", rule="r"))
    assert "RuntimeError: no SDK here" in session.export_trouble()
    assert len((tmp_path / "audit.jsonl").read_text().splitlines()) == 1


def test_sixteen_sessions_with_the_collector_stopped_halfway_lose_nothing_locally(tmp_path: Path) -> None:
    receiver = Receiver()
    registry = Registry(exports=otlp.Exports())
    settings = settings_for(receiver.url, {"OTEL_EXPORTER_OTLP_TIMEOUT": "1000"})  # milliseconds, as the specification has it
    assert settings.timeout == 1.0
    log = tmp_path / "audit.jsonl"
    sessions = [registry.register(SessionSpec(f"s{n}", ["curl"], "/", audit_path=str(log), export=settings))[1] for n in range(16)]
    assert len({id(session.export) for session in sessions}) == 1  # one exporter per collector
    for request in range(100):
        if request == 50:
            assert _wait(lambda: len(receiver.records) >= 16 * 50 * 0.9)  # the first half arrived
            receiver.stop()
        for session in sessions:
            record = AuditRecord(
                session=session.spec.session_id, command=["curl"], scheme="https", host=f"h{request}.test", port=443, decision="allow", rule="r"
            )
            session.writer.write(record)
    troubles = []
    for session in sessions:
        registry.end(session.spec.session_id)
        troubles.append(session.export_trouble())
    export = sessions[0].export
    assert export.waiting <= otlp.QUEUE
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len([line for line in lines if "event" not in line]) == 1600 and len(lines) == 1616  # every record, and each session's end
    assert verify([log]).ok
    assert _wait(lambda: export.counts()[0] + export.counts()[1] > 0, 30)  # what went to a stopped collector is counted lost
    assert all("not reaching the collector" in session.export.trouble(session.export_mark) for session in sessions)
    registry.close_exports()
    assert len(receiver.records) < 1616


def test_who_made_it_is_exported_too() -> None:
    record = json.loads(
        _line(agent_session="s-9", tool_call="toolu_1", process={"pid": 12, "exe": "/usr/bin/curl", "argv": ["curl", "x"], "parents": [{"pid": 3}]})
    )
    found = otlp.attributes(record)
    assert (found["stockade.tool_call"], found["process.pid"], found["process.executable.path"], found["process.parent.pid"]) == (
        "toolu_1",
        12,
        "/usr/bin/curl",
        3,
    )
    assert found["process.command_args"] == '["curl", "x"]'


def test_a_collector_that_redirects_or_answers_at_length_is_a_failure_and_costs_nothing() -> None:
    """A redirect is not a delivery (the records would be gone), and an answer's body is never read."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Hostile(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path == "/redirect/v1/logs":
                self.send_response(302)
                self.send_header("Location", "https://elsewhere.test/v1/logs")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(512 << 20))
            self.end_headers()
            try:
                for _ in range(64):
                    self.wfile.write(b"x" * (1 << 20))
            except OSError:
                return

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        redirected = otlp.Export(ExportSettings(base + "/redirect/v1/logs", timeout=1.0))
        redirected.send(_line())
        assert _wait(lambda: redirected.counts()[0] == 1), redirected.counts()
        assert "redirects" in redirected.trouble((0, 0)) or "did not take" in redirected.trouble((0, 0))
        huge = otlp.Export(ExportSettings(base + "/v1/logs", timeout=2.0))
        huge.send(_line())
        assert _wait(lambda: huge.sent == 1), (huge.sent, huge.counts())  # taken by its status; the 512 MB never read
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({"kind": "moved", "path": "/p/.envrc", "moved_to": "/p/.envrc.q"}, {"ocsf.class_uid": 1001, "ocsf.activity_id": 5}, id="moved"),
        pytest.param({"kind": "file", "path": "/h/.ssh/id", "operation": "read"}, {"ocsf.class_uid": 1001, "ocsf.activity_id": 2}, id="file"),
        pytest.param({"kind": "limit", "limit": "memory"}, {"ocsf.class_uid": 1007, "ocsf.activity_id": 2, "stockade.limit": "memory"}, id="limit"),
    ],
)
def test_a_run_s_findings_map_to_file_and_process_activity(fields: dict[str, object], expected: dict[str, object]) -> None:
    from stockade.proxy.audit import FindingRecord

    record = json.loads(FindingRecord(session="s1", command=["make"], rule="r", tool_call="toolu_1", **fields).to_line())  # type: ignore[arg-type]
    found = otlp.attributes(record)
    assert {name: found.get(name) for name in expected} == expected
    assert found["ocsf.disposition_id"] == 2 and found["stockade.kind"] == fields["kind"] and found["stockade.tool_call"] == "toolu_1"
    assert "server.address" not in found and record["kind"] in otlp.body(record)


def test_a_name_that_is_not_utf8_is_sent_escaped_never_breaking_the_batch() -> None:
    from stockade.proxy.audit import FindingRecord

    record = json.loads(FindingRecord(session="s", command=["sh"], kind="moved", rule="r", path="/p/bad\udcff/.envrc").to_line())
    found = otlp.attributes(record)
    assert found["file.path"] == "/p/bad\\udcff/.envrc"
    assert all(value.encode("utf-8") for value in found.values() if isinstance(value, str))
    assert otlp._utf8(otlp.body(record)).encode("utf-8")
