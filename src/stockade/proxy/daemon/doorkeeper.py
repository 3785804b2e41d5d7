"""The daemon's doors: every session's listener, from the hand-over to the audit record of what its budget refused.

Why a module of its own: a door outlives the control request that opened it
and ends with its session, whichever way the session ends (an "end"
request, or its control connection closing). Keeping the open doors, the
shared connection budget and the refusals of ended sessions in one place
means a session's door is closed, and its refusals recorded, by exactly one
piece of code. A single door's own work (accepting, pacing, handing
connections to mitmproxy) stays in `door.py`.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from stockade.proxy.audit import AuditError, AuditRecord
from stockade.proxy.control import INTERCEPTION_SOCKETS
from stockade.proxy.daemon.door import Bind, Door
from stockade.proxy.daemon.inside_dns import Resolver
from stockade.proxy.daemon.packet_log import PacketLog
from stockade.proxy.filter.sessions import Session
from stockade.proxy.rules.budget import Budget


class Doors:
    """The open doors by session id, sharing one `Budget` of connections."""

    def __init__(self, bind: Bind, budget: Budget | None = None) -> None:
        self.bind = bind  # binds an accepted connection to its session (auth.SessionAuth.bind)
        self.budget = budget if budget is not None else Budget()  # connections each door may hold (budget.py)
        self.by_session: dict[str, Door] = {}  # session id -> its sandbox's listener
        self.forwarded: dict[str, list[Door]] = {}  # session id -> its forwarded loopback ports' doors (bwrap/parts/forwards.py)
        self._refused: dict[str, dict[str, Any]] = {}  # ended session -> connections its budget refused
        self.resolvers: dict[str, Resolver] = {}  # session id -> its sandbox's resolver (inside_dns.py)
        self.packet_logs: dict[str, PacketLog] = {}  # session id -> its refused packets (packet_log.py)
        self.attributors: dict[str, Any] = {}  # session id -> who opens its connections (attribution.py)

    def listen(self, session_id: str, session: Session, fds: list[int], opening: list[Callable[[], None]] | None = None) -> str | None:
        """Open the session's doors on the sockets in `fds`: the proxy's listener, then one for each
        of the spec's forwards, then, when the spec intercepts, interception's (proxy/control.py
        INTERCEPTION_SOCKETS: for IPv4 and then IPv6, the transparent listener and the resolver's UDP
        and TCP sockets, with the log of refused packets between); None once open, else why not.

        The sockets taken are removed from `fds` (the caller closes whatever is left there). With
        `opening`, the doors start accepting only when the caller runs what it appends there.
        """
        if session_id in self.by_session:
            return f"session {session_id!r} already has its listener"
        targets: list[str | None] = [None, *session.spec.forwards]
        extra = session.spec.intercept
        if len(fds) != len(targets) + extra + session.spec.diag:
            return "listen needs one listening socket, one more for each of the spec's forwards, and those interception names"
        sockets = [socket.socket(fileno=fd) for fd in fds]
        fds.clear()
        diag = sockets.pop() if session.spec.diag else None
        if diag is not None and diag.family != socket.AF_NETLINK:
            for each in [*sockets, diag]:
                each.close()
            return "listen's last socket must be the namespace's socket table (a netlink socket)"
        attributor = self._attributor(session, diag)
        streams = sockets[: len(targets)]
        intercepting = _interception(sockets[len(targets) :])
        if any(not _listening(each) for each in streams) or (extra and intercepting is None):
            for each in sockets:
                each.close()
            return "listen needs a listening TCP socket, and interception's sockets of their kinds"
        doors = [
            Door(session, listener, self.bind, self.budget, target, attributor=attributor) for listener, target in zip(streams, targets, strict=False)
        ]
        if intercepting is not None:
            transparent, datagrams, dns_streams, log = intercepting
            doors += [Door(session, listener, self.bind, self.budget, transparent=True, attributor=attributor) for listener in transparent]
            resolver = Resolver(session, datagrams, dns_streams)
            packets = PacketLog(session, log)
            self.resolvers[session_id] = resolver
            self.packet_logs[session_id] = packets
            for start in (resolver.open, packets.open):
                if opening is None:
                    start()
                else:
                    opening.append(start)
        for door in doors:
            if opening is None:
                door.open()
            else:
                opening.append(door.open)
        self.by_session[session_id] = doors[0]
        self.forwarded[session_id] = doors[1:]
        return None

    def _attributor(self, session: Session, diag: socket.socket | None) -> Any:
        """Who opens the session's connections (proxy/daemon/attribution.py), where the run said which sandbox."""
        if not session.spec.sandbox_pid:
            if diag is not None:
                diag.close()
            return None
        from stockade.proxy.daemon.attribution import Attributor

        attributor = Attributor(session.spec.sandbox_pid, diag)
        self.attributors[session.spec.session_id] = attributor
        return attributor

    def close(self, session_id: str) -> None:
        """Close the session's door, if it has one, and record what its budget refused."""
        attributor = self.attributors.pop(session_id, None)
        if attributor is not None:
            attributor.close()
        forwards = self.forwarded.pop(session_id, [])
        for forward in forwards:
            forward.close()
        resolver = self.resolvers.pop(session_id, None)
        if resolver is not None:
            resolver.close()
        packets = self.packet_logs.pop(session_id, None)
        if packets is not None:
            packets.close()
        door = self.by_session.pop(session_id, None)
        if door is not None:
            door.close()
            for forward in forwards:  # one budget, one record of what it refused
                door.refused += forward.refused
                door.refusal = door.refusal or forward.refusal
                door.first_refused = min(filter(None, (door.first_refused, forward.first_refused)), default="")
                door.last_refused = max(door.last_refused, forward.last_refused)
            if door.refused:
                self._refused[session_id] = {"count": door.refused, "why": door.refusal}
                audit_refusals(door)

    def refused(self, session_id: str) -> dict[str, Any] | None:
        """What the ended session's budget refused ({"count", "why"}), once; None if nothing."""
        return self._refused.pop(session_id, None)

    def close_all(self) -> None:
        """The daemon is stopping: every door stops accepting (nothing is recorded here)."""
        for door in [*self.by_session.values(), *(forward for doors in self.forwarded.values() for forward in doors)]:
            door.close()
        for resolver in self.resolvers.values():
            resolver.close()
        for packets in self.packet_logs.values():
            packets.close()


