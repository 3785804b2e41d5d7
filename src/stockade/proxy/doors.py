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
from stockade.proxy.budget import Budget
from stockade.proxy.door import Bind, Door
from stockade.proxy.sessions import Session


class Doors:
    """The open doors by session id, sharing one `Budget` of connections."""

    def __init__(self, bind: Bind, budget: Budget | None = None) -> None:
        self.bind = bind  # binds an accepted connection to its session (auth.SessionAuth.bind)
        self.budget = budget if budget is not None else Budget()  # connections each door may hold (budget.py)
        self.by_session: dict[str, Door] = {}  # session id -> its sandbox's listener
        self.forwarded: dict[str, list[Door]] = {}  # session id -> its forwarded loopback ports' doors (bwrap/forwards.py)
        self._refused: dict[str, dict[str, Any]] = {}  # ended session -> connections its budget refused

    def listen(self, session_id: str, session: Session, fds: list[int], opening: list[Callable[[], None]] | None = None) -> str | None:
        """Open the session's doors on the listening sockets in `fds`: the proxy's, then one for each
        of the spec's forwards; None once open, else why not.

        The sockets taken are removed from `fds` (the caller closes whatever is left there). With
        `opening`, the doors start accepting only when the caller runs what it appends there.
        """
        if session_id in self.by_session:
            return f"session {session_id!r} already has its listener"
        targets: list[str | None] = [None, *session.spec.forwards]
        if len(fds) != len(targets):
            return "listen needs one listening socket, and one more for each of the spec's forwards"
        listeners = [socket.socket(fileno=fd) for fd in fds]
        fds.clear()
        if any(each.type != socket.SOCK_STREAM or not each.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) for each in listeners):
            for each in listeners:
                each.close()
            return "listen needs a listening TCP socket"
        doors = [Door(session, listener, self.bind, self.budget, target) for listener, target in zip(listeners, targets, strict=True)]
        for door in doors:
            if opening is None:
                door.open()
            else:
                opening.append(door.open)
        self.by_session[session_id] = doors[0]
        self.forwarded[session_id] = doors[1:]
        return None

    def close(self, session_id: str) -> None:
        """Close the session's door, if it has one, and record what its budget refused."""
        forwards = self.forwarded.pop(session_id, [])
        for forward in forwards:
            forward.close()
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


def audit_refusals(door: Door) -> None:
    """One record for every connection the session's budget refused (count in `repeats`)."""
    session = door.session
    record = AuditRecord(
        session=session.spec.session_id, command=session.spec.command, scheme="connect", host="*", port=0,
        decision="deny", rule=door.refusal, time=door.first_refused, repeats=door.refused, last_time=door.last_refused,
    )  # fmt: skip
    try:
        session.writer.write(record)
    except AuditError:
        pass  # the writer is broken: the run's end says the audit failed
