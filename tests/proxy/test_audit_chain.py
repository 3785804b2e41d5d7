"""The audit log's hash chain: every edit, removal, insertion or reordering of a line is found, and
the logs stockade writes (torn tails, rotation, two writers, an older stockade's lines) verify."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stockade.proxy import audit
from stockade.proxy.audit import AuditRecord, AuditWriter, rotated_path
from stockade.proxy.audit_chain import ZERO, seal, unsealed, verify


def _record(n: int, session: str = "s1") -> AuditRecord:
    return AuditRecord(session=session, command=["curl"], scheme="https", host=f"h{n}.test", port=443, decision="deny", rule="no allow rule")


def _log(tmp_path: Path, count: int = 8) -> Path:
    path = tmp_path / "audit.jsonl"
    writer = AuditWriter(path)
    for n in range(count):
        writer.write(_record(n))
    writer.write_event({"event": "session-end", "session": "s1", "head": writer.head})
    writer.close()
    return path


def _generations(path: Path) -> list[Path]:
    return [rotated_path(path, generation) for generation in range(audit.KEEP_ROTATED, -1, -1)]


def test_a_line_seals_and_unseals_to_the_same_bytes() -> None:
    line = _record(1).to_line()
    sealed, link = seal(line, ZERO)
    assert sealed.endswith(b'"}\n') and json.loads(sealed)["chain"] == link
    assert unsealed(sealed) == (line.rstrip(b"\n"), link)
    assert unsealed(line) is None


def test_a_log_stockade_wrote_verifies_and_its_end_line_carries_the_head(tmp_path: Path) -> None:
    path = _log(tmp_path)
    verdict = verify(_generations(path))
    assert verdict.ok and verdict.records == 9 and verdict.torn == verdict.unchained == 0, verdict
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[-1]["event"] == "session-end" and lines[-1]["head"] == lines[-2]["chain"]
    assert verdict.head == lines[-1]["chain"]


def _edits(lines: list[bytes]) -> st.SearchStrategy[tuple[str, int, int]]:
    return st.tuples(st.sampled_from(["byte", "remove", "insert", "swap", "field"]), st.integers(0, len(lines) - 1), st.integers(0, 10_000))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_edit_in_the_middle_is_found(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    path = _log(tmp_path_factory.mktemp("chain"), 8)
    lines = path.read_bytes().splitlines(keepends=True)
    how, at, salt = data.draw(_edits(lines))
    changed = list(lines)
    if how == "byte":  # any one byte of a line's text before its link, to any other printable byte
        body = unsealed(lines[at])
        assert body is not None
        spot = salt % (len(body[0]) - 1)
        new = bytes([(lines[at][spot] - 0x20 + 1 + salt % 90) % 95 + 0x20])
        if new == lines[at][spot : spot + 1]:
            return
        changed[at] = lines[at][:spot] + new + lines[at][spot + 1 :]
        try:
            json.loads(changed[at])
        except ValueError:
            if at == len(lines) - 1:
                return  # the last line made into no JSON reads as a torn tail: the chain cannot tell (documented)
            # no longer a line of JSON at all: read as torn, and the next line's link breaks instead
    elif how == "remove":
        if at == len(lines) - 1:
            return  # the tail: the chain cannot tell (documented), the end line's head can
        del changed[at]
    elif how == "insert":
        changed.insert(at, lines[salt % len(lines)])
    elif how == "swap":
        other = salt % len(lines)
        if other == at:
            return
        changed[at], changed[other] = changed[other], changed[at]
    else:  # a field rewritten as a forger would, the link kept
        record = json.loads(lines[at])
        record["decision"] = "allow" if record.get("decision") != "allow" else "deny"
        changed[at] = json.dumps(record, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(changed))
    verdict = verify(_generations(path))
    assert not verdict.ok, (how, at)
    assert "line" in verdict.broken


def test_a_forger_who_drops_the_links_of_a_line_is_found(tmp_path: Path) -> None:
    path = _log(tmp_path, 4)
    lines = path.read_bytes().splitlines(keepends=True)
    body = unsealed(lines[2])
    assert body is not None
    lines[2] = body[0] + b"\n"
    path.write_bytes(b"".join(lines))
    assert "no link among linked ones" in verify(_generations(path)).broken


def test_a_torn_line_is_skipped_and_the_next_record_chains_past_it(tmp_path: Path) -> None:
    path = _log(tmp_path, 3)
    with open(path, "ab") as handle:
        handle.write(b'{"session":"s1","command":["cu')  # a write cut short
    writer = AuditWriter(path)  # fences the torn line with a newline
    writer.write(_record(9))
    writer.close()
    verdict = verify(_generations(path))
    assert verdict.ok and verdict.torn == 1 and verdict.records == 6, verdict  # the torn line's own announcement is chained
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[5])["event"] == "torn" and json.loads(lines[5])["bytes"] == len(lines[4])


def test_lines_of_an_older_stockade_come_first_and_unchecked(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(_record(1).to_line() + _record(2).to_line())
    writer = AuditWriter(path)
    writer.write(_record(3))
    writer.close()
    verdict = verify(_generations(path))
    assert verdict.ok and verdict.unchained == 2 and verdict.records == 2, verdict  # the chain-start line, and the record
    assert json.loads(path.read_bytes().splitlines()[2])["unchained_lines"] == 2


def test_two_writers_of_one_log_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first, second = AuditWriter(path), AuditWriter(path)
    for n in range(20):
        (first if n % 3 else second).write(_record(n))
    first.close()
    second.close()
    verdict = verify(_generations(path))
    assert verdict.ok and verdict.records == 20, verdict


def test_rotated_generations_verify_and_a_replaced_one_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "MAX_LOG_BYTES", 2048)
    path = _log(tmp_path, 30)
    assert rotated_path(path, 2).exists()
    notes = [json.loads(rotated_path(path, g).read_text().splitlines()[0]) for g in (0, 1)]
    assert all(note["event"] == "rotated" and len(note["previous_head"]) == 64 for note in notes)
    verdict = verify(_generations(path))
    assert verdict.ok and len(verdict.files) == 3, verdict

    # The middle generation replaced by one written apart, each of its own lines well chained.
    stand_in = tmp_path / "other" / "audit.jsonl"
    writer = AuditWriter(stand_in)
    writer.write_event({"event": "rotated", "previous_head": "f" * 64})
    writer.write(_record(99))
    writer.close()
    os.replace(stand_in, rotated_path(path, 1))
    assert "rotation note does not name the head" in verify(_generations(path)).broken


def _stockade(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stockade.cli.main", *args], capture_output=True, text=True, env=env, timeout=60)


def test_audit_verify_says_intact_or_names_the_first_broken_line(tmp_path: Path) -> None:
    path = _log(tmp_path, 4)
    env = {**os.environ, "HOME": str(tmp_path)}
    ok = _stockade("audit", "--verify", "--log", str(path), env=env)
    assert ok.returncode == 0 and "audit log intact: 5 line(s) in 1 file(s)" in ok.stdout, ok
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], lines[2], *lines[3:]]))
    broken = _stockade("audit", "--verify", "--log", str(path), env=env)
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1, broken
    assert f"NOT intact: {path}, line 2 (time " in broken.stderr, broken.stderr
    missing = _stockade("audit", "--verify", "--log", str(tmp_path / "nothing.jsonl"), env=env)
    assert missing.returncode == 2 and "no audit log at" in missing.stderr, missing
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    odd = _stockade("audit", "--verify", "--log", str(fifo), env=env)
    assert odd.returncode == 2 and "not a regular file" in odd.stderr, odd


def test_lines_put_before_the_chain_began_are_found(tmp_path: Path) -> None:
    """An older stockade's lines are counted by the chain-start line: one added or removed shows."""
    path = tmp_path / "audit.jsonl"
    path.write_bytes(_record(1).to_line() + _record(2).to_line())
    writer = AuditWriter(path)
    writer.write(_record(3))
    writer.close()
    legit = path.read_bytes()
    path.write_bytes(_record(9).to_line() + legit)
    assert "before the chain began" in verify(_generations(path)).broken
    path.write_bytes(legit.split(b"\n", 1)[1])
    assert "before the chain began" in verify(_generations(path)).broken
    fresh = _log(tmp_path / "fresh", 2)  # a file chained from its first line has no prefix to add to
    fresh.write_bytes(_record(9).to_line() + fresh.read_bytes())
    assert "before the chain began" in verify(_generations(fresh)).broken


