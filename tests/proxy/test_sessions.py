from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from stockade.proxy.audit import AuditError, AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.decide import Decision
from stockade.proxy.sessions import Registry


def test_register_lookup_end(make_spec: Callable[..., SessionSpec]) -> None:
    registry = Registry()
    spec = make_spec()
    token, session = registry.register(spec)
    assert len(token) >= 40
    assert registry.lookup(token) is session and registry.get(spec.session_id) is session
    assert registry.lookup(token + "x") is None and len(registry) == 1
    assert registry.end(spec.session_id) is session
    assert session.ended and session.stopped == "session ended"
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
    assert Path(spec.audit_path).read_text().count("\n") == 1


def test_denial_summary_counts_per_destination(make_spec: Callable[..., SessionSpec]) -> None:
    _, session = Registry().register(make_spec(origin="/p/.stockade.toml"))
    decision = Decision(False, "no allow rule matches", 'allow = ["denied.test"]', "denied.test")
    session.note_denial("denied.test", 443, decision)
    session.note_denial("denied.test", 443, decision)
    session.note_denial("denied.test", 80, decision)
    assert session.denial_summary() == [
        {"host": "denied.test", "port": 443, "rule": "no allow rule matches", "hint": 'allow = ["denied.test"]', "count": 2, "origin": "/p/.stockade.toml"},
        {"host": "denied.test", "port": 80, "rule": "no allow rule matches", "hint": 'allow = ["denied.test"]', "count": 1, "origin": "/p/.stockade.toml"},
    ]
