"""Refused requests held for the user's answer: what may be asked, each answer, the bounds."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable

from stockade.proxy.control import SessionSpec
from stockade.proxy.filter.approvals import PENDING_MAX, Approvals
from stockade.proxy.filter.sessions import Registry, Session
from stockade.proxy.rules.decide import Decision, decide

REFUSED = Decision(False, "no allow rule matches", 'allow = ["new.test"]', "new.test")


def session(make_spec: Callable[..., SessionSpec], approve: int = 5) -> Session:
    return Registry().register(make_spec(approve=approve))[1]


async def answered(approvals: Approvals, mine: Session, answer: str | None, decision: Decision = REFUSED) -> tuple[Decision, set[tuple[str, int]]]:
    once: set[tuple[str, int]] = set()
    waiting = asyncio.ensure_future(approvals.consider(mine, decision, "new.test", 443, once))
    questions = await approvals.wait(mine.spec.session_id, [], 2)
    if answer is not None:
        assert len(questions) == 1 and questions[0]["rule"] == "new.test" and questions[0]["port"] == 443
        assert approvals.answer(questions[0]["id"], answer) is None
    return await waiting, once


async def test_a_run_that_did_not_ask_is_refused_at_once(make_spec: Callable[..., SessionSpec]) -> None:
    approvals = Approvals()
    assert await approvals.consider(session(make_spec, approve=0), REFUSED, "new.test", 443, set()) is REFUSED
    assert approvals.questions == {}


async def test_only_a_refusal_one_allow_entry_lifts_is_asked(make_spec: Callable[..., SessionSpec]) -> None:
    approvals, mine = Approvals(), session(make_spec)
    for decision in (
        Decision(False, 'deny "x.test"', "", "x.test"),
        Decision(False, "http deny GET /", '[network.http."a.test"] allow = ["GET /"]', "a.test"),
    ):
        assert await approvals.consider(mine, decision, "x.test", 443, set()) is decision
    assert approvals.questions == {}


async def test_once_lets_this_connection_through_and_changes_no_rule(make_spec: Callable[..., SessionSpec]) -> None:
    approvals, mine = Approvals(), session(make_spec)
    decision, once = await answered(approvals, mine, "once")
    assert decision.allowed and "approved once" in decision.rule and once == {("new.test", 443)}
    assert not decide(mine.rules, "new.test", 443).allowed


async def test_run_adds_the_rule_to_the_session_and_always_hands_it_to_the_run(make_spec: Callable[..., SessionSpec]) -> None:
    approvals, mine = Approvals(), session(make_spec)
    decision, _once = await answered(approvals, mine, "run")
    assert decision.allowed and decide(mine.rules, "new.test", 443).allowed and mine.always == []
    other = session(make_spec)
    decision, _once = await answered(approvals, other, "always")
    assert decision.allowed and other.always == [{"rule": "new.test", "origin": other.spec.origin, "cwd": other.spec.cwd}]


async def test_deny_is_not_asked_again_and_no_answer_is_the_refusal(make_spec: Callable[..., SessionSpec]) -> None:
    approvals, mine = Approvals(), session(make_spec)
    decision, _once = await answered(approvals, mine, "deny")
    assert not decision.allowed and "you declined it" in decision.rule
    assert "declined" in (await approvals.consider(mine, REFUSED, "new.test", 443, set())).rule and approvals.questions == {}
    quick = session(make_spec, approve=1)
    decision = await approvals.consider(quick, REFUSED, "new.test", 443, set())
    assert not decision.allowed and "no answer within 1 s" in decision.rule and approvals.questions == {}


async def test_requests_for_one_rule_share_a_question_and_a_session_has_a_bound(make_spec: Callable[..., SessionSpec]) -> None:
    approvals, mine = Approvals(), session(make_spec)
    waiting = [asyncio.ensure_future(approvals.consider(mine, REFUSED, "new.test", 443, set())) for _ in range(3)]
    many = [
        asyncio.ensure_future(approvals.consider(mine, Decision(False, "no", f'allow = ["h{i}.test"]', f"h{i}.test"), f"h{i}.test", 443, set()))
        for i in range(PENDING_MAX + 3)
    ]
    await asyncio.sleep(0.05)
    assert len(approvals.questions) == PENDING_MAX  # one for new.test, the rest up to the bound
    assert sum(1 for task in many if task.done()) == 4  # refused at once past it
    (question,) = [q for q in approvals.questions.values() if q.rule == "new.test"]
    assert approvals.answer(question.id, "run") is None
    assert all(decision.allowed for decision in await asyncio.gather(*waiting))
    approvals.end_session(mine)  # the rest are refused when the session ends
    assert not any(decision.allowed for decision in await asyncio.gather(*many)) and approvals.questions == {}


async def test_a_run_that_keeps_asking_is_refused_at_once_past_the_bound(make_spec: Callable[..., SessionSpec]) -> None:
    from stockade.proxy.filter.approvals import ASKED_MAX

    approvals, mine = Approvals(), session(make_spec)
    for number in range(ASKED_MAX):
        decision = Decision(False, "no", f'allow = ["h{number}.test"]', f"h{number}.test")
        waiting = asyncio.ensure_future(approvals.consider(mine, decision, f"h{number}.test", 443, set()))
        (question,) = await approvals.wait(mine.spec.session_id, [], 2)
        approvals.answer(question["id"], "deny")
        await waiting
    late = Decision(False, "no", 'allow = ["late.test"]', "late.test")
    assert await approvals.consider(mine, late, "late.test", 443, set()) is late and approvals.questions == {}


async def test_bad_answers_are_refused_with_a_reason(make_spec: Callable[..., SessionSpec]) -> None:
    approvals = Approvals()
    assert "answer must be one of" in str(approvals.answer("x", "yes"))
    assert "no open question" in str(approvals.answer("nope", "once"))
    assert await approvals.wait("", ["a"], 0) == []


async def test_an_inside_address_is_never_asked(make_spec: Callable[..., SessionSpec]) -> None:
    """A loopback, private or metadata address literal (or one of this host's own) is refused at
    once: one `run` answer typed from habit must not open a service of this machine or its network."""
    approvals, mine = Approvals(), session(make_spec)
    own = {ipaddress.ip_address("192.0.2.7")}
    for host, port in (("127.0.0.1", 8080), ("0x7f.1", 80), ("[::ffff:127.0.0.1]", 80), ("::1", 80), ("10.1.2.3", 443),
                       ("169.254.169.254", 80), ("0", 80), ("192.0.2.7", 443)):  # fmt: skip
        decision = decide(mine.rules, host, port)
        assert not decision.allowed and decision.hint  # a line to add exists: the run alone may decide
        assert await approvals.consider(mine, decision, host, port, set(), own) is decision, host
    assert approvals.questions == {}
    public = decide(mine.rules, "203.0.113.9", 443)  # a public literal is a host like any other
    waiting = asyncio.ensure_future(approvals.consider(mine, public, "203.0.113.9", 443, set(), own))
    assert [q["rule"] for q in await approvals.wait(mine.spec.session_id, [], 2)] == ["203.0.113.9"]
    approvals.end_session(mine)
    assert not (await waiting).allowed


async def test_once_lets_one_connection_through_not_every_one_that_shared_the_question(make_spec: Callable[..., SessionSpec]) -> None:
    """A sandbox that queues many connections on one question (and to other ports under the same
    rule) before you answer once gets the one it showed you; the others are asked again."""
    approvals, mine = Approvals(), session(make_spec)
    sets = [set[tuple[str, int]]() for _ in range(4)]
    shown = asyncio.ensure_future(approvals.consider(mine, REFUSED, "new.test", 443, sets[0]))
    await asyncio.sleep(0.01)
    queued = [asyncio.ensure_future(approvals.consider(mine, REFUSED, "new.test", port, sets[i])) for i, port in ((1, 443), (2, 443), (3, 8443))]
    await asyncio.sleep(0.01)  # all four wait on the one question
    (question,) = await approvals.wait(mine.spec.session_id, [], 2)
    assert (question["host"], question["port"]) == ("new.test", 443)
    assert approvals.answer(question["id"], "once") is None
    assert (await shown).allowed and sets[0] == {("new.test", 443)}
    again = await approvals.wait(mine.spec.session_id, [question["id"]], 2)
    assert len(again) == 1 and not any(task.done() for task in queued)  # asked again, one question for the rest
    assert approvals.answer(again[0]["id"], "deny") is None
    assert not any(decision.allowed for decision in await asyncio.gather(*queued)) and sets[1:] == [set(), set(), set()]


async def test_the_question_shows_the_host_as_judged_not_a_look_alike(make_spec: Callable[..., SessionSpec]) -> None:
    """mitmproxy hands over a punycode name decoded (xn--pi-kmcm.org as "руpi.org", Cyrillic р and у):
    shown as such, the prompt's first line would read as pypi.org while the rule asked is another host."""
    approvals, mine = Approvals(), session(make_spec)
    look_alike = "\u0440\u0443pi.org"
    decision = decide(mine.rules, look_alike, 443)
    waiting = asyncio.ensure_future(approvals.consider(mine, decision, look_alike, 443, set()))
    (question,) = await approvals.wait(mine.spec.session_id, [], 2)
    assert question["host"] == question["rule"] == "xn--pi-kmcm.org"
    assert approvals.answer(question["id"], "once") is None and (await waiting).allowed


async def test_always_is_handed_over_once_however_many_requests_shared_it(make_spec: Callable[..., SessionSpec]) -> None:
    approvals, mine = Approvals(), session(make_spec)
    waiting = [asyncio.ensure_future(approvals.consider(mine, REFUSED, "new.test", 443, set())) for _ in range(20)]
    await asyncio.sleep(0.01)
    (question,) = await approvals.wait(mine.spec.session_id, [], 2)
    assert approvals.answer(question["id"], "always") is None
    assert all(decision.allowed for decision in await asyncio.gather(*waiting))
    assert mine.always == [{"rule": "new.test", "origin": mine.spec.origin, "cwd": mine.spec.cwd}]
