"""How many connections a session may hold at once: its share of the daemon's descriptors.

Every sandbox of a user shares one daemon, and with it one RLIMIT_NOFILE. A
spliced tunnel holds about COST descriptors (the sandbox's socket, the
origin's, a pipe each way), so at the common limit of 1024 a single sandbox
holding ~127 tunnels used every descriptor, and every other session's
connections failed with EMFILE for as long as it held them. The daemon keeps
RESERVE descriptors for itself (control connections, audit files, mitmproxy's
own), and guarantees each open session a floor of connections that the others
cannot take; past its floor, a session may use what is free. A connection over
budget is refused at the door with a 503 that says why, and counted for the
run's summary and its audit record.

The limit is read at each admission (one getrlimit call), so a limit lowered
or raised while the daemon runs (`prlimit`) takes effect at once.
"""

from __future__ import annotations

import resource

RESERVE = 64  # descriptors no session may take
COST = 8  # descriptors one connection may hold (spliced: 2 sockets, 2 pipes; with slack for mitmproxy)
FLOOR = 16  # connections each open session may always open, whatever the others hold
MAX_PER_SESSION = 256  # even on a machine with descriptors to spare


class Budget:
    """Live connections per session, admitted against the daemon's descriptor limit."""

    def __init__(self) -> None:
        self.live: dict[str, int] = {}  # open session id -> connections it holds now

    def open(self, session_id: str) -> None:
        self.live.setdefault(session_id, 0)

    def close(self, session_id: str) -> None:
        self.live.pop(session_id, None)

    def capacity(self) -> int:
        """Connections the daemon can hold in all, from its soft descriptor limit."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return MAX_PER_SESSION * max(1, len(self.live))
        return max(0, (soft - RESERVE) // COST)

    def admit(self, session_id: str) -> str | None:
        """Take one connection for the session; None when admitted, else why it was refused."""
        held = self.live.get(session_id, 0)
        if held >= MAX_PER_SESSION:
            return f"the sandbox held {held} proxy connections at once, the most one run may"
        capacity = self.capacity()
        floor = min(FLOOR, capacity // max(1, 2 * len(self.live)))  # floors take at most half
        if held >= floor:
            kept_for_others = sum(max(0, floor - n) for other, n in self.live.items() if other != session_id)
            if sum(self.live.values()) + 1 + kept_for_others > capacity:
                return (
                    f"the sandbox held {held} proxy connections at once, its share of the proxy daemon's "
                    f"{capacity} (its descriptor limit; raise it with `ulimit -n` before the daemon starts)"
                )
        self.live[session_id] = held + 1
        return None

    def release(self, session_id: str) -> None:
        if self.live.get(session_id, 0) > 0:
            self.live[session_id] -= 1


class Pace:
    """At most `rate` events a second past a burst of `burst`, for one session whatever the
    number of its connections (GCRA: one due time, each event takes the next slot)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.interval = 1.0 / rate
        self.burst = burst
        self.due = 0.0  # monotonic time the next event's slot begins

    def delay(self, now: float) -> float:
        """Seconds this event waits for its slot: 0 within the burst."""
        self.due = max(self.due, now) + self.interval
        return max(0.0, self.due - now - self.burst * self.interval)

    def admit(self, now: float) -> bool:
        """Whether this event fits now; one that does not is dropped, and takes no slot."""
        due = max(self.due, now) + self.interval
        if due - now > self.burst * self.interval:  # what delay() would make it wait
            return False
        self.due = due
        return True
