from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from stockade.proxy.audit import AuditError, AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.rules.decide import Decision


def test_register_lookup_end(make_spec: Callable[..., SessionSpec]) -> None:
    registry = Registry()
    spec = make_spec()
    token, session = registry.register(spec)
    assert len(token) >= 40
    assert registry.lookup(token) is session and registry.get(spec.session_id) is session
    assert registry.lookup(token + "x") is None and len(registry) == 1
    assert registry.end(spec.session_id) is session
    assert session.ended and session.stopped == "ended with the run"
    assert registry.lookup(token) is None and len(registry) == 0
    assert registry.end(spec.session_id) is None


def test_tokens_are_kept_hashed(make_spec: Callable[..., SessionSpec]) -> None:
    registry = Registry()
    token, _ = registry.register(make_spec())
    assert token not in repr(vars(registry))


def test_duplicate_id_and_bad_rules_are_refused(make_spec: Callable[..., SessionSpec]) -> None:
    registry = Registry()
    spec = make_spec()
    registry.register(spec)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(spec)
    with pytest.raises(ValueError, match="wildcard"):
        registry.register(make_spec(allow=("*",)))
    with pytest.raises(ValueError, match="network mode"):
        registry.register(make_spec(mode="sometimes"))


def test_unwritable_audit_path_is_refused(make_spec: Callable[..., SessionSpec], tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(AuditError):
        Registry().register(make_spec(audit_path=str(tmp_path / "file" / "audit.jsonl")))


def test_sessions_share_a_writer_per_file_and_replace_a_broken_one(make_spec: Callable[..., SessionSpec]) -> None:
    registry = Registry()
    _, a = registry.register(make_spec())
    _, b = registry.register(make_spec())
    assert a.writer is b.writer
    a.writer.broken = "disk full"
    _, c = registry.register(make_spec())
    assert c.writer is not a.writer and c.stopped is None
    assert a.stopped and b.stopped


def test_records_after_the_end_are_still_written(make_spec: Callable[..., SessionSpec]) -> None:
    registry = Registry()
    spec = make_spec()
    _, session = registry.register(spec)
    registry.end(spec.session_id)
    record = AuditRecord(session=spec.session_id, command=[], scheme="tls", host="allowed.test", port=443, decision="allow", rule="r")
    session.writer.write(record)  # a tunnel cut by the end reports afterwards
    lines = Path(spec.audit_path).read_text().splitlines()
    assert len(lines) == 2 and '"event":"session-end"' in lines[0] and '"host":"allowed.test"' in lines[1]


def test_denial_summary_counts_per_destination(make_spec: Callable[..., SessionSpec]) -> None:
    _, session = Registry().register(make_spec(origin="/p/.stockade.toml"))
    decision = Decision(False, "no allow rule matches", 'allow = ["denied.test"]', "denied.test")
    session.note_denial("denied.test", 443, decision)
    session.note_denial("denied.test", 443, decision)
    session.note_denial("denied.test", 80, decision)
    assert session.denial_summary() == [
        {
            "host": "denied.test",
            "port": 443,
            "rule": "no allow rule matches",
            "hint": 'allow = ["denied.test"]',
            "count": 2,
            "origin": "/p/.stockade.toml",
        },
        {
            "host": "denied.test",
            "port": 80,
            "rule": "no allow rule matches",
            "hint": 'allow = ["denied.test"]',
            "count": 1,
            "origin": "/p/.stockade.toml",
        },
    ]


def _deny(session, host: str, path: str = "/x") -> None:  # type: ignore[no-untyped-def]
    from stockade.proxy.filter.tracking import Tracked

    record = AuditRecord(
        session=session.spec.session_id,
        command=["c"],
        scheme="http",
        host=host,
        port=80,
        decision="deny",
        rule="no allow rule matches",
        method="GET",
        path=path,
    )
    assert Tracked(session, record).deny(Decision(False, "no allow rule matches", "", host))


def test_a_denial_flood_grows_the_log_by_a_bounded_amount(make_spec: Callable[..., SessionSpec], tmp_path: Path) -> None:
    """A sandbox pipelining denied requests (95 MB/s of log before): every denial has its own line
    up to the budget, then they are counted, one line per destination, and one for the rest."""
    import json

    from stockade.proxy.filter.sessions import MAX_COUNTED, MAX_DENIAL_LINES, OVER_BUDGET

    registry = Registry()
    same = make_spec(session_id="same", audit_path=str(tmp_path / "same.jsonl"))
    _, session = registry.register(same)
    for number in range(MAX_DENIAL_LINES + 5000):
        _deny(session, "denied.test", path=f"/{number}" + "p" * 70000)
    registry.end(same.session_id)
    lines = [r for line in (tmp_path / "same.jsonl").read_text().splitlines() if "event" not in (r := json.loads(line))]
    assert len(lines) == MAX_DENIAL_LINES + 1 and all(r["repeats"] == 0 for r in lines[:-1])
    assert (lines[-1]["host"], lines[-1]["repeats"]) == ("denied.test", 5000) and lines[-1]["last_time"] >= lines[-1]["time"]
    assert (tmp_path / "same.jsonl").stat().st_size < (MAX_DENIAL_LINES + 1) * 3000

    spread = make_spec(session_id="spread", audit_path=str(tmp_path / "spread.jsonl"))
    _, session = registry.register(spread)
    extra = MAX_COUNTED + 700
    for number in range(MAX_DENIAL_LINES + extra):
        _deny(session, f"n{number}.denied.test")
    registry.end(spread.session_id)
    lines = [r for line in (tmp_path / "spread.jsonl").read_text().splitlines() if "event" not in (r := json.loads(line))]
    assert len(lines) == MAX_DENIAL_LINES + MAX_COUNTED + 1 and len(session.denials) == MAX_COUNTED
    assert (lines[-1]["host"], lines[-1]["rule"], lines[-1]["repeats"]) == ("*", OVER_BUDGET, 700)


def test_credential_denials_of_different_places_are_told_apart(make_spec: Callable[..., SessionSpec]) -> None:
    _, session = Registry().register(make_spec())
    for where in ("in the path", "in the header x-key", "in the path"):
        session.note_denial("api.test", 443, Decision(False, f"credential T {where}, where it may not travel", "", "api.test"))
    assert [(d["rule"], d["count"]) for d in session.denial_summary()] == [
        ("credential T in the path, where it may not travel", 2),
        ("credential T in the header x-key, where it may not travel", 1),
    ]