def _listening(each: socket.socket) -> bool:
    return each.type == socket.SOCK_STREAM and bool(each.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))


Interception = tuple[list[socket.socket], list[socket.socket], list[socket.socket], socket.socket]


def _interception(sockets: list[socket.socket]) -> Interception | None:
    """Interception's sockets sorted by job (transparent listeners, DNS datagrams, DNS streams, the
    packet log), in proxy/control.py's order; None when there are none or one is not of its kind."""
    if len(sockets) not in INTERCEPTION_SOCKETS:
        return None
    log = sockets[3]
    families = [sockets[:3], sockets[4:7]] if len(sockets) == 7 else [sockets[:3]]
    if log.family != socket.AF_NETLINK or any(
        not _listening(transparent) or datagrams.type != socket.SOCK_DGRAM or not _listening(stream) for transparent, datagrams, stream in families
    ):
        return None
    return [f[0] for f in families], [f[1] for f in families], [f[2] for f in families], log


def audit_refusals(door: Door) -> None:
    """One record for every connection the session's budget refused (count in `repeats`)."""
    session = door.session
    record = AuditRecord(
        **session.spec.who(), scheme="connect", host="*", port=0,
        decision="deny", rule=door.refusal, time=door.first_refused, repeats=door.refused, last_time=door.last_refused,
    )  # fmt: skip
    try:
        session.writer.write(record)
    except AuditError:
        pass  # the writer is broken: the run's end says the audit failed
