from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from stockade.proxy.audit import AuditRecord
from stockade.proxy.control import SessionSpec
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.rules.decide import Decision


def tracked(make_spec: Callable[..., SessionSpec]) -> Tracked:
    spec = make_spec()
    _token, session = Registry().register(spec)
    record = AuditRecord(session=spec.session_id, command=spec.command, scheme="http", host="denied.test", port=80, decision="allow", rule="")
    return Tracked(session, record)


def lines(path: str) -> list[dict[str, object]]:
    return [record for line in Path(path).read_text().splitlines() if "event" not in (record := json.loads(line))]


def test_deny_writes_once_and_cuts(make_spec: Callable[..., SessionSpec]) -> None:
    t = tracked(make_spec)
    decision = Decision(False, "no allow rule matches", 'allow = ["denied.test"]', "denied.test")
    assert t.deny(decision) and t.deny(decision)
    (record,) = lines(t.session.spec.audit_path)
    assert (record["decision"], record["rule"], record["hint"]) == ("deny", "no allow rule matches", 'allow = ["denied.test"]')
    assert t.cut == "no allow rule matches" and t.must_close
    assert t.session.denial_summary()[0]["count"] == 1


def test_finish_writes_once_with_bytes_and_error(make_spec: Callable[..., SessionSpec]) -> None:
    t = tracked(make_spec)
    assert t.finish(bytes_up=3, bytes_down=4, error="reset")
    assert t.finish()
    (record,) = lines(t.session.spec.audit_path)
    assert (record["decision"], record["bytes_up"], record["bytes_down"], record["error"]) == ("allow", 3, 4, "reset")
    assert isinstance(record["duration_ms"], int)
    assert t.must_close is None


def test_deny_after_finish_still_cuts(make_spec: Callable[..., SessionSpec]) -> None:
    t = tracked(make_spec)
    t.finish()
    t.deny(Decision(False, "late"))
    assert len(lines(t.session.spec.audit_path)) == 1 and t.cut == "late"


def test_lost_record_stops_the_session(make_spec: Callable[..., SessionSpec]) -> None:
    t = tracked(make_spec)
    path = Path(t.session.spec.audit_path)
    t.session.writer.write(t.record)  # create the file
    path.unlink()
    path.mkdir()
    assert t.finish() is False
    assert t.cut and "cannot write audit log" in t.cut
    assert t.session.stopped and "audit log unwritable" in t.session.stopped


def test_a_flow_still_open_when_its_session_ends_gets_its_end_then_and_only_once(make_spec: Callable[..., SessionSpec]) -> None:
    spec = make_spec()
    registry = Registry()
    _token, session = registry.register(spec)
    record = AuditRecord(session=spec.session_id, command=spec.command, scheme="https", host="allowed.test", port=443, decision="allow", rule="")
    open_flow, closed_flow = Tracked(session, record), Tracked(session, AuditRecord(**{**record.__dict__, "flow": None}))
    assert open_flow.opened() and closed_flow.opened() and closed_flow.finish(bytes_up=1)
    registry.end(spec.session_id)
    open_flow.finish(bytes_up=9, error="reset")  # the cut connection notices later: nothing more is written
    written = lines(spec.audit_path)
    ends = [r for r in written if r.get("phase") != "start"]
    assert len(ends) == 2 and [r["error"] for r in ends if r["flow"] == open_flow.record.flow] == ["ended with the run"]
    assert session.open_flows == {}
