"""The audit log loses nothing and never lies by omission: a killed daemon, a full disk."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from stockade.proxy.audit import read_records
from tests.e2e.netfixtures import NetWorld, one, pid_alive, q, wait_for

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.network,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]


@pytest.fixture(scope="module")
def world(net_world: NetWorld) -> NetWorld:
    return net_world


def _lines(path: Path) -> list[dict[str, object]]:
    """Every record, each line of which must be JSON: a torn line fails here (a session's end line is no record)."""
    return [record for line in path.read_bytes().splitlines() if line and "event" not in (record := json.loads(line))]


def test_a_daemon_killed_mid_download_leaves_a_record_and_the_run_says_so(world: NetWorld) -> None:
    w = world
    box = w.fresh_box()
    http = w.origins["http"]
    ready = box.project / "ready-drip"
    report = box.root / "report.json"
    run = w.popen(
        f"""
curl -s -o /dev/null -w "before=%{{http_code}}\\n" -x "$PX" "http://allowed.test:$HP/before-drip"
: > {q(str(ready))}
curl -s -o /dev/null -x "$PX" "http://allowed.test:$HP/drip"; echo "drip=$?"
""",
        tag="drip",
        box=box,
        options=("--ci", "--report", str(report)),
    )
    try:
        assert wait_for(lambda: any(s.path == "/drip" for s in http.requests), 30), "the download did not start"
        pid = w.daemon_pid(box)
        assert pid is not None and pid_alive(pid)
        os.kill(pid, signal.SIGKILL)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    result = subprocess.CompletedProcess(run.args, run.returncode, out, err)
    assert one(result, "before") == "200", result
    assert one(result, "drip") != "0", result  # the download was cut
    path = w.audit_path("drip", box)
    every = _lines(path)  # parseable, whole lines only
    assert [(r["path"], r["phase"]) for r in every] == [("/before-drip", "start"), ("/before-drip", "end"), ("/drip", "start")]
    shown = list(read_records(path))
    assert [(r["path"], r.get("incomplete", False)) for r in shown] == [("/before-drip", False), ("/drip", True)]
    assert "the proxy daemon was gone when the run ended" in err, err
    # --ci: the script exited 0, but a job whose network record is incomplete fails.
    assert result.returncode == 125, result
    assert "the job fails" in err.strip().splitlines()[-1], err
    written = json.loads(report.read_text())
    assert written["exit_status"] == 0 and written["audit_trouble"], written


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_refuses_unrecorded_requests_and_the_run_says_so(world: NetWorld) -> None:
    w = world
    box = w.fresh_box()
    disk = box.root / "small-disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(disk)], check=True)
    try:
        log = disk / "audit.jsonl"
        policy = w.policy("full", box=box).replace(json.dumps(str(w.audit_path("full", box))), json.dumps(str(log)))
        assert str(log) in policy
        control = w.run(
            'curl -s -o /dev/null -w "control=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/control-full"', tag="full", policy=policy, box=box
        )
        assert one(control, "control") == "200", control
        filler = disk / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)  # fill the disk but for a few bytes
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        # A log that needs a new page now (the control's log may have room left in its last page).
        full_log = disk / "audit-full.jsonl"
        full_policy = policy.replace(json.dumps(str(log)), json.dumps(str(full_log)))
        script = 'curl -s -o /dev/null -w "full=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/while-full"'
        full = w.run(script, tag="full", policy=full_policy, box=box)
        assert one(full, "full") == "403", full
        assert not any(s.path == "/while-full" for s in w.origins["http"].requests), "an unrecorded request reached the origin"
        assert "the audit log could not be written" in full.stderr.strip().splitlines()[-1], full.stderr
        filler.unlink()
        after = w.run(
            'curl -s -o /dev/null -w "after=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/after-full"', tag="full", policy=full_policy, box=box
        )
        assert one(after, "after") == "200", after
        lines = _lines(full_log)  # whole lines only
        assert [(r["path"], r["phase"]) for r in lines] == [("/after-full", "start"), ("/after-full", "end")]
        assert [r["path"] for r in _lines(log)] == ["/control-full", "/control-full"]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
