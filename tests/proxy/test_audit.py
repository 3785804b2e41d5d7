from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stockade.proxy.audit import (
    REDACTED,
    AuditError,
    AuditFilter,
    AuditRecord,
    AuditWriter,
    follow_records,
    now_iso,
    parse_since,
    read_records,
    redact_path,
)

FIELDS = {
    "time",
    "session",
    "command",
    "scheme",
    "host",
    "port",
    "method",
    "path",
    "sni",
    "decision",
    "rule",
    "bytes_up",
    "bytes_down",
    "duration_ms",
    "error",
    "address",
    "hint",
    "phase",
    "flow",
    "repeats",
    "last_time",
}


def record(**overrides: object) -> AuditRecord:
    values: dict[str, object] = dict(
        session="s1",
        command=["curl", "https://allowed.test/"],
        scheme="http",
        host="allowed.test",
        port=80,
        decision="allow",
        rule='allow "allowed.test"',
    )
    values.update(overrides)
    return AuditRecord(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "path, expected",
    [
        pytest.param("/a/b", "/a/b", id="no query"),
        pytest.param("/?q=1&page=2", "/?q=1&page=2", id="harmless keys kept"),
        pytest.param("/?token=abc", f"/?token={REDACTED}", id="token"),
        pytest.param("/?access_token=abc&x=1", f"/?access_token={REDACTED}&x=1", id="access_token"),
        pytest.param("/?KEY=abc", f"/?KEY={REDACTED}", id="upper-case key"),
        pytest.param("/?api-key=abc", f"/?api-key={REDACTED}", id="dash spelling"),
        pytest.param("/?api%5Fkey=abc", f"/?api%5Fkey={REDACTED}", id="percent-encoded key"),
        pytest.param("/?sig=1&signature=2", f"/?sig={REDACTED}&signature={REDACTED}", id="signatures"),
        pytest.param(
            "/?password=p&secret=s&auth=a&code=c", f"/?password={REDACTED}&secret={REDACTED}&auth={REDACTED}&code={REDACTED}", id="all others"
        ),
        pytest.param("/?client_secret=s&refresh_token=t", f"/?client_secret={REDACTED}&refresh_token={REDACTED}", id="suffixes"),
        pytest.param("/?X-Amz-Signature=s", f"/?X-Amz-Signature={REDACTED}", id="aws signature"),
        pytest.param("/?token", "/?token", id="key without value"),
        pytest.param("/p?a=1#frag?token=x", "/p?a=1", id="fragment dropped"),
        pytest.param("/?keyboard=1", "/?keyboard=1", id="prefix is not a match"),
    ],
)
def test_redact_path(path: str, expected: str) -> None:
    assert redact_path(path) == expected


def test_record_has_every_field(tmp_path: Path) -> None:
    data = json.loads(record().to_line())
    assert set(data) == FIELDS


@pytest.mark.parametrize(
    "host",
    [
        pytest.param('a\n{"decision":"allow"}.test', id="newline and json"),
        pytest.param("a\x1b]52;c;aGk=\x07.test", id="terminal escape"),
        pytest.param("a\r\u2028\u0085.test", id="other line breaks"),
        pytest.param("[red]x[/red].test", id="markup"),
    ],
)
def test_record_is_one_escaped_line(host: str) -> None:
    line = record(host=host, decision="deny").to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert all(b >= 0x20 and b < 0x7F for b in line[:-1])
    data = json.loads(line)
    assert data["host"] == host and data["decision"] == "deny"


def test_writer_appends_and_creates_private_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "audit.jsonl"
    writer = AuditWriter(path)
    writer.write(record(host="a.test"))
    writer.write(record(host="b.test"))
    assert [r["host"] for r in read_records(path)] == ["a.test", "b.test"]
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    writer.close()


