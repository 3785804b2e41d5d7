"""A Linux run's network session: its spec and its sandbox's listener, handed to the daemon at once.

The order is what makes a networked run cost what an offline one does:

1. `reach` (before bwrap starts): a control connection to the running
   daemon, or to one spawned just now (launch.reach), with no ping and no
   waiting for a start.
2. `send` (once the sandbox's namespace exists): one "open" request carrying
   the spec and the listener. bwrap and the command start meanwhile; the
   command's connections wait in the listener's queue until the daemon
   accepts them, which it does only after it answered (controlserver.py).
3. `settle` (when the answer comes, while the sandbox runs): a refusal stops
   the sandbox (fail closed: nothing was served); a daemon that is exiting,
   hung or of an older protocol is replaced and asked again.
4. `end` (after the command): the session's denials. A run whose daemon
   never answered and whose listener holds no connection served nothing and
   waits for nothing: the daemon ends that session itself when it reads the
   closed connection.

Hot path: C modules of the standard library only (see launch.py).
"""

from __future__ import annotations

import select
import time

from stockade.proxy import summary
from stockade.proxy.client.launch import (
    HUNG_AFTER,
    IO_TIMEOUT,
    ProxyDaemonError,
    exchange,
    last_log_line,
    ping_or_hung,
    reach,
    read_reply,
    send_with_fds,
    socket_identity,
)
from stockade.proxy.control import PROTOCOL, START_TIMEOUT, DaemonFiles
from stockade.proxy.summary import SessionEnd

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    from collections.abc import Sequence
    from typing import Any

    from stockade.profiles.credentials import Resolved

ATTEMPTS = 3  # daemons asked in all before a run gives up (one replaced, one raced)
# refusals only an older daemon gives (the last: protocol 7's, sent interception's sockets)
OLDER_DAEMON = (
    "unknown op", "open needs exactly one listening socket", "open needs one listening socket, and one more for each of the spec's forwards",
)  # fmt: skip


