"""In real runs, each network record names the process inside that made it: through the proxy and
for a program that ignores it, with its parents, and `stockade audit --pid` finds them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from stockade.proxy.audit import read_records
from tests.e2e.netfixtures import NetWorld, one

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.network,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]


@pytest.fixture(scope="module")
def world(net_world: NetWorld) -> NetWorld:
    return net_world


def test_each_record_names_the_process_inside_and_its_parents(world: NetWorld) -> None:
    w = world
    script = (
        'echo "shell=$$"; curl -s -o /dev/null -w "ok=%{http_code}\\n" "http://allowed.test:$HP/who"; '
        '(curl -s -o /dev/null -w "no=%{http_code}\\n" -H "Authorization: Bearer sekrit" "http://denied.test:$DP/who2")'
    )
    ran = w.run(script, tag="who")
    assert (one(ran, "ok"), one(ran, "no")) == ("200", "403"), ran
    records = {
        r.get("path") or r["host"]: r for r in read_records(w.audit_path("who")) if r.get("path") in ("/who", "/who2") or r["host"] == "denied.test"
    }
    allowed = records["/who"]["process"]
    assert allowed["exe"].endswith("/curl") and allowed["argv"][0] == "curl" and isinstance(allowed["pid"], int), allowed
    shell = int(one(ran, "shell"))
    session = str(records["/who"]["session"])
    assert [parent["pid"] for parent in allowed["parents"]][:1] == [shell], allowed  # its parent: the script's shell, by its pid inside
    denied = next(r for r in records.values() if r["host"] == "denied.test")["process"]
    assert "sekrit" not in json.dumps(denied) and "Authorization: REDACTED" in denied["argv"], denied
    assert len(denied["parents"]) >= 2  # the subshell, then the script's shell

    shown = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "audit", "--json", "--log", str(w.audit_path("who")), "--pid", str(shell), "--session", session],
        capture_output=True, text=True, env={**w.box.env, **w.env}, timeout=60,
    )  # fmt: skip
    hosts = {json.loads(line)["host"] for line in shown.stdout.splitlines()}
    assert {"allowed.test", "denied.test"} <= hosts, shown  # what the shell's children made


def test_a_program_that_ignores_the_proxy_is_named_too(world: NetWorld) -> None:
    w = world
    ran = w.run('curl --noproxy "*" -s -o /dev/null -w "direct=%{http_code}\\n" "http://allowed.test:$HP/direct"', tag="who-direct")
    if one(ran, "direct") != "200":
        pytest.skip(f"no transparent path on this kernel: {ran.stderr.strip()[-200:]}")
    record = next(r for r in read_records(w.audit_path("who-direct")) if r["host"] == "allowed.test" and r["scheme"] != "dns")
    assert record.get("process", {}).get("exe", "").endswith("/curl"), record


def test_a_pid_alone_names_no_run() -> None:
    said = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "audit", "--pid", "3", "--log", "/nonexistent.jsonl"], capture_output=True, text=True, timeout=60
    )
    assert said.returncode == 2 and "give the run's --session too" in said.stderr, said