@pytest.mark.parametrize("junk", [b"not json", b"[1, 2]", b'{"session":"s1","decision":"allow"'])
def test_a_line_that_is_no_record_is_an_insertion_unless_a_writer_said_it_was_cut_short(tmp_path: Path, junk: bytes) -> None:
    path = _log(tmp_path, 4)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:2], junk + b"\n", *lines[2:]]))
    assert "no writer said it cut one short" in verify(_generations(path)).broken
    path.write_bytes(b"".join([*lines, junk]))  # the newest line, cut short: nothing after it yet
    verdict = verify(_generations(path))
    assert verdict.ok and verdict.torn == 1, verdict


def test_a_torn_announcement_with_no_torn_line_is_found(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(_record(1).to_line()[:30])
    writer = AuditWriter(path)
    writer.write(_record(2))
    writer.close()
    lines = path.read_bytes().splitlines(keepends=True)
    assert verify(_generations(path)).ok
    path.write_bytes(b"".join(lines[1:]))  # the torn line itself removed
    assert not verify(_generations(path)).ok


def test_a_generation_removed_between_two_others_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "MAX_LOG_BYTES", 2048)
    path = _log(tmp_path, 30)
    assert verify(_generations(path)).ok
    rotated_path(path, 1).unlink()
    assert "is missing, between" in verify(_generations(path)).broken
    rotated_path(path, 2).unlink()  # the oldest gone as rotation drops it: nothing is missing in between
    assert verify(_generations(path)).ok


