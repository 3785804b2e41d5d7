"""`stockade audit`: which log it reads, the filters, the table at 80 and wide columns, JSON and --follow lines, all escaped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from stockade.cli.audit_cmd import printable
from stockade.cli.main import main
from stockade.core.errors import ExitCode
from stockade.core.locations import Locations

T0 = "2026-01-01T00:00:00+00:00"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def record(**fields: object) -> dict[str, object]:
    return {"time": T0, "session": "s1", "decision": "allow", "host": "h.test", "port": 443, "scheme": "https", "rule": "r", **fields}


def write_log(path: Path, *records: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows(out: str) -> list[list[str]]:
    """The table's body rows as cells (a wide COLUMNS keeps each on one line)."""
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│")]


def header(out: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith("┃"))
    return [cell.strip() for cell in line.strip("┃").split("┃")]


# -- printable -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        ("", ""),
        ("plain.test", "plain.test"),
        (443, "443"),
        (1.5, "1.5"),
        (True, "True"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("line\nbreak", "line\\x0abreak"),
        ("\u202eevil", "\\u202eevil"),
        ("\x9b", "\\x9b"),
        ("naïve", "naïve"),
    ],
)
def test_printable(value: object, text: str) -> None:
    assert printable(value) == text


# -- which log ------------------------------------------------------------------------------------


