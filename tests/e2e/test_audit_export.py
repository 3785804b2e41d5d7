"""The audit sent to an OpenTelemetry collector from a real daemon: the records of sandboxed requests
arrive, chained as in the local log; a collector that is down changes nothing of the run but a line."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest

from stockade.proxy.audit import read_records
from tests.e2e.netfixtures import NetWorld, one
from tests.otlp_receiver import Receiver

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.network,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]


@pytest.fixture(scope="module")
def world(net_world: NetWorld) -> NetWorld:
    return net_world


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.stop()


def _policy(w: NetWorld, tag: str, collector: str) -> str:
    return w.policy(tag) + f'otlp = "{collector}"\n'


def test_each_record_of_a_run_reaches_the_collector(world: NetWorld, receiver: Receiver) -> None:
    w = world
    script = 'curl -s -o /dev/null -w "ok=%{http_code}\\n" "http://allowed.test:$HP/one"; curl -s -o /dev/null -w "no=%{http_code}\\n" "http://denied.test:$DP/x"'
    result = w.run(script, tag="otlp", policy=_policy(w, "otlp", receiver.url), env={"OTEL_EXPORTER_OTLP_HEADERS": "x-team=infra"})
    assert (one(result, "ok"), one(result, "no")) == ("200", "403"), result
    local = list(read_records(w.audit_path("otlp")))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len([r for r in receiver.records if r["attributes"].get("stockade.event") == "session-end"]) < 1:
        time.sleep(0.1)
    network = [r for r in receiver.records if r["event_name"] == "stockade.network"]
    assert {r["attributes"]["server.address"] for r in network} >= {"allowed.test", "denied.test"}, receiver.records
    denied = next(r for r in network if r["attributes"]["server.address"] == "denied.test")
    assert denied["attributes"]["ocsf.disposition_id"] == 2 and denied["severity"] == "WARN"
    chains = {r["attributes"].get("stockade.chain") for r in network}
    assert {str(r["chain"]) for r in local} <= chains  # the same links as the local log: the collector holds the anchors
    assert receiver.headers[0]["x-team"] == "infra"
    assert "not reaching the collector" not in result.stderr


def test_a_collector_that_is_down_costs_the_run_nothing_but_a_line(world: NetWorld, receiver: Receiver) -> None:
    w = world
    receiver.stop()
    script = 'for i in 1 2 3; do curl -s -o /dev/null -w "ok=%{http_code}\\n" "http://allowed.test:$HP/d$i"; done; exit 7'
    first = w.run(script, tag="otlp-down", policy=_policy(w, "otlp-down", receiver.url), env={"OTEL_EXPORTER_OTLP_TIMEOUT": "500"})
    assert first.returncode == 7 and first.stdout.count("ok=200") == 3, first  # the command's own status, every request served
    assert len([r for r in read_records(w.audit_path("otlp-down")) if r.get("path", "").startswith("/d")]) == 3
    time.sleep(2.5)  # the exporter's batch is tried (and fails) after the first run
    second = w.run(script, tag="otlp-down", policy=_policy(w, "otlp-down", receiver.url), env={"OTEL_EXPORTER_OTLP_TIMEOUT": "500"})
    assert second.returncode == 7
    assert len([r for r in read_records(w.audit_path("otlp-down")) if r.get("path", "").startswith("/d")]) == 6
    said = [line for line in first.stderr.splitlines() + second.stderr.splitlines() if "not reaching the collector" in line]
    assert said and "the local audit log has every one" in said[0], (first.stderr, second.stderr)


def test_an_agent_s_tool_call_is_named_in_each_record_and_filters_the_audit(world: NetWorld) -> None:
    import json
    import subprocess
    import sys

    w = world
    script = 'curl -s -o /dev/null -w "ok=%{http_code}\\n" "http://allowed.test:$HP/call"; curl -s -o /dev/null -w "no=%{http_code}\\n" "http://denied.test:$DP/c"'
    ran = w.run(script, tag="calls", options=["--agent-session", "sess-9", "--tool-call", "toolu_01abc"])
    other = w.run(script, tag="calls", options=["--tool-call", "toolu_02def"])
    assert one(ran, "ok") == "200" and one(other, "no") == "403", (ran, other)
    records = [r for r in read_records(w.audit_path("calls")) if r.get("path") in ("/call", "/c") or r.get("host") == "denied.test"]
    mine = [r for r in records if r.get("tool_call") == "toolu_01abc"]
    assert {r["host"] for r in mine} == {"allowed.test", "denied.test"} and all(r["agent_session"] == "sess-9" for r in mine)
    shown = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "audit", "--json", "--log", str(w.audit_path("calls")), "--tool-call", "toolu_02def"],
        capture_output=True, text=True, env={**w.box.env, **w.env}, timeout=60,
    )  # fmt: skip
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert lines and all(r["tool_call"] == "toolu_02def" and "agent_session" not in r for r in lines), shown


def test_sixteen_sandboxes_with_the_collector_stopped_halfway_lose_nothing_locally(world: NetWorld) -> None:
    """16 runs at once, 100 requests each; the collector stops once the first records arrive: every
    record is in the local log, chained, and the runs end with their own status."""
    from stockade.proxy.audit_chain import verify

    w = world
    receiver = Receiver()
    policy = _policy(w, "otlp-load", receiver.url)
    urls = " ".join(f'"http://allowed.test:$HP/load{n}"' for n in range(100))
    script = f'curl -s -o /dev/null -w "%{{http_code}}\\n" {urls} | sort | uniq -c; exit 3'
    runs = [w.popen(script, tag="otlp-load", policy=policy, env={"OTEL_EXPORTER_OTLP_TIMEOUT": "500"}) for _ in range(16)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not receiver.records:
        time.sleep(0.05)
    receiver.stop()
    outputs = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 3 for run in runs), [(run.returncode, err[-300:]) for run, (_out, err) in zip(runs, outputs, strict=True)]
    assert all("100 200" in out for out, _err in outputs), outputs
    local = [r for r in read_records(w.audit_path("otlp-load")) if str(r.get("path", "")).startswith("/load")]
    assert len(local) == 1600, len(local)
    log = w.audit_path("otlp-load")
    assert verify([log.with_name(log.name + ".2"), log.with_name(log.name + ".1"), log]).ok
