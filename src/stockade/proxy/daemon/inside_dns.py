"""The sandbox's resolver: the answer to every DNS query of one session's namespace, asking no one.

bwrap/parts/interception.py sends each query the sandbox makes (UDP or TCP, to
whatever server its resolv.conf names) to the namespace's port 53, whose
sockets the daemon holds. A name is a decision, not a lookup:

- a name the policy could allow (an allow rule matches it for some port, or
  the user may still be asked about it) gets an address of FAKE_NETWORK, its
  own for this session, which the transparent door (door.py) maps back to the
  name: the connection is then judged as a CONNECT to NAME:PORT;
- AAAA gets no address (the sandbox reaches the filter over IPv4 only), and
  every other type (TXT, MX, ANY, ... the ones tunnels use) gets nothing;
- any other name gets NXDOMAIN, and the summary's usual line
  (`stockade allow NAME`).

No query ever leaves the daemon, so no name leaks through a resolver
(sandbox-runtime #88, OpenShell #1169). Each distinct (name, type, answer) is
recorded once as it happens, and how many more times it came when the session
ends; past MAX_RECORDED distinct ones, only a count.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import time
from dataclasses import dataclass, field

from mitmproxy import dns

from stockade.proxy.audit import AuditError, AuditRecord, now_iso
from stockade.proxy.daemon.accepting import accept
from stockade.proxy.rules.budget import Pace
from stockade.proxy.rules.decide import NO_ALLOW_RULE, Decision, SessionRules, decide
from stockade.proxy.rules.fake_names import MAX_NAMES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.proxy.filter.sessions import Session

logger = logging.getLogger(__name__)

MAX_RECORDED = 4096  # distinct (name, type, answer) records one session writes
TTL = 60
TYPE_A, TYPE_AAAA = 1, 28
NXDOMAIN, FORMERR, SERVFAIL = 3, 1, 2
MAX_MESSAGE = 4096
STREAM_TIMEOUT = 10.0
MAX_STREAMS = 32  # DNS-over-TCP connections one session may hold at once
QUERY_RATE, QUERY_BURST = 200.0, 1000  # queries a second one session's resolver answers, past a burst (the rest are dropped)


@dataclass
class Tally:
    """What a session's resolver recorded: each distinct query once, with how often it came."""

    counts: dict[tuple[str, str, str], int] = field(default_factory=dict)
    first: dict[tuple[str, str, str], AuditRecord] = field(default_factory=dict)
    unrecorded: dict[str, int] = field(default_factory=dict)  # by decision, past MAX_RECORDED distinct ones
    dropped: int = 0  # over QUERY_RATE


def _ascii(name: str) -> str | None:
    """The name as the proxy spells it (IDNA labels as xn--, lower case, no final dot); None when it has no such spelling."""
    try:
        return name.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _format_error(query: bytes) -> bytes | None:
    """FORMERR for a message whose header can be read and is a query; None for anything else."""
    if len(query) < 12 or query[2] & 0x80:
        return None
    opcode = query[2] & 0x78
    return query[:2] + bytes([0x80 | opcode, FORMERR]) + b"\0" * 8


def _fits_a_datagram(reply: bytes) -> bytes:
    """A reply over 512 bytes goes as its header with TC set and nothing else: the client asks again over TCP."""
    if len(reply) <= 512:
        return reply
    return reply[:2] + bytes([reply[2] | 0x02, reply[3]]) + b"\0" * 8


def judge(rules: SessionRules, name: str, may_ask: bool) -> Decision:
    """Whether the resolver answers `name`: what a CONNECT to it on 443 would get, but a name listed
    for other ports only is answered too, and so is a name the user may still be asked about."""
    decision = decide(rules, name, 443)
    if decision.allowed or decision.rule.startswith("no allow rule matches port"):
        return Decision(True, decision.rule if decision.allowed else "listed for other ports", "", decision.host)
    if may_ask and decision.rule == NO_ALLOW_RULE:
        return Decision(True, "the user may be asked when it connects", "", decision.host)
    return decision


