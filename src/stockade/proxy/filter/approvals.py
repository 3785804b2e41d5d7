"""Approve a host while the run waits: a refused request is held until the user answers, or not.

Only for a session whose run asked for it (SessionSpec.approve: how long to
hold, in seconds; 0 for every run that did not ask, agents and CI among them),
and only for a refusal that one `[network] allow` entry would lift (the
denial's hint names a host rule): a deny entry, a blocked address, an HTTP
rule or a credential's place is never put to the user. The question waits in
the daemon; the run's own terminal (proxy/client/asking.py) or `stockade approve` in
another one asks for it over the control socket, which only the daemon's user
can reach and no sandbox can see, so a sandbox cannot answer its own question.

Answers: "once" lets this connection through (the backstop honours it through
ClientState.approved; another request that shared the question asks again), "run" adds the rule to the session's rules for the rest
of the run, "always" does that and is handed to the run when its session ends
(the `end` reply's "always"), which writes it into its policy, "deny" refuses it and every later request for it in this run
without asking again. No answer within the time is "deny", as without this
module. Requests for a rule already asked share its question; a session has at
most PENDING_MAX open questions, past which its refusals are not held.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from stockade.profiles.domains import IPAddress, parse_rule
from stockade.profiles.hints import rule_of
from stockade.proxy.filter.sessions import Session
from stockade.proxy.rules.decide import Decision, _normalise_rule, address_kind, canonical_target

PENDING_MAX = 8  # open questions per session
ASKED_MAX = 20  # questions one session may ask in all: past it a run that keeps asking is refused at once
MAX_SECONDS = 300  # the longest a run may ask a request to be held
ANSWERS = ("once", "run", "always", "deny")
MAX_WAIT = 30.0  # seconds a client's `questions` request waits for news


@dataclass
class Question:
    id: str
    session: Session
    rule: str  # the allow entry that would lift the refusal ("pypi.org", "host:8443")
    host: str  # canonical (decide's Decision.host): what the prompt shows is what the rule names
    port: int
    deadline: float  # time.monotonic()
    future: asyncio.Future[str] = field(repr=False)
    taken: bool = False  # answered once, and that one connection let through

    def to_dict(self) -> dict[str, Any]:
        spec = self.session.spec
        left = max(0, round(self.deadline - time.monotonic()))
        return {
            "id": self.id, "session_id": spec.session_id, "rule": self.rule, "host": self.host, "port": self.port,
            "command": list(spec.command), "cwd": spec.cwd, "origin": spec.origin, "seconds_left": left,
        }  # fmt: skip


def inside(host: str, own: Collection[IPAddress] = ()) -> bool:
    """Whether `host` is an address literal off limits by default (loopback, private, link-local and
    metadata, ...; or this host's own): the line to add exists, but only the policy may say it, not
    one keystroke at a prompt the sandbox raised."""
    try:
        address = canonical_target(host).address
    except ValueError:
        return False
    return address is not None and (address_kind(address) is not None or address in own)


class Approvals:
    """The daemon's open questions, and the clients waiting to hear of them."""

    def __init__(self) -> None:
        self.questions: dict[str, Question] = {}
        self._news: asyncio.Event | None = None  # made on the daemon's loop, set and replaced on each question

    async def consider(
        self, session: Session, decision: Decision, host: str, port: int, approved: set[tuple[str, int]], own: Collection[IPAddress] = ()
    ) -> Decision:
        """`decision` (a refusal) as the user answers it, or unchanged when it may not be asked.
        `approved` is the client connection's set the backstop honours for "once"; `own` are this
        host's addresses (never asked about, as no loopback, private or metadata address is)."""
        rule = rule_of(decision.hint) if not decision.allowed and decision.hint else None
        seconds = min(max(int(getattr(session.spec, "approve", 0) or 0), 0), MAX_SECONDS)
        if rule is None or not seconds or session.ended or inside(host, own):
            return decision
        if not _under_ceiling(rule, session.spec.ceiling):  # the administrator's baseline does not allow it: never asked
            return Decision(False, f"{decision.rule}; the system baseline does not allow it", "", decision.host)
        if rule in session.declined:
            return Decision(False, f"{decision.rule}; you declined it", decision.hint, decision.host)
        while True:
            question = self._open(session, rule, decision.host or host, port, seconds)  # shown as judged: an A-label, not a look-alike
            if question is None:
                return decision
            try:
                answer = await asyncio.wait_for(asyncio.shield(question.future), max(question.deadline - time.monotonic(), 0.0))
            except TimeoutError:
                answer = ""
            finally:
                if question.future.done() or time.monotonic() >= question.deadline:
                    self.questions.pop(question.id, None)
            if answer != "once" or session.ended or (not question.taken and (decision.host or host, port) == (question.host, question.port)):
                break
            # Once is the one connection the question showed: another request that shared it asks again.
        if answer == "always" and not session.ended:  # run's, and the run writes it into its policy when it ends
            entry = {"rule": rule, "origin": session.spec.origin, "cwd": session.spec.cwd}
            if entry not in session.always:  # once per rule, however many requests shared the question
                session.always.append(entry)
            answer = "run"
        if answer == "run" and not session.ended:
            if rule not in session.approved:
                session.approved.add(rule)
                session.rules = dataclasses.replace(session.rules, allow=(*session.rules.allow, _normalise_rule(parse_rule(rule))))
            return Decision(True, f'approved for this run by you: "{rule}"', "", decision.host)
        if answer == "once" and not session.ended:
            question.taken = True
            approved.add((host, port))
            return Decision(True, f'approved once by you: "{rule}"', "", decision.host)
        if answer == "deny":
            session.declined.add(rule)
            return Decision(False, f"{decision.rule}; you declined it", decision.hint, decision.host)
        return Decision(False, f"{decision.rule}; no answer within {seconds} s", decision.hint, decision.host)

    def _open(self, session: Session, rule: str, host: str, port: int, seconds: int) -> Question | None:
        """The session's open question for `rule`, or a new one; None past PENDING_MAX."""
        mine = [q for q in self.questions.values() if q.session is session and not q.future.done()]
        for question in mine:
            if question.rule == rule:
                return question
        if len(mine) >= PENDING_MAX or session.asked >= ASKED_MAX:
            return None
        session.asked += 1
        question = Question(os.urandom(6).hex(), session, rule, host, port, time.monotonic() + seconds, asyncio.get_running_loop().create_future())
        self.questions[question.id] = question
        self._announce()
        return question

    def answer(self, question_id: str, answer: str) -> str | None:
        """Settle a question; returns why it could not be (None when it was)."""
        if answer not in ANSWERS:
            return f"answer must be one of {', '.join(ANSWERS)}"
        question = self.questions.get(question_id)
        if question is None or question.future.done():
            return f"no open question {question_id!r} (answered, or its time ran out)"
        question.future.set_result(answer)
        self.questions.pop(question_id, None)
        self._announce()
        return None

    async def wait(self, session_id: str, known: list[str], seconds: float) -> list[dict[str, Any]]:
        """The open questions (of one session, or of all when "" ) that `known` does not list; waits
        up to `seconds` for one when there is none yet."""
        deadline = time.monotonic() + min(max(seconds, 0.0), MAX_WAIT)
        while True:
            found = [
                q.to_dict() for q in self.questions.values()
                if not q.future.done() and q.id not in known and (not session_id or q.session.spec.session_id == session_id)
            ]  # fmt: skip
            left = deadline - time.monotonic()
            if found or left <= 0:
                return found
            news = self._event()
            try:
                await asyncio.wait_for(news.wait(), left)
            except TimeoutError:
                pass

    def end_session(self, session: Session) -> None:
        """A session that ended takes its questions with it (refused: nobody is left to be let through)."""
        for question in [q for q in self.questions.values() if q.session is session]:
            if not question.future.done():
                question.future.set_result("deny")
            self.questions.pop(question.id, None)
        self._announce()

    def _event(self) -> asyncio.Event:
        if self._news is None:
            self._news = asyncio.Event()
        return self._news

    def _announce(self) -> None:
        if self._news is not None:
            self._news.set()
        self._news = asyncio.Event()


def _under_ceiling(rule: str, ceiling: tuple[str, ...] | None) -> bool:
    """Whether an approval of `rule` stays within the baseline's allow list (None: nothing bounds it)."""
    if ceiling is None:
        return True
    wanted = parse_rule(rule)
    return any(parse_rule(bound).covers(wanted) for bound in ceiling)