def test_closed_writer_reopens(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    writer.close()
    writer.write(record(host="late.test"))
    assert [r["host"] for r in read_records(path)] == ["late.test"]


def test_writer_reopens_a_deleted_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    writer.write(record(host="a.test"))
    path.unlink()
    writer.write(record(host="b.test"))
    assert [r["host"] for r in read_records(path)] == ["b.test"]


def test_failed_write_raises_and_stays_broken(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    path.unlink()
    path.mkdir()  # the path is now a directory: reopening must fail
    with pytest.raises(AuditError, match="cannot write audit log"):
        writer.write(record())
    path.rmdir()
    with pytest.raises(AuditError):
        writer.write(record())  # a lost record is not forgotten
    assert writer.broken


def test_full_disk_raises() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    writer = AuditWriter.__new__(AuditWriter)
    writer.path, writer.broken, writer._fd, writer._size = Path("/dev/full"), None, os.open("/dev/full", os.O_WRONLY), 0
    writer._ino = (os.stat("/dev/full").st_dev, os.stat("/dev/full").st_ino)
    writer._link, writer._link_at, writer.head = "0" * 64, 0, "0" * 64
    with pytest.raises(AuditError, match="No space"):
        writer.write(record())
    assert writer.broken


def test_unopenable_path_raises(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(AuditError, match="cannot open audit log"):
        AuditWriter(tmp_path / "file" / "audit.jsonl")


def test_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (tmp_path / "audit.jsonl").symlink_to(target)
    with pytest.raises(AuditError):
        AuditWriter(tmp_path / "audit.jsonl")
    assert not target.exists()


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    script = (
        "import sys\n"
        "from stockade.proxy.audit import AuditWriter, AuditRecord\n"
        "w = AuditWriter(sys.argv[1])\n"
        "for i in range(300):\n"
        "    w.write(AuditRecord(session=sys.argv[2], command=['x'*500], scheme='http', host='h.test', port=80, decision='allow', rule='r'))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"s{i}"]) for i in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1200
    assert all(json.loads(line)["command"] == ["x" * 500] for line in lines)


def test_filters(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    old = now_iso(time.time() - 7200)
    writer.write(record(session="a", host="allowed.test", time=old))
    writer.write(record(session="a", host="denied.test", decision="deny"))
    writer.write(record(session="b", host="x.wild.test"))
    writer.write(record(session="b", host="xn--bcher-kva.test", decision="deny"))
    with path.open("a") as handle:
        handle.write("not json\n[1, 2]\n")

    def hosts(**kw: object) -> list[object]:
        return [r["host"] for r in read_records(path, AuditFilter(**kw))]  # type: ignore[arg-type]

    assert hosts() == ["allowed.test", "denied.test", "x.wild.test", "xn--bcher-kva.test"]
    assert hosts(session="a") == ["allowed.test", "denied.test"]
    assert hosts(denied_only=True) == ["denied.test", "xn--bcher-kva.test"]
    assert hosts(host="Allowed.Test.") == ["allowed.test"]
    assert hosts(host="*.wild.test") == ["x.wild.test"]
    assert hosts(host="bücher.test") == ["xn--bcher-kva.test"]
    assert hosts(since=datetime.now(UTC) - timedelta(hours=1)) == ["denied.test", "x.wild.test", "xn--bcher-kva.test"]
    assert hosts(session="b", denied_only=True) == ["xn--bcher-kva.test"]


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert list(read_records(tmp_path / "nothing.jsonl")) == []


def test_follow_sees_appends_and_rotation(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    writer.write(record(host="first.test"))
    seen: list[object] = []
    done = threading.Event()

    def appender() -> None:
        time.sleep(0.1)
        writer.write(record(host="second.test", decision="deny"))
        time.sleep(0.1)
        os.rename(path, tmp_path / "audit.jsonl.1")
        writer.write(record(host="third.test", decision="deny"))  # the writer notices and reopens
        time.sleep(0.3)
        done.set()

    thread = threading.Thread(target=appender)
    thread.start()
    for rec in follow_records(path, AuditFilter(denied_only=True), poll=0.02, stop=done.is_set):
        seen.append(rec["host"])
    thread.join()
    assert seen == ["second.test", "third.test"]


def test_follow_waits_for_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    line = record(host="slow.test").to_line()
    path.write_bytes(line[:10])
    seen: list[object] = []
    polls = iter(range(1000))

    def stop() -> bool:
        n = next(polls)
        if n == 2:
            with path.open("ab") as f:
                f.write(line[10:])
        return n > 4

    for rec in follow_records(path, poll=0.001, stop=stop):
        seen.append(rec["host"])
    assert seen == ["slow.test"]


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("30s", timedelta(seconds=30), id="seconds"),
        pytest.param("10m", timedelta(minutes=10), id="minutes"),
        pytest.param("2h", timedelta(hours=2), id="hours"),
        pytest.param("1d", timedelta(days=1), id="days"),
        pytest.param("1.5h", timedelta(minutes=90), id="fraction"),
    ],
)
def test_parse_since_durations(text: str, expected: timedelta) -> None:
    now = datetime(2025, 1, 31, 12, tzinfo=UTC)
    assert parse_since(text, now) == now - expected


def test_parse_since_dates() -> None:
    assert parse_since("2025-01-31T12:00") == datetime(2025, 1, 31, 12, tzinfo=UTC)
    assert parse_since("2025-01-31T12:00+01:00").utcoffset() == timedelta(hours=1)
    with pytest.raises(AuditError, match="duration"):
        parse_since("yesterday")


def test_reader_is_lean() -> None:
    code = "import sys, stockade.proxy.audit; print(sorted(m for m in sys.modules if m.split('.')[0] in ('mitmproxy', 'rich', 'typer', 'psutil')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_torn_last_line_is_fenced_and_skipped(tmp_path: Path) -> None:
    """A write cut short (full disk, killed daemon) leaves half a line; the next writer starts a new one."""
    path = tmp_path / "audit.jsonl"
    whole = record(host="a.test").to_line()
    path.write_bytes(whole + record(host="torn.test").to_line()[:25])
    writer = AuditWriter(path)
    writer.write(record(host="b.test"))
    writer.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[0] == whole[:-1] and lines[-1] == b"" and json.loads(lines[3])["host"] == "b.test"
    assert json.loads(lines[2])["event"] == "chain-start"  # the lines before the chain (these are unchained) are counted
    assert [r["host"] for r in read_records(path)] == ["a.test", "b.test"]
    control = tmp_path / "clean.jsonl"
    control.write_bytes(whole)
    AuditWriter(control).write(record(host="b.test"))
    assert b"\n\n" not in control.read_bytes() and control.read_bytes().count(b"\n") == 3, "a clean file gets no blank line"


def test_a_flow_with_a_start_and_no_end_is_shown_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    writer.write(record(host="done.test", phase="start", flow="f1"))
    writer.write(record(host="cut.test", phase="start", flow="f2"))
    writer.write(record(host="done.test", phase="end", flow="f1", bytes_down=10))
    writer.write(record(host="denied.test", decision="deny"))
    writer.close()
    shown = list(read_records(path))
    assert [(r["host"], r.get("incomplete", False)) for r in shown] == [("done.test", False), ("denied.test", False), ("cut.test", True)]


def test_long_fields_are_cut_and_the_record_says_which() -> None:
    line = record(host="h" * 5000, path="/" + "p" * 70000, method="M" * 100, command=["x" * 100000, "y"]).to_line()
    data = json.loads(line)
    assert len(line) < 8000
    assert len(data["host"]) == 300 and len(data["path"]) == 2048 and len(data["method"]) == 40
    assert sum(len(word) for word in data["command"]) == 2048
    assert sorted(data["truncated"]) == ["command", "host", "method", "path"]
    plain = json.loads(record(host="a.test", path="/ok").to_line())
    assert "truncated" not in plain and plain["path"] == "/ok"


def _record(i: int, **extra: object) -> AuditRecord:
    return AuditRecord(
        session="s", command=["x"], scheme="http", host=f"h{i}.test", port=80, decision="allow", rule="r", path="/" + "p" * 200, **extra
    )  # type: ignore[arg-type]


def test_a_log_past_its_size_is_rotated_and_the_loss_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox flooding allowed requests grew the log without bound: it now keeps the current
    file and KEEP_ROTATED older ones, each at most MAX_LOG_BYTES, and says what it dropped."""
    from stockade.proxy import audit

    monkeypatch.setattr(audit, "MAX_LOG_BYTES", 4096)
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    for i in range(200):
        writer.write(_record(i))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert all(p.stat().st_size <= 4096 for p in tmp_path.iterdir())
    first = json.loads(path.read_bytes().splitlines()[0])
    assert first["event"] == "rotated" and first["previous"] == "audit.jsonl.1"
    assert first["dropped"]["file"] == "audit.jsonl.2" and first["dropped"]["bytes"] > 0 and first["dropped"]["last_record"]
    shown = [r["host"] for r in read_records(path)]
    assert shown == [f"h{i}.test" for i in range(200 - len(shown), 200)]  # the newest, oldest first, no notes
    assert 10 < len(shown) < 200


def test_a_flow_that_spans_a_rotation_reads_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.proxy import audit

    monkeypatch.setattr(audit, "MAX_LOG_BYTES", 4096)
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    writer.write(_record(0, phase="start", flow="f1"))
    for i in range(1, 12):
        writer.write(_record(i))
    writer.write(_record(0, flow="f1", bytes_down=5))
    assert (tmp_path / "audit.jsonl.1").exists()  # the control: it did rotate between start and end
    records = list(read_records(path))
    assert [r for r in records if r.get("flow") == "f1"] == [records[-1]] and not any(r.get("incomplete") for r in records)


def test_below_the_size_nothing_rotates(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    for i in range(100):
        writer.write(_record(i))
    assert [p.name for p in tmp_path.iterdir()] == ["audit.jsonl"]
    assert len(list(read_records(path))) == 100


def test_a_planted_generation_is_neither_followed_nor_waited_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A custom log in a writable folder: the sandbox planted audit.jsonl.2 as a FIFO (reading
    it, `stockade audit` and the daemon's rotation note waited forever) and audit.jsonl.1 as
    a link to records of its own. Only regular files are read, and never through a link."""
    from stockade.proxy import audit

    path = tmp_path / "audit.jsonl"
    AuditWriter(path).write(_record(1))
    forged = tmp_path / "forged.jsonl"
    forged.write_text(json.dumps({"time": now_iso(), "session": "s", "host": "forged.test", "decision": "allow"}) + "\n")
    (tmp_path / "audit.jsonl.1").symlink_to(forged)
    os.mkfifo(tmp_path / "audit.jsonl.2")
    done: list[object] = []
    reader = threading.Thread(target=lambda: done.append(_hosts_or_error(path)), daemon=True)
    reader.start()
    reader.join(5)
    assert done, "read_records waited on a FIFO"
    assert isinstance(done[0], AuditError) and "not a regular file" in str(done[0])
    monkeypatch.setattr(audit, "MAX_LOG_BYTES", 1)
    writer = AuditWriter(path)
    rotation = threading.Thread(target=lambda: writer.write(_record(2)), daemon=True)
    rotation.start()
    rotation.join(5)
    assert not rotation.is_alive(), "the rotation waited on a FIFO"


def _hosts_or_error(path: Path) -> object:
    try:
        return [r.get("host") for r in read_records(path)]
    except AuditError as exc:
        return exc


def test_stockade_audit_says_what_rotation_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from stockade.cli.main import main
    from stockade.proxy import audit

    monkeypatch.setattr(audit, "MAX_LOG_BYTES", 4096)
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    for i in range(200):
        writer.write(
            AuditRecord(session="s", command=["x"], scheme="http", host=f"h{i}.test", port=80, decision="allow", rule="r", path="/" + "p" * 200)
        )
    assert main(["audit", "--log", str(path), "--json"]) == 0
    assert main(["audit", "--log", str(path)]) == 0
    err = capsys.readouterr().err
    assert "older records were deleted when the log was rotated: audit.jsonl.2" in err, err
    small = tmp_path / "small.jsonl"  # the control: a log that never rotated says nothing
    AuditWriter(small).write(AuditRecord(session="s", command=["x"], scheme="http", host="a.test", port=80, decision="allow", rule="r"))
    assert main(["audit", "--log", str(small)]) == 0
    assert "rotated" not in capsys.readouterr().err


def test_generations_are_the_log_and_its_rotations() -> None:
    from stockade.proxy.audit import generations

    assert generations(None) == [] and generations("") == []
    assert generations("/logs/a.jsonl") == ["/logs/a.jsonl", "/logs/a.jsonl.1", "/logs/a.jsonl.2"]


CUT_SHORT = """
import os, resource, signal, sys
from pathlib import Path
from stockade.proxy.audit import AuditError, AuditWriter, AuditRecord
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is cut short (EFBIG), as on a full disk
path = Path(sys.argv[1])
writer = AuditWriter(path)
writer.write(AuditRecord(session="s", command=["c"], scheme="http", host="first.test", port=80, decision="allow", rule="r"))
limit = path.stat().st_size + 100  # room for part of the next record only
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:
    writer.write(AuditRecord(session="s", command=["c"], scheme="http", host="second.test" + "x" * 400, port=80, decision="allow", rule="r"))
except AuditError as error:
    print("refused", error)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
AuditWriter(path).write(AuditRecord(session="s", command=["c"], scheme="http", host="third.test", port=80, decision="allow", rule="r"))
"""


def test_a_record_cut_short_is_cut_back_and_the_next_lands_on_its_own_line(tmp_path: Path) -> None:
    """Issue 33: a full disk left one record cut mid-JSON, and every JSON-lines reader stopped there."""
    path = tmp_path / "audit.jsonl"
    done = subprocess.run([sys.executable, "-c", CUT_SHORT, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "refused" in done.stdout, done
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    hosts = [json.loads(line)["host"] for line in lines[:-1]]  # every line whole JSON
    assert hosts == ["first.test", "third.test"]


@pytest.mark.parametrize(
    ("words", "shown"),
    [
        (["curl", "-H", "Authorization: Bearer abc"], ["curl", "-H", "Authorization: REDACTED"]),
        (["tool", "--api-key=xyz", "--password", "hunter2", "plain"], ["tool", "--api-key=REDACTED", "--password", "REDACTED", "plain"]),
        (["env", "GITHUB_TOKEN=ghp_x", "AWS_SECRET_ACCESS_KEY=wJal"], ["env", "GITHUB_TOKEN=REDACTED", "AWS_SECRET_ACCESS_KEY=REDACTED"]),
        (["git", "clone", "https://bob:pw@git.example/x"], ["git", "clone", "https://REDACTED@git.example/x"]),
        (["echo", "ghp_abcdefghijklmnopqrstuvwxyz"], ["echo", "REDACTED"]),
        (["curl", "https://a.test/x?token=1&q=2"], ["curl", "https://a.test/x?token=REDACTED&q=2"]),
        (["curl", "https://example.com/a:b", "-X", "POST"], ["curl", "https://example.com/a:b", "-X", "POST"]),
        (["curl", "-u", "bob:pw", "--user", "ann:x", "-u", "alone"], ["curl", "-u", "bob:REDACTED", "--user", "ann:REDACTED", "-u", "alone"]),
        (["mysql", "-pPW", "-h", "db"], ["mysql", "REDACTED", "-h", "db"]),
        (["sshpass", "-p", "pw", "ssh", "host"], ["sshpass", "-p", "REDACTED", "ssh", "host"]),
        (["docker", "login", "-p", "pw"], ["docker", "login", "-p", "REDACTED"]),
        (["docker", "run", "-p", "8080:80", "img"], ["docker", "run", "-p", "REDACTED", "img"]),
        (["mkdir", "-p", "build"], ["mkdir", "-p", "build"]),
        (
            ["env", "OPENAI_KEY=sk", "--auth", "x", "--private-key=k", "--pat", "p"],
            ["env", "OPENAI_KEY=REDACTED", "--auth", "REDACTED", "--private-key=REDACTED", "--pat", "REDACTED"],
        ),
        (["ls", "--author", "path"], ["ls", "--author", "path"]),
        (
            ["/bin/sh", "-c", 'HP=1\ncurl -H "Authorization: Bearer s3" --token abc "http://a/?api_key=k" X_SECRET=v; echo ok'],
            ["/bin/sh", "-c", 'HP=1\ncurl -H "Authorization: REDACTED" --token REDACTED "http://a/?api_key=REDACTED" X_SECRET=REDACTED; echo ok'],
        ),
    ],
)
def test_a_command_s_credentials_never_reach_the_log(words: list[str], shown: list[str]) -> None:
    from stockade.proxy.audit import redact_words

    assert redact_words(words) == shown


def test_a_session_s_records_carry_its_command_redacted() -> None:
    from stockade.proxy.control import SessionSpec

    spec = SessionSpec("s1", ["tool", "--password=hunter2"], "/")
    assert spec.who()["command"] == ["tool", "--password=REDACTED"] and spec.command == ["tool", "--password=hunter2"]