class Resolver:
    """One session's resolver on its namespace's port 53 (UDP and TCP; IPv4's, and IPv6's where it has them)."""

    def __init__(self, session: Session, datagrams: list[socket.socket], streams: list[socket.socket]) -> None:
        self.session = session
        self.datagrams = datagrams
        self.streams = streams
        self.tally = Tally()
        self.pace = Pace(QUERY_RATE, QUERY_BURST)  # one session's queries, over UDP and TCP alike
        self._accepting: list[asyncio.Task[None]] = []
        self._streams: set[asyncio.Task[None]] = set()
        self._closed = False
        self._refused: set[str] = set()  # names refused, each once (bounded as the names given are: MAX_NAMES)

    def open(self) -> None:
        loop = asyncio.get_running_loop()
        for datagrams in self.datagrams:
            datagrams.setblocking(False)
            loop.add_reader(datagrams.fileno(), self._datagram, datagrams)
        for stream in self.streams:
            stream.setblocking(False)
            self._accepting.append(loop.create_task(self._accept_loop(stream)))

    def close(self) -> None:
        """Stop answering; write how often each recorded query came again. Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._accepting:  # opened: the loop watches every socket
            loop = asyncio.get_running_loop()
            for each in (*self.datagrams, *self.streams):
                loop.remove_reader(each.fileno())
            for task in self._accepting:
                task.cancel()
        for datagrams in self.datagrams:  # queries that came too late for an answer are recorded all the same
            datagrams.setblocking(False)
            self._unanswered(datagrams)
        for each in (*self.datagrams, *self.streams):
            each.close()
        for task in list(self._streams):
            task.cancel()
        self._write_repeats()

    def answer(self, query: bytes) -> bytes | None:
        """The reply to one DNS message; None for what is not a query at all."""
        try:
            message = dns.Message.unpack(query)
        except Exception:  # noqa: BLE001 - any malformed message: a format error, when it has a header to answer
            self._record("*", "?", "deny", "a message that is no DNS query came to the sandbox's resolver")
            return _format_error(query)
        if not message.query:
            self._record("*", "?", "deny", "a message that is no DNS query came to the sandbox's resolver")
            return None
        if len(message.questions) != 1:
            return message.fail(FORMERR).packed
        question = message.questions[0]
        name = _ascii(question.name)
        if name is None:
            return message.fail(FORMERR).packed
        kind = dns.types.to_str(question.type)
        spec = self.session.spec
        decision = judge(self.session.rules, name, bool(spec.approve))
        if decision.allowed and decision.host and decision.host != name:  # whitespace the filter's spelling drops: no name
            decision = Decision(False, f"not a host name as the filter spells it ({decision.host})", "", name)
        if not decision.allowed:
            self._record(name, kind, "deny", decision.rule, decision.hint)
            if name not in self._refused and len(self._refused) < MAX_NAMES:
                self._refused.add(name)
                self.session.refused_names = len(self._refused)
            if not _is_address(name):  # a program asking for "127.0.0.1" by name wants no `stockade allow` line
                self.session.note_denial(decision.host or name, 0, decision)  # port 0: a name, asked for (summary.py)
            return message.fail(NXDOMAIN).packed
        if question.type != TYPE_A:
            self._record(name, kind, "allow", f"no {kind} answer: the sandbox's resolver gives IPv4 addresses only")
            return message.succeed([]).packed
        address = self.session.names.address(name)
        if address is None:
            self._record(name, kind, "deny", f"more than {MAX_NAMES} names asked in one run")
            return message.fail(SERVFAIL).packed
        self._record(name, kind, "allow", f"answered {address} ({decision.rule})")
        return message.succeed([dns.ResourceRecord.A(name, ipaddress.IPv4Address(address), ttl=TTL)]).packed

    def _datagram(self, datagrams: socket.socket) -> None:
        for _ in range(64):  # a burst at a time: the loop serves the others between
            try:
                query, sender = datagrams.recvfrom(MAX_MESSAGE)
            except OSError:  # nothing more to read (or the socket closed under us)
                return
            if not self.pace.admit(time.monotonic()):  # past its share: dropped, as a busy server would
                self.tally.dropped += 1
                continue
            reply = self._safe_answer(query)
            if reply is not None:
                with contextlib.suppress(OSError):
                    datagrams.sendto(_fits_a_datagram(reply), sender)

    def _unanswered(self, datagrams: socket.socket) -> None:
        for _ in range(MAX_RECORDED):
            try:
                query = datagrams.recv(MAX_MESSAGE)
            except OSError:  # nothing more
                return
            self._safe_answer(query)  # judged and recorded; nobody is left to answer

    async def _accept_loop(self, stream: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn = await accept(stream, "the sandbox's resolver")
            if conn is None:
                return
            if len(self._streams) >= MAX_STREAMS:
                conn.close()
                continue
            task = loop.create_task(self._serve_stream(conn))
            self._streams.add(task)
            task.add_done_callback(self._streams.discard)

    async def _serve_stream(self, conn: socket.socket) -> None:
        """DNS over TCP: two bytes of length, then the message; as many as the client sends."""
        try:
            reader, writer = await asyncio.open_connection(sock=conn)
        except OSError:
            conn.close()
            return
        try:
            while True:
                async with asyncio.timeout(STREAM_TIMEOUT):
                    size = int.from_bytes(await reader.readexactly(2), "big")
                    query = await reader.readexactly(size)
                wait = self.pace.delay(time.monotonic())
                if wait > 0:  # a stream waits for its turn: it holds one connection, not a flood
                    await asyncio.sleep(wait)
                reply = self._safe_answer(query)
                if reply is None:
                    return
                writer.write(len(reply).to_bytes(2, "big") + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, OSError):
            pass
        finally:
            writer.close()

    def _safe_answer(self, query: bytes) -> bytes | None:
        try:
            return self.answer(query)
        except Exception:  # a fault of ours: no answer, and the daemon's log says why
            logger.exception("session %s: a DNS query failed", getattr(self.session.spec, "session_id", "?"))
            return None

    def _record(self, name: str, kind: str, decision: str, rule: str, hint: str = "") -> None:
        key = (name, kind, decision)
        tally = self.tally
        if key in tally.counts:
            tally.counts[key] += 1
            return
        if len(tally.counts) >= MAX_RECORDED:
            tally.unrecorded[decision] = tally.unrecorded.get(decision, 0) + 1
            return
        tally.counts[key] = 0
        spec = self.session.spec
        record = AuditRecord(
            **spec.who(), scheme="dns", host=name, port=53, decision=decision,
            rule=f"{kind}: {rule}", hint=hint or None,
        )  # fmt: skip
        tally.first[key] = record
        self._write(record)

    def _write_repeats(self) -> None:
        ended = now_iso()
        for key, more in self.tally.counts.items():
            if more:
                first = self.tally.first[key]
                self._write(AuditRecord(
                    **first.who(), scheme="dns", host=first.host, port=53, decision=first.decision,
                    rule=first.rule, time=first.time, hint=first.hint, repeats=more, last_time=ended,
                ))  # fmt: skip
        spec = self.session.spec
        for decision, count in sorted(self.tally.unrecorded.items()):
            answered = "answered" if decision == "allow" else "refused"
            self._write(AuditRecord(
                **spec.who(), scheme="dns", host="*", port=53, decision=decision,
                rule=f"{count} more queries {answered}, past the first {MAX_RECORDED} distinct ones (not recorded one by one)",
            ))  # fmt: skip
        if self.tally.dropped:
            self._write(AuditRecord(
                **spec.who(), scheme="dns", host="*", port=53, decision="deny",
                rule=f"{self.tally.dropped} queries dropped: more than {QUERY_RATE:g} a second past a burst of {QUERY_BURST}",
            ))  # fmt: skip

    def _write(self, record: AuditRecord) -> None:
        try:
            self.session.writer.write(record)
        except AuditError:
            pass  # the writer is broken: the run's end says the audit failed
