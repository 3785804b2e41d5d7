"""A run's findings off the network are audit records too: a file written at a protected path and
moved aside, and a limit reached, in the log of an offline run, with the agent's tool call, chained,
filtered by `stockade audit`, and sent to the collector when the policy names one."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from stockade.proxy.audit import read_records
from stockade.proxy.audit_chain import verify
from tests.e2e.boxes import Box
from tests.otlp_receiver import Receiver


def _policy(box: Box, collector: str = "", wall_time: str = "2s") -> str:
    log = box.root / "audit" / "audit.jsonl"
    return f'extends = ["default"]\n[limits]\nwall_time = "{wall_time}"\n[audit]\nlog = "{log}"\n' + (f'otlp = "{collector}"\n' if collector else "")


def _audit(box: Box, *options: str) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "audit", "--log", str(box.root / "audit" / "audit.jsonl"), "--json", *options],
        capture_output=True, text=True, env=box.env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_an_offline_run_s_moved_file_and_limit_are_recorded_with_its_tool_call(box: Box) -> None:
    options = ["--agent-session", "sess-e2e", "--tool-call", "toolu_e2e"]
    done = box.run("sh -c 'echo PWNED > .envrc'; sleep 30", policy=_policy(box), options=options)
    assert done.returncode == 137 and not (box.project / ".envrc").exists(), done  # killed at wall_time; the file moved aside
    records = _audit(box, "--tool-call", "toolu_e2e")
    assert sorted((str(r["kind"]), str(r.get("limit") or r.get("path"))) for r in records) == [
        ("limit", "wall_time"), ("moved", str(box.project / ".envrc")),
    ]  # fmt: skip
    moved = next(r for r in records if r["kind"] == "moved")
    assert str(moved["moved_to"]).startswith(str(box.project / ".envrc.")) and moved["agent_session"] == "sess-e2e"
    writer = moved["process"]  # the process inside that wrote it, and the command above it
    assert isinstance(writer, dict) and writer["argv"] == ["sh", "-c", "echo PWNED > .envrc"], moved
    assert [parent["argv0"] for parent in writer["parents"]] == ["/bin/sh"]
    assert [r["kind"] for r in _audit(box, "--session", str(moved["session"]), "--pid", str(writer["pid"]))] == ["moved"]
    assert verify([str(box.root / "audit" / "audit.jsonl")]).ok
    # control: a run that finds nothing adds no record, and another tool call's filter sees none of these
    quiet = box.run("echo fine > notes.txt", policy=_policy(box), options=["--tool-call", "toolu_other"])
    assert quiet.returncode == 0 and _audit(box, "--tool-call", "toolu_other") == []
    assert len(list(read_records(box.root / "audit" / "audit.jsonl"))) == 2


def test_an_offline_run_s_findings_reach_the_collector(box: Box) -> None:
    receiver = Receiver()
    try:
        done = box.run("echo x > .envrc", policy=_policy(box, receiver.url), options=["--tool-call", "toolu_sent"])
        assert done.returncode == 0, done
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not receiver.records:
            time.sleep(0.1)
        sent = [r["attributes"] for r in receiver.records]
        assert [(a["stockade.kind"], a["stockade.tool_call"], a["ocsf.class_uid"]) for a in sent] == [("moved", "toolu_sent", 1001)], sent
        local = list(read_records(box.root / "audit" / "audit.jsonl"))
        assert sent[0]["stockade.chain"] == local[0]["chain"]
    finally:
        receiver.stop()


def test_a_moved_file_names_its_last_writer_and_the_earlier_ones(box: Box) -> None:
    """An innocent program that touched the file first does not take the blame for what another wrote."""
    script = "touch .envrc; sh -c 'echo curl-evil > .envrc'; mkdir -p d1 d2; sh -c \"sh -c 'touch d1/.envrc; sleep 1; touch d2/.envrc' & sleep 0.3\"; sleep 2"
    done = box.run(script, policy=_policy(box, wall_time="60s"), options=["--tool-call", "toolu_writers"])
    assert done.returncode == 0, done
    records = {str(r["path"]): r for r in _audit(box, "--tool-call", "toolu_writers")}
    envrc = records[str(box.project / ".envrc")]["process"]
    assert isinstance(envrc, dict) and envrc["argv"] == ["sh", "-c", "echo curl-evil > .envrc"], envrc
    assert [other["exe"].rsplit("/", 1)[-1] for other in envrc["earlier"]] == ["touch"]
    late = records[str(box.project / "d2" / ".envrc")]["process"]  # its parent shell exited first: no stale or host pid in its parents
    assert isinstance(late, dict) and all(0 < parent["pid"] < 1000 for parent in late["parents"]), late
