"""The sandbox's resolver (proxy/daemon/inside_dns.py): what each query gets, what is recorded, and nothing asked of anyone."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from mitmproxy import dns

from stockade.proxy.control import SessionSpec
from stockade.proxy.daemon import inside_dns
from stockade.proxy.daemon.inside_dns import Resolver
from stockade.proxy.filter.sessions import Registry, Session
from stockade.proxy.rules.fake_names import is_fake


def query(name: str, kind: int = inside_dns.TYPE_A, questions: int = 1) -> bytes:
    message = dns.Message(
        timestamp=0.0, id=7, query=True, op_code=0, authoritative_answer=False, truncation=False, recursion_desired=True,
        recursion_available=False, reserved=0, response_code=0, questions=[dns.Question(name, kind, 1)] * questions,
        answers=[], authorities=[], additionals=[],
    )  # fmt: skip
    return message.packed


@pytest.fixture
def session(make_spec: Callable[..., SessionSpec]) -> Session:
    _token, made = Registry().register(make_spec(intercept=4))
    return made


def resolver(session: Session) -> Resolver:
    one, two = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket()
    return Resolver(session, [one], [two])


def test_an_allowed_name_gets_an_address_of_its_own_that_maps_back(session: Session) -> None:
    answered = dns.Message.unpack(resolver(session).answer(query("allowed.test")) or b"")
    assert answered.response_code == 0 and len(answered.answers) == 1
    address = str(answered.answers[0].ipv4_address)
    assert is_fake(address) and session.names.name(address) == "allowed.test"
    again = dns.Message.unpack(resolver(session).answer(query("ALLOWED.Test")) or b"")
    assert str(again.answers[0].ipv4_address) == address  # one address per name, whatever its spelling


def test_a_name_no_rule_allows_gets_nxdomain_and_the_summarys_line(session: Session) -> None:
    answered = dns.Message.unpack(resolver(session).answer(query("exfil.denied.test")) or b"")
    assert answered.response_code == inside_dns.NXDOMAIN and answered.answers == []
    assert session.names.by_name == {}
    denial = session.denial_summary()[0]
    assert denial["host"] == "exfil.denied.test" and denial["port"] == 0 and "exfil.denied.test" in denial["hint"]


@pytest.mark.parametrize("kind", [16, 28, 15, 255, 65])  # TXT, AAAA, MX, ANY, HTTPS
def test_other_record_types_of_an_allowed_name_get_nothing(session: Session, kind: int) -> None:
    answered = dns.Message.unpack(resolver(session).answer(query("allowed.test", kind)) or b"")
    assert answered.response_code == 0 and answered.answers == []


def test_what_is_not_one_query_gets_no_answer_or_a_format_error(session: Session) -> None:
    the_resolver = resolver(session)
    assert the_resolver.answer(b"\x00\x01garbage") is None
    reply = dns.Message.unpack(the_resolver.answer(query("allowed.test", questions=2)) or b"")
    assert reply.response_code == inside_dns.FORMERR


def test_a_name_listed_for_other_ports_only_is_answered(make_spec: Callable[..., SessionSpec]) -> None:
    _token, made = Registry().register(make_spec(allow=("db.test:5432",)))
    answered = dns.Message.unpack(resolver(made).answer(query("db.test")) or b"")
    assert len(answered.answers) == 1


def test_with_approvals_an_unlisted_name_is_answered_and_a_denied_one_is_not(make_spec: Callable[..., SessionSpec]) -> None:
    _token, made = Registry().register(make_spec(approve=30))
    assert len(dns.Message.unpack(resolver(made).answer(query("new.example")) or b"").answers) == 1
    assert dns.Message.unpack(resolver(made).answer(query("blocked.wild.test")) or b"").response_code == inside_dns.NXDOMAIN


def test_each_distinct_query_is_recorded_once_and_its_repeats_at_the_end(session: Session) -> None:
    the_resolver = resolver(session)
    for _ in range(3):
        the_resolver.answer(query("allowed.test"))
    the_resolver.answer(query("nope.test", 16))
    the_resolver.close()
    found = [json.loads(line) for line in Path(session.spec.audit_path).read_text().splitlines()]
    dns_records = [r for r in found if r["scheme"] == "dns"]
    assert [(r["host"], r["decision"], r.get("repeats", 0)) for r in dns_records] == [
        ("allowed.test", "allow", 0), ("nope.test", "deny", 0), ("allowed.test", "allow", 2),
    ]  # fmt: skip
    assert dns_records[0]["rule"].startswith("A: answered 198.18.0.1") and dns_records[1]["rule"].startswith("TXT: ")


def test_an_idn_name_is_kept_as_the_proxy_spells_it(make_spec: Callable[..., SessionSpec]) -> None:
    _token, made = Registry().register(make_spec(allow=("*.wild.test",)))
    answered = dns.Message.unpack(resolver(made).answer(query("xn--bcher-kva.wild.test")) or b"")
    address = str(answered.answers[0].ipv4_address)
    assert made.names.name(address) == "xn--bcher-kva.wild.test"  # ASCII: the door's CONNECT line can carry it


def test_a_malformed_query_with_a_header_gets_a_format_error_and_a_name_that_is_an_address_no_hint(session: Session) -> None:
    broken = query("allowed.test")[:12] + b"\xc0\x0c\x00\x01"  # a name that points at itself
    reply = resolver(session).answer(broken) or b""
    assert reply[:2] == broken[:2] and reply[2] & 0x80 and reply[3] & 0x0F == inside_dns.FORMERR
    resolver(session).answer(query("127.0.0.1"))
    assert session.denial_summary() == []


def test_a_reply_too_long_for_a_datagram_says_so(session: Session) -> None:
    long = bytes(range(256)) * 3
    cut = inside_dns._fits_a_datagram(long)
    assert len(cut) == 12 and cut[2] & 0x02
    assert inside_dns._fits_a_datagram(b"short" * 10) == b"short" * 10


def test_queries_past_the_sessions_share_are_dropped_and_counted(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inside_dns, "QUERY_BURST", 2)
    datagrams = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    datagrams.bind(("127.0.0.1", 0))
    datagrams.setblocking(False)
    the_resolver = Resolver(session, [datagrams], [socket.socket()])
    the_resolver.pace = inside_dns.Pace(1.0, 2)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(5):
        client.sendto(query("allowed.test"), datagrams.getsockname())
    the_resolver._datagram(datagrams)
    client.settimeout(1)
    answered = 0
    try:
        while client.recv(512):
            answered += 1
            client.settimeout(0.2)
    except TimeoutError:
        pass
    assert answered == 2 and the_resolver.tally.dropped == 3
    the_resolver.close()
    last = json.loads(Path(session.spec.audit_path).read_text().splitlines()[-1])
    assert "3 queries dropped" in last["rule"]
    client.close()


def test_a_name_the_filter_spells_otherwise_gets_no_address(session: Session, audit_lines: Callable[[], list[dict[str, object]]]) -> None:
    """Hostile review 16: "allowed.test.\\v" got an address of its own that mapped back to no name the filter
    judges; now only the filter's own spelling is answered (the control: allowed.test is)."""
    the_resolver = resolver(session)
    refused = dns.Message.unpack(the_resolver.answer(query("allowed.test.\x0b")) or b"")
    answered = dns.Message.unpack(the_resolver.answer(query("allowed.test")) or b"")
    assert refused.response_code == inside_dns.NXDOMAIN and answered.answers
    assert any(r["decision"] == "deny" and "as the filter spells it" in str(r["rule"]) for r in audit_lines())


def test_what_is_no_query_is_recorded_once(session: Session, audit_lines: Callable[[], list[dict[str, object]]]) -> None:
    the_resolver = resolver(session)
    reply = dns.Message.unpack(query("allowed.test"))
    reply.query = False
    for message in (b"\x00", reply.packed, b"junk on port 53 " * 3):
        the_resolver.answer(message)
    junk = [r for r in audit_lines() if r["host"] == "*"]
    assert len(junk) == 1 and "no DNS query" in str(junk[0]["rule"]), junk