def test_an_empty_or_missing_log_says_so(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = project / "none.jsonl"
    code, out, err = run_cli(capsys, "audit", "--log", str(missing))
    assert code == 2 and out == "" and err.startswith(f"stockade: error: no audit log at {missing}; runs write to ")
    code, out, _ = run_cli(capsys, "audit", "--log", str(write_log(project / "empty.jsonl")))
    assert code == 0 and out.startswith("stockade: no matching audit records in ")


def test_without_log_it_reads_the_default_log(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    write_log(locations.default_audit_log, record(host="default-log.test"))
    code, out, _ = run_cli(capsys, "audit", "--json")
    assert code == 0 and [json.loads(line)["host"] for line in out.splitlines()] == ["default-log.test"]


def test_without_log_it_reads_the_policys_log(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    mine = write_log(project / "logs" / "mine.jsonl", record(host="policy-log.test"))
    write_log(locations.default_audit_log, record(host="default-log.test"))
    (project / ".stockade.toml").write_text(f'[audit]\nlog = "{mine}"\n')
    assert run_cli(capsys, "trust")[0] == 0
    code, out, _ = run_cli(capsys, "audit", "--json")
    assert code == 0 and [json.loads(line)["host"] for line in out.splitlines()] == ["policy-log.test"]


@pytest.mark.parametrize("kind", ["folder", "fifo", "symlink"])
def test_a_log_that_is_not_a_regular_file_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    import os

    log = project / "log"
    if kind == "folder":
        log.mkdir()
    elif kind == "fifo":
        os.mkfifo(log)
    else:
        log.symlink_to(write_log(project / "real.jsonl", record()))
    code, out, err = run_cli(capsys, "audit", "--log", str(log))
    assert code == ExitCode.USAGE and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"stockade: error: cannot read audit log {log}:"), err


# -- filters ---------------------------------------------------------------------------------------


LOG = [
    record(time="2026-01-01T00:00:00+00:00", session="s1", decision="allow", host="allowed.test"),
    record(time="2026-01-01T00:00:01+00:00", session="s1", decision="deny", host="api.example.test"),
    record(time="2026-01-02T00:00:00+00:00", session="s2", decision="deny", host="other.test"),
]


@pytest.mark.parametrize(
    ("args", "hosts"),
    [
        pytest.param([], ["allowed.test", "api.example.test", "other.test"], id="all"),
        pytest.param(["--session", "s1"], ["allowed.test", "api.example.test"], id="session"),
        pytest.param(["--session", "s2"], ["other.test"], id="session-whole"),
        pytest.param(["--denied"], ["api.example.test", "other.test"], id="denied"),
        pytest.param(["--host", "other.test"], ["other.test"], id="host"),
        pytest.param(["--host", "*.example.test"], ["api.example.test"], id="host-suffix"),
        pytest.param(["--since", "2026-01-01T12:00"], ["other.test"], id="since-iso"),
        pytest.param(["--session", "s1", "--denied"], ["api.example.test"], id="together"),
    ],
)
def test_filters(project: Path, capsys: pytest.CaptureFixture[str], args: list[str], hosts: list[str]) -> None:
    log = write_log(project / "audit.jsonl", *LOG)
    code, out, _ = run_cli(capsys, "audit", "--log", str(log), "--json", *args)
    assert code == 0 and [json.loads(line)["host"] for line in out.splitlines()] == hosts


def test_a_session_is_any_start_of_its_id_that_only_it_has(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table shows 8 characters of an id; those (or fewer, or more) find the session."""
    log = write_log(
        project / "audit.jsonl",
        record(session="3f2a9c81d4e5", host="one.test"),
        record(session="3f2b0000aaaa", host="two.test"),
        record(session="77aa", host="three.test"),
    )
    code, out, _ = run_cli(capsys, "audit", "--log", str(log), "--json", "--session", "3f2a9c81")
    assert code == 0 and [json.loads(line)["host"] for line in out.splitlines()] == ["one.test"]
    code, out, err = run_cli(capsys, "audit", "--log", str(log), "--json", "--session", "3f2")
    assert (
        code == ExitCode.USAGE
        and out == ""
        and err.splitlines() == ["stockade: error: --session 3f2 starts 2 sessions' ids (3f2a9c81d4e5, 3f2b0000aaaa): give more of the one you mean"]
    )
    code, out, _ = run_cli(capsys, "audit", "--log", str(log), "--session", "nothing")
    assert code == 0 and "no matching audit records" in out


def test_the_command_and_a_long_host_stay_readable(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    host = "a-very-long-subdomain-name.of-some-registry.example.test"
    log = write_log(project / "audit.jsonl", record(host=host, command=["/bin/sh", "-c", "npm install left-pad && npm test -- --coverage"]))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    row = rows(out)[0]
    assert code == 0 and row[2] == "npm install left-pad && npm..."
    assert row[4].startswith("a-very-long-subdoma") and row[4].endswith("example.test:443") and "…" in row[4] and len(row[4]) == 40


def test_since_a_duration_keeps_only_recent_records(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stockade.proxy.audit import now_iso

    log = write_log(project / "audit.jsonl", record(host="old.test"), record(time=now_iso(), host="new.test"))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log), "--json", "--since", "10m")
    assert code == 0 and [json.loads(line)["host"] for line in out.splitlines()] == ["new.test"]


def test_audit_bad_since_is_usage(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "audit", "--log", str(project / "none.jsonl"), "--since", "yesterday-ish")
    assert code == ExitCode.USAGE and "--since" in err
    assert err.splitlines() == ["stockade: error: --since 'yesterday-ish': use a duration like 10m, 2h, 1d or a date like 2025-01-31T12:00"]


# -- the table ---------------------------------------------------------------------------------------


def test_the_wide_table_has_a_column_each(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    log = write_log(
        project / "audit.jsonl",
        record(session="0123456789abcdef", method="GET", path="/simple", bytes_up=1200, bytes_down=52000000),
    )
    code, out, err = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0 and err == ""
    assert header(out) == ["time", "session", "command", "decision", "destination", "request", "rule", "up", "down"]
    assert rows(out) == [["00:00:00", "01234567", "", "allow", "h.test:443", "GET /simple", "r", "1200", "52000000"]]


def test_an_80_column_table_folds_bytes_into_one_cell(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    log = write_log(
        project / "audit.jsonl",
        record(host="a.test", bytes_up=1200, bytes_down=52000000),
        record(host="b.test", time="2026-01-01T00:00:01+00:00"),
        record(host="c.test", time="2026-01-01T00:00:02+00:00", bytes_down=5),
    )
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0
    assert header(out) == ["time", "decision", "destination", "request", "rule", "bytes up/down"]
    assert [row[-1] for row in rows(out)] == ["1.2K/52M", "", "0/5"]


@pytest.mark.parametrize(
    ("count", "short"),
    [(0, "0"), (999, "999"), (1000, "1.0K"), (1200, "1.2K"), (9999, "10.0K"), (10_000, "10K"), (52_000_000, "52M"),
     (3 * 10**9, "3.0G"), (10**15, "1P"), ("many", "many")],
)  # fmt: skip
def test_byte_counts_are_short_at_80_columns(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                             count: object, short: str) -> None:  # fmt: skip
    monkeypatch.setenv("COLUMNS", "80")
    log = write_log(project / "audit.jsonl", record(bytes_up=count, bytes_down=1))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0 and rows(out)[0][-1] == f"{short}/1"


def test_audit_rows_are_in_time_order_and_fit_80_columns(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    log = project / "audit.jsonl"
    records = [  # written as flows end: the long download first started, last ended
        {"time": "2026-01-01T00:00:02+00:00", "session": "s1", "decision": "deny", "host": "second.test", "port": 443, "rule": "no allow rule matches"},
        {"time": "2026-01-01T00:00:01+00:00", "session": "s1", "decision": "allow", "host": "first.example.test", "port": 443,
         "method": "CONNECT", "rule": 'allow "*.example.test"', "bytes_up": 1200, "bytes_down": 52000000},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["audit", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert out.index("00:00:01") < out.index("00:00:02") and "first.example" in out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "1.2K/52M" in out


@pytest.mark.parametrize(
    ("fields", "cell"),
    [
        pytest.param({"method": "POST", "path": "/up"}, "POST /up", id="method-and-path"),
        pytest.param({"scheme": "http"}, "http", id="scheme-when-no-method"),
        pytest.param({"scheme": None}, "", id="nothing"),
        pytest.param({"method": "GET", "path": "/" + "p" * 60}, "GET /" + "p" * 39 + "...", id="long-path-cut"),
        pytest.param({"method": "GET", "path": "/" + "p" * 39}, "GET /" + "p" * 39, id="path-of-forty"),
        pytest.param({"method": "M" * 50}, "M" * 40, id="long-method-cut"),
    ],
)
def test_the_request_cell(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                          fields: dict[str, object], cell: str) -> None:  # fmt: skip
    monkeypatch.setenv("COLUMNS", "300")
    log = write_log(project / "audit.jsonl", record(**fields))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0 and rows(out)[0][5] == cell


@pytest.mark.parametrize(("stamp", "cell"), [("2026-01-01T12:34:56.789+00:00", "12:34:56"), ("sometime", "sometime"), ("", "")])
def test_the_time_cell_is_the_time_of_day(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stamp: str, cell: str
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    log = write_log(project / "audit.jsonl", record(time=stamp))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0 and rows(out)[0][0] == cell


def test_a_flow_with_no_end_gets_a_note_column(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    log = write_log(
        project / "audit.jsonl",
        record(host="done.test", flow="f1", phase="start"),
        record(host="done.test", flow="f1"),
        record(host="cut.test", flow="f2", phase="start", time="2026-01-01T00:00:05+00:00"),
    )
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0
    assert header(out)[-1] == "note"
    assert [(row[4], row[-1]) for row in rows(out)] == [
        ("done.test:443", ""),
        ("cut.test:443", "incomplete: no end record (the daemon stopped under it)"),
    ]


def test_a_rotation_that_dropped_records_is_noted(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(project / "audit.jsonl", record())
    note = {"event": "rotated", "dropped": {"file": str(project / "audit.jsonl.3"), "bytes": 4096, "last_record": T0}}
    write_log(project / "audit.jsonl.1", note, record(host="older.test"))
    code, out, err = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0 and "older.test" in out
    assert err.splitlines() == [
        f"stockade: note: older records were deleted when the log was rotated: {project / 'audit.jsonl.3'} (4096 bytes, records up to {T0})"
    ]
    note["dropped"] = {"file": "x", "bytes": 1}
    write_log(project / "audit.jsonl.1", note)
    assert "records up to an unknown time" in run_cli(capsys, "audit", "--log", str(log))[2]


def test_audit_prints_records_literally(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    log = project / "audit.jsonl"
    records = [
        {
            "time": "2026-01-01T00:00:00+00:00",
            "session": "s1",
            "decision": "allow",
            "host": "allowed.test",
            "port": 443,
            "scheme": "https",
            "rule": "allowed.test",
        },
        {
            "time": "2026-01-01T00:00:01+00:00",
            "session": "s1",
            "decision": "deny",
            "host": "[red]x\x1b]52;c;aGk=\x07.test",
            "port": 80,
            "scheme": "http",
            "rule": "no allow rule matches",
        },
        {"time": "2026-01-01T00:00:02+00:00", "session": "s2", "decision": "deny", "host": "other.test", "port": 443},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log), "--session", "s1", "--denied")
    assert code == 0 and "[red]x\\x1b]52;c;aGk=\\x07.test" in out and "\x1b" not in out
    assert "allowed.test" not in out and "other.test" not in out
    code, out, _ = run_cli(capsys, "audit", "--log", str(log), "--json", "--host", "allowed.test")
    assert [json.loads(line)["host"] for line in out.splitlines()] == ["allowed.test"]


CONTROLS = "".join(chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]) + "\x1b[1A\x1b[2K\x1b]0;title\x07"


@pytest.mark.parametrize("field", ["method", "scheme", "host", "path", "rule", "session", "time", "decision"])
def test_audit_shows_every_control_in_every_field_as_visible_text(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    """A sandbox chooses the method, host and path it sends; none of it may reach the terminal raw."""
    monkeypatch.setenv("COLUMNS", "2000")
    log = project / "audit.jsonl"
    record = {
        "time": "2026-01-01T00:00:00+00:00",
        "session": "s1",
        "decision": "deny",
        "host": "h.test",
        "port": 80,
        "scheme": "http",
        "method": "GET",
        "path": "/",
        "rule": "r",
    }
    record[field] = f"A{CONTROLS}Z"
    log.write_text(json.dumps(record) + "\n")
    for extra in ([], ["--json"]):
        code, out, _ = run_cli(capsys, "audit", "--log", str(log), *extra)
        assert code == 0
        shown = out.replace("\n", "")
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in shown), (field, extra, repr(out[:300]))


# -- JSON and --follow -------------------------------------------------------------------------------


def test_json_is_one_ascii_record_a_line_in_file_order(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    later = record(time="2026-01-01T00:00:09+00:00", host="later.test")
    earlier = record(host="naïve\u202e.test")
    log = write_log(project / "audit.jsonl", later, earlier)
    code, out, err = run_cli(capsys, "audit", "--log", str(log), "--json")
    assert code == 0 and err == "" and out.isascii()
    assert [json.loads(line) for line in out.splitlines()] == [later, earlier]  # not sorted: as written


def test_json_of_nothing_prints_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "audit", "--log", str(write_log(project / "empty.jsonl")), "--json") == (0, "", "")


@pytest.fixture
def followed(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """follow_records replaced by one pass over the log: --follow returns once it is read."""
    from stockade.proxy import audit

    calls: list[object] = []

    def once(path: object, where: audit.AuditFilter) -> Iterator[dict[str, object]]:
        calls.append((path, where))
        return audit.read_records(path, where)  # type: ignore[arg-type]

    monkeypatch.setattr(audit, "follow_records", once)
    return calls


def test_follow_prints_one_plain_line_a_record(project: Path, capsys: pytest.CaptureFixture[str], followed: list[object]) -> None:
    log = write_log(
        project / "audit.jsonl",
        record(session="0123456789", decision="deny", host="x\x1b.test", method="GET", path="/p", rule="no rule", bytes_up=3),
        record(host="quiet.test", scheme=None, rule=None),
    )
    code, out, err = run_cli(capsys, "audit", "--log", str(log), "--follow", "--denied")
    assert code == 0 and err == ""
    assert out.splitlines() == ["00:00:00  01234567  deny  x\\x1b.test:443  GET /p  no rule  3"]
    from stockade.proxy.audit import AuditFilter

    assert followed == [(log, AuditFilter(denied_only=True))]


def test_follow_with_json_prints_records(project: Path, capsys: pytest.CaptureFixture[str], followed: list[object]) -> None:
    log = write_log(project / "audit.jsonl", record(host="a.test"))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log), "-f", "--json")
    assert code == 0 and [json.loads(line)["host"] for line in out.splitlines()] == ["a.test"] and len(followed) == 1


def test_the_table_says_the_day(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    one_day = write_log(project / "one.jsonl", *LOG[:2])
    _code, out, _ = run_cli(capsys, "audit", "--log", str(one_day))
    assert "records of 2026-01-01 (UTC)" in out and [row[0] for row in rows(out)] == ["00:00:00", "00:00:01"]
    two_days = write_log(project / "two.jsonl", *LOG)
    _code, out, _ = run_cli(capsys, "audit", "--log", str(two_days))
    assert "records of" not in out and [row[0] for row in rows(out)] == ["01-01 00:00:00", "01-01 00:00:01", "01-02 00:00:00"]


def test_a_tunnel_shows_what_it_carried(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    log = write_log(
        project / "audit.jsonl", record(method="CONNECT", scheme="ssh", host="git.test", port=22), record(method="GET", scheme="https", path="/x")
    )
    _code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert [row[5] for row in rows(out)] == ["ssh", "GET /x"]


def test_piped_without_columns_the_table_is_not_folded_at_a_guess(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer's `stockade audit | less` broke words at 80 columns and dropped the session and command:
    a pipe now gets whole rows; an 80-column terminal keeps its headers whole and says what it leaves out."""
    monkeypatch.delenv("COLUMNS", raising=False)
    log = write_log(project / "audit.jsonl", record(rule="no allow rule matches, and a long explanation " * 3))
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert code == 0 and header(out)[:3] == ["time", "session", "command"], out
    assert "no allow rule matches, and a long explanation no allow rule matches" in out, out  # one line, not folded
    monkeypatch.setenv("COLUMNS", "80")  # control: a narrow width asked for is kept, and says what it leaves out
    code, out, _ = run_cli(capsys, "audit", "--log", str(log))
    assert "session and command: a wider terminal, or --json" in out and header(out)[1] == "decision", out
