"""The exporter a run leaves behind for its own findings: lines reach the collector; lines that do
not leave an `export-failed` line in the local log; input that is not a run's is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stockade.proxy.audit import AuditWriter, FindingRecord
from stockade.proxy.audit_chain import verify
from stockade.proxy.export_settings import settings_for
from tests.otlp_receiver import Receiver


def _exported(log: Path, collector: str, lines: list[bytes], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    message = {"log": str(log), "settings": settings_for(collector, env or {}).to_dict(), "lines": [line.decode() for line in lines]}
    return subprocess.run(
        [sys.executable, "-I", "-m", "stockade.proxy.daemon.export_once"], input=json.dumps(message).encode(), capture_output=True, timeout=60
    )


def _written(log: Path) -> list[bytes]:
    lines: list[bytes] = []
    writer = AuditWriter(log)
    writer.tee = lines.append
    writer.write(FindingRecord(session="s1", command=["sh"], kind="moved", rule="r", path="/p/.envrc", moved_to="/p/.envrc.q"))
    writer.write(FindingRecord(session="s1", command=["sh"], kind="limit", rule="r", limit="pids"))
    writer.close()
    return lines


def test_a_run_s_lines_reach_the_collector(tmp_path: Path) -> None:
    receiver = Receiver()
    try:
        log = tmp_path / "audit.jsonl"
        done = _exported(log, receiver.url, _written(log), {"OTEL_EXPORTER_OTLP_HEADERS": "x-team=infra"})
        assert done.returncode == 0, done
        assert sorted(r["attributes"]["stockade.kind"] for r in receiver.records) == ["limit", "moved"]
        assert receiver.headers[0]["x-team"] == "infra"
        assert b"export-failed" not in log.read_bytes()
    finally:
        receiver.stop()


def test_lines_the_collector_did_not_take_are_said_in_the_local_log(tmp_path: Path) -> None:
    receiver = Receiver()
    receiver.stop()  # down
    log = tmp_path / "audit.jsonl"
    done = _exported(log, receiver.url, _written(log), {"OTEL_EXPORTER_OTLP_TIMEOUT": "500"})
    assert done.returncode == 1
    notes = [json.loads(line) for line in log.read_bytes().splitlines() if b"export-failed" in line]
    assert len(notes) == 1 and notes[0]["records"] == 2 and notes[0]["sessions"] == ["s1"] and notes[0]["collector"].endswith("/v1/logs")
    assert verify([str(log)]).ok


def test_input_that_is_not_a_run_s_is_refused(tmp_path: Path) -> None:
    for given in (b"", b"[]", b'{"log": "x"}', b'{"log": "x", "settings": {"endpoint": "file:///etc"}, "lines": []}'):
        done = subprocess.run([sys.executable, "-I", "-m", "stockade.proxy.daemon.export_once"], input=given, capture_output=True, timeout=60)
        assert done.returncode == 2 and done.stderr == b"", (given, done)