def test_a_line_longer_than_any_window_still_chains(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer, other = AuditWriter(path), AuditWriter(path)
    writer.write(_record(1))
    writer.write_event({"event": "note", "text": "x" * 200_000})  # longer than one read of the tail
    other.write(_record(2))  # another writer: it must find the long line's link
    writer.write(_record(3))
    writer.close()
    other.close()
    verdict = verify(_generations(path))
    assert verdict.ok and verdict.records == 4, verdict


WRITER = """
import sys
from stockade.proxy import audit
audit.MAX_LOG_BYTES = 3000
audit.KEEP_ROTATED = int(sys.argv[5])
from stockade.proxy.audit import AuditRecord, AuditWriter
writer = AuditWriter(sys.argv[1])
for n in range(int(sys.argv[2])):
    writer.write(AuditRecord(session=sys.argv[3], command=["c"], scheme="https", host=f"h{n}.test", port=443, decision="deny", rule="r" * int(sys.argv[4])))
"""


@pytest.mark.parametrize(("rule", "keep"), [(1, 2), (2900, 200)], ids=["small-records", "records-near-the-limit"])
def test_processes_that_write_and_rotate_one_log_keep_every_chain(tmp_path: Path, rule: int, keep: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several daemons sharing a log (a baseline's [audit] log): rotation happens under the file's lock, and
    a new generation is locked before it is at the path (records near the limit rotate at every line)."""
    from stockade.proxy import audit

    monkeypatch.setattr(audit, "KEEP_ROTATED", keep)
    path = tmp_path / "audit.jsonl"
    for trial in range(6 if rule == 1 else 2):
        workers = [
            subprocess.Popen([sys.executable, "-c", WRITER, str(path), "60" if rule == 1 else "12", f"p{trial}-{n}", str(rule), str(keep)])
            for n in range(12)
        ]
        assert all(worker.wait(timeout=120) == 0 for worker in workers)
        verdict = verify(_generations(path))
        assert verdict.ok, (trial, verdict)


def test_a_new_generation_a_killed_writer_left_aside_is_removed_at_the_next_rotation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "MAX_LOG_BYTES", 600)
    path = tmp_path / "audit.jsonl"
    gone = subprocess.Popen(["true"])
    gone.wait()
    stray = tmp_path / f".audit.jsonl.rotating-{gone.pid}-abcd1234"
    stray.write_text("")
    live = tmp_path / f".audit.jsonl.rotating-{os.getppid()}-abcd1234"  # a writer still at work: left alone
    live.write_text("")
    writer = AuditWriter(path)
    for n in range(6):
        writer.write(_record(n))
    writer.close()
    assert not stray.exists() and live.exists()
    assert verify(_generations(path)).ok