class Handover:
    """One run's session on the daemon, from the first connection to the denials at its end."""

    def __init__(self, files: DaemonFiles, spec: dict[str, Any]) -> None:
        self.files = files
        self.spec = spec
        self.conn: _socket.socket | None = None
        self.started = False  # this run spawned the daemon behind `conn`
        self.identity: tuple[int, int] | None = None  # that daemon's control socket, once known
        self.listener: _socket.socket | None = None  # our copy, kept until the daemon answered
        self.forwards: list[_socket.socket] = []  # the forwarded loopback ports' listeners (bwrap/parts/forwards.py), likewise
        self.settled = False
        self.sent_at = 0.0
        self.patience = HUNG_AFTER  # how long a running daemon may take to answer (longer once a ping proved it alive)
        self.attempts = 0

    def reach(self) -> None:
        """Before the sandbox starts: a connection to a daemon, which may still be starting."""
        self._connect(None)

    def send(self, listeners: list[_socket.socket]) -> None:
        """The sandbox's listeners (the proxy's, then the spec's forwards) and the spec, in one
        request; no waiting for the answer."""
        self.listener, self.forwards = listeners[0], listeners[1:]
        try:
            self._send()
        except OSError as exc:  # the daemon went between `reach` and now (an idle exit, a failed start)
            self._lost(exc)

    def fileno(self) -> int:
        assert self.conn is not None
        return self.conn.fileno()

    def deadline(self) -> float:
        """When a daemon that has not answered is given up on: a start may take long, a running daemon may not."""
        return self.sent_at + (START_TIMEOUT if self.started else self.patience)

    def settle(self) -> None:
        """Read the daemon's answer (`conn` is readable). Raises ProxyDaemonError on a refusal."""
        assert self.conn is not None
        try:
            reply = read_reply(self.conn)
        except ProxyDaemonError as exc:  # oversized or malformed
            raise self._failed(str(exc)) from None
        except OSError as exc:  # the daemon closed the connection: died, or never came up
            self._lost(exc)
            return
        protocol = reply.get("protocol")
        if reply.get("ok") and isinstance(protocol, int) and protocol >= PROTOCOL:
            self.settled = True
            self._drop_listener()  # the daemon's copy is the only one now: its death closes the door
            return
        error = str(reply.get("error", ""))
        if reply.get("retry") or reply.get("ok") or error.startswith(OLDER_DAEMON):
            # exiting, or an older stockade's daemon: one that answers an older protocol, knows no "open",
            # or takes one listener only (before the spec's forwards)
            self._replace(error or f"the proxy daemon speaks protocol {protocol}, older than {PROTOCOL}")
            return
        raise self._failed(f"the proxy daemon refused the session: {reply.get('error', 'no reason given')}")

    def overdue(self) -> None:
        """The deadline passed without an answer: a start that failed to finish fails; a running daemon
        that still answers a ping is only slow (busy) and gets longer; one that does not is hung and replaced."""
        if self.started:
            raise self._failed(f"the proxy daemon did not start within {START_TIMEOUT:.0f}s (log: {self.files.log})")
        if self.patience < IO_TIMEOUT and ping_or_hung(self.files)[0] is not None:
            self.patience = IO_TIMEOUT
            return
        self._replace(f"the proxy daemon did not answer within {self.patience:.0f}s")

    def wait(self) -> None:
        """Block until the daemon answered (or raise)."""
        while not self.settled:
            remaining = self.deadline() - time.monotonic()
            if remaining > 0 and select.select([self], [], [], remaining)[0]:
                self.settle()
            else:
                self.overdue()

    def served_nothing(self) -> bool:
        """Before an answer: whether the sandbox left nothing waiting (so nothing was ever served).

        Every socket the daemon was handed counts: the proxy's and the forwards' listeners, and
        interception's (a connection, a DNS query, a refused packet's copy: each waits for the daemon,
        which records it once it serves the session). The queues first, then the answer: the daemon
        reads them only after its answer is sent, so queues found empty because the daemon took
        something mean the answer is there by now."""
        if self.listener is None or select.select([self.listener, *self.forwards], [], [], 0)[0]:
            return False
        return self.conn is None or not select.select([self.conn], [], [], 0)[0]

    def end(self) -> SessionEnd:
        """After the command: the session's denials; never raises (trouble becomes the end's line)."""
        if self.conn is None:  # no daemon took the session (one refused it, or none could be had): nothing was served
            self.close()
            return SessionEnd([], None)
        try:
            if not self.settled:
                if self.served_nothing():
                    self.close()  # nothing was served and nothing waits: the daemon ends the session
                    return SessionEnd([], None)
                self.wait()
            assert self.conn is not None
            self.conn.settimeout(IO_TIMEOUT)
            reply = exchange(self.conn, {"op": "end", "session_id": self.spec["session_id"]})
        except OSError as error:
            return SessionEnd([], None, summary.daemon_gone(error))
        finally:
            self.close()
        if not reply.get("ok"):
            return SessionEnd([], None, summary.daemon_gone(OSError(f"it could not end the session: {reply.get('error')}")))
        denials, audit_error, refused = list(reply.get("denials", [])), reply.get("audit_error"), summary.refused_line(reply.get("refused"))
        if isinstance(audit_error, str):
            ended = SessionEnd(denials, audit_error, summary.audit_failed(audit_error), refused)
        else:
            ended = SessionEnd(denials, None, refused=refused)
        always = reply.get("always")
        ended.always = [item for item in always if isinstance(item, dict)] if isinstance(always, list) else []
        ended.names = summary.names_of(reply.get("names"))
        exported = reply.get("export_trouble")
        ended.exported = exported if isinstance(exported, str) else ""
        return ended

    def close(self) -> None:
        """Let go of everything; a session still open on the daemon ends with the connection."""
        self._drop_listener()
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- internals -------------------------------------------------------------

    def _connect(self, replacing: tuple[int, int] | None) -> None:
        self.attempts += 1
        if self.attempts > ATTEMPTS:
            raise ProxyDaemonError("no proxy daemon took the session (each one asked was exiting, hung or refused it)")
        self.conn, self.started = reach(self.files, replacing=replacing)
        self.identity = None if self.started else socket_identity(self.files)

    def _send(self) -> None:
        assert self.conn is not None and self.listener is not None
        send_with_fds(self.conn, {"op": "open", "spec": self.spec}, [self.listener.fileno(), *(forward.fileno() for forward in self.forwards)])
        self.sent_at = time.monotonic()

    def _replace(self, why: str) -> None:
        """Ask a new daemon: this one is exiting, hung, gone or too old (`why`)."""
        replacing = self.identity or socket_identity(self.files)
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        try:
            self._connect(replacing)
        except ProxyDaemonError as error:
            raise self._failed(f"{why}; {error}") from None
        self.patience = HUNG_AFTER
        try:
            self._send()
        except OSError as exc:
            raise self._failed(f"{why}; the next proxy daemon closed the control connection ({exc})") from None

    def _lost(self, exc: OSError) -> None:
        """The daemon closed the connection: one this run started never came up; another is replaced."""
        if self.started:
            raise self._failed(f"the proxy daemon did not start: {last_log_line(self.files)} (log: {self.files.log})") from None
        self._replace(f"the proxy daemon closed the control connection ({exc})")

    def _failed(self, why: str) -> ProxyDaemonError:
        """The session failed for good: let go of the daemon and the listener, so the run's end
        neither waits for another answer nor hands a stopped sandbox's listener to a new daemon."""
        self.close()
        return ProxyDaemonError(why)

    def _drop_listener(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for forward in self.forwards:
            forward.close()
        self.forwards = []


def spec_message(
    session_id: str, command: list[str], cwd: str, rules: dict[str, Any], credentials: Sequence[Resolved] = (), approve: int = 0
) -> dict[str, Any]:
    """The spec of `open`/`register` from a plan's session rules (proxy.client.sessionclient.session_rules)
    and the run's credentials, read (proxy/client/credentials.py)."""
    return {
        "session_id": session_id,
        "command": list(command),
        "cwd": cwd,
        "allow": list(rules["allow"]),
        "deny": list(rules["deny"]),
        "audit_path": str(rules["audit_path"]),
        "origin": str(rules["origin"]),
        "mode": str(rules["mode"]),
        "http": [[str(table[0]), *(list(rules) for rules in table[1:])] for table in rules.get("http", [])],
        "credentials": [credential.to_dict() for credential in credentials],
        "approve": approve,
        "mcp": str(rules.get("mcp") or ""),
        **_export(rules),
        **({"ceiling": list(rules["ceiling"])} if "ceiling" in rules else {}),
    }


def _export(rules: dict[str, Any]) -> dict[str, Any]:
    if not rules.get("otlp"):
        return {}
    from stockade.proxy.client.sessionclient import export_for

    settings = export_for(rules)
    return {} if settings is None else {"export": settings.to_dict()}
