"""A run's findings as audit records: built from what the run found, chained into its log, and a
log that cannot be written costs a line, never the run."""

from __future__ import annotations

import json
from pathlib import Path

from stockade.bwrap.after import findings_log
from stockade.proxy.audit import KINDS, read_records
from stockade.proxy.audit_chain import verify
from tests.bwrap.running.test_execute import launch


def test_each_finding_becomes_one_record_naming_the_run(tmp_path: Path) -> None:
    run = launch(command=["sh", "-c", "curl -H 'Authorization: Bearer sk-live-123' x"], memory=256 << 20, pids=64, wall_time=2.0, file_size=None)
    who = {"mcp": None, "agent_session": "sess-1", "tool_call": "toolu_9"}
    refused = [({"path": "/home/u/.ssh/id_ed25519", "operation": "read", "errno": "ENOENT", "rule": "deny_read: ~/.ssh"}, 4242)]
    records = findings_log.findings(run, "s1", who, ["memory", "pids"], True, [("/p/.envrc", "/p/.envrc.q")], refused)
    data = [json.loads(record.to_line()) for record in records]
    assert [(d["kind"], d.get("limit") or d.get("path")) for d in data] == [
        ("limit", "memory"), ("limit", "pids"), ("limit", "wall_time"), ("moved", "/p/.envrc"), ("file", "/home/u/.ssh/id_ed25519"),
    ]  # fmt: skip
    assert all(d["session"] == "s1" and d["tool_call"] == "toolu_9" and d["agent_session"] == "sess-1" and "mcp" not in d for d in data)
    assert "sk-live-123" not in json.dumps(data)  # the command is redacted as network records redact it
    assert "256" in data[0]["rule"] and "64" in data[1]["rule"] and "2s" in data[2]["rule"]
    assert data[3]["moved_to"] == "/p/.envrc.q" and data[4]["process"] == {"host_pid": 4242} and data[4]["operation"] == "read"
    assert all("process" not in d for d in data[:4])  # the kernel did not say which process: none is named


def test_findings_are_chained_into_the_log_and_read_back(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    run = launch(command=["make"], memory=None, pids=8, wall_time=None, file_size=None, audit=(str(log), ""))
    records = findings_log.findings(run, "s2", {"tool_call": "toolu_2"}, ["pids"], False, [("/p/.vscode", "/p/.vscode.q")], [])
    assert findings_log.write(run, records) == ""
    read = list(read_records(log))
    assert [r["kind"] for r in read] == ["limit", "moved"] and verify([str(log)]).ok


def test_a_log_that_cannot_be_written_costs_a_line(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    run = launch(command=["make"], memory=None, pids=8, wall_time=None, file_size=None, audit=(str(blocker / "audit.jsonl"), ""))
    records = findings_log.findings(run, "s3", {}, ["pids"], False, [], [])
    said = findings_log.write(run, records)
    assert said.startswith("1 finding(s) of this run are not in the audit log") and str(blocker) in said


def test_a_run_that_moves_thousands_of_files_writes_a_bounded_number_of_records(tmp_path: Path) -> None:
    run = launch(command=["sh"], memory=None, pids=None, wall_time=None, file_size=None)
    moved = [(f"/p/d{n}/.envrc", f"/p/d{n}/.envrc.q") for n in range(5000)]
    records = findings_log.findings(run, "s4", {}, ["pids"], False, moved, [])
    assert len(records) <= findings_log.MAX_RECORDS
    summary = [r for r in records if r.repeats]
    assert [(r.kind, r.repeats) for r in summary] == [("moved", 5000 - (findings_log.MAX_RECORDS - len(KINDS)) + 1)]
    assert sum(1 for r in records if r.kind == "moved" and not r.repeats) + summary[0].repeats == 5000


def test_a_process_that_names_itself_at_length_stays_a_few_kilobytes() -> None:
    from stockade.proxy.audit import PROCESS_LIMIT, FindingRecord

    huge = "\U0001f600" * 1000
    process = {"pid": 3, "exe": huge, "argv": [huge] * 32, "parents": [{"pid": n, "exe": huge, "argv0": huge} for n in range(16)]}
    line = FindingRecord(session="s", command=["x"], kind="moved", rule="r", path="/p", process=process).to_line()
    data = json.loads(line)
    assert len(line) < PROCESS_LIMIT + 1000 and "process" in data["truncated"] and data["process"]["pid"] == 3
