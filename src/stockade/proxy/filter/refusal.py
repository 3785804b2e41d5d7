"""How the filter says no: the 403 and 407 bodies a sandboxed tool prints, and the record each refusal leaves.

Shared by the addons that answer a request themselves (SessionAuth,
Decisions, Metering), so a refusal reads and is recorded the same wherever
it happens.
"""

from __future__ import annotations

import logging
from typing import Any

from mitmproxy import connection, ctx, http, tcp

from stockade.profiles.hints import after_allow, allow_command, http_fix
from stockade.profiles.text import shown
from stockade.proxy.audit import AuditRecord, redact_path
from stockade.proxy.filter.sessions import Session
from stockade.proxy.filter.state import META, PROCESS
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.rules.decide import Decision, canonical_target

logger = logging.getLogger(__name__)

INTERNAL_ERROR = "stockade internal error (request refused; see the daemon log)"
DENIED_BODY_LIMIT = 1 << 20  # the daemon's stream_large_bodies: denied bodies up to this size still get a 403


def track(flow: http.HTTPFlow, session: Session, decision: Decision, *, scheme: str, path: str | None) -> Tracked:
    """Start the flow's audit record (kept in `flow.metadata[META]`) for `decision`."""
    request = flow.request
    record = AuditRecord(
        **session.spec.who(),
        scheme=scheme,
        host=decision.host or shown_host(request.host),
        port=request.port,
        method=request.method,
        path=redact_path(path) if path is not None else None,
        decision="allow" if decision.allowed else "deny",
        rule=decision.rule,
        process=flow.metadata.get(PROCESS),
    )
    tracked = Tracked(session, record)
    flow.metadata[META] = tracked
    return tracked


def refuse(flow: http.HTTPFlow, tracked: Tracked, decision: Decision) -> None:
    """Record the denial and answer it with a 403 that says how to allow it (or close, see below)."""
    tracked.deny(decision)
    if body_too_big_to_answer(flow.request):
        flow.kill()
        return
    flow.response = text_response(403, denial_text(tracked.record.host, tracked.record.port, decision, tracked.session.spec.origin))


def refuse_session(flow: http.HTTPFlow, session: Session, reason: str) -> None:
    """Refuse a request of a known session for `reason` (no rule of its policy), with a record."""
    request = flow.request
    decision = Decision(False, reason, "", shown_host(request.host))
    tracked = track(flow, session, decision, scheme=request.scheme or "http", path=request.path)
    refuse(flow, tracked, decision)


def fail(flow: http.HTTPFlow) -> None:
    """Deny after an unexpected error, with a record when the session is known."""
    tracked = flow.metadata.get(META)
    if tracked is not None:
        tracked.deny(Decision(False, INTERNAL_ERROR, "", tracked.record.host))
    if body_too_big_to_answer(flow.request):
        if flow.killable:
            flow.kill()
        return
    flow.response = text_response(403, f"stockade: {INTERNAL_ERROR}\n")


def cut(flow: http.HTTPFlow | tcp.TCPFlow) -> None:
    """Stop a flow now, whatever is in flight: mitmproxy 11 goes on relaying a TCP flow, or an
    HTTP body that streams, killed in a hook (mitmproxy #4711), so its client connection is closed too."""
    if flow.killable:
        flow.kill()
    handler = handler_of(flow.client_conn)
    if handler is not None and flow.client_conn in handler.transports:
        handler.close_connection(flow.client_conn)


def cut_tcp(flow: tcp.TCPFlow) -> None:
    """`cut` for a TCP flow, and the message being relayed is not sent on."""
    cut(flow)
    for message in flow.messages:
        message.content = b""


def handler_of(client: connection.Client) -> Any:
    """mitmproxy's ConnectionHandler of a client connection, or None."""
    proxyserver = ctx.master.addons.get("proxyserver")
    if proxyserver is None:
        return None
    found = proxyserver.connections.get(client.id)
    if getattr(found, "client", None) is client:
        return found
    # Else by identity: the key of `connections` differs between mitmproxy versions.
    return next((h for h in proxyserver.connections.values() if getattr(h, "client", None) is client), None)


def unrecordable(flow: http.HTTPFlow, tracked: Tracked) -> None:
    """An allowed request whose start record could not be written: refused, saying why."""
    tracked.written = True  # its final record could not be written either
    del flow.metadata[META]
    flow.response = text_response(403, f"stockade: {tracked.cut}; the request was refused because it could not be recorded\n")


def denial_text(host: str, port: int, decision: Decision, origin: str) -> str:
    """The one line a person or a coding agent reads in a 403."""
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    where = origin or "the stockade policy"
    command = allow_command(decision.hint, origin) if decision.hint else ""
    http = http_fix(decision.hint, where) if decision.hint else None
    if http is not None:
        fix = http
    elif command:
        fix = f"to allow it, run: {command}{after_allow(origin)}"
    elif decision.hint:
        fix = f"to allow it, add `{decision.hint}` under [network] in {where}"
    elif decision.rule.startswith('deny "'):
        fix = f"it is listed under deny in [network] of {where}"
    elif decision.rule.startswith("http deny "):
        fix = f'"{decision.rule.removeprefix("http deny ")}" is under deny in a [network.http] table of {where}'
    elif decision.rule.startswith("credential "):
        from stockade.proxy.summary import credential_fix

        fix = credential_fix(decision.rule.split(" ", 2)[1], where)
    elif decision.rule.startswith("refused: "):
        fix = "no HTTP rule can allow a path servers read in different ways; send it as a plain path"
    else:
        fix = "no policy change allows this request"
    return f"stockade: the sandbox's policy blocked {target} ({decision.rule}); going around the proxy will not work; {fix}\n"


def auth_required_response() -> http.Response:
    return http.Response.make(
        407,
        "stockade: this proxy serves registered stockade sessions only (Proxy-Authorization required).\n",
        {"Proxy-Authenticate": 'Basic realm="stockade"', "Content-Type": "text/plain; charset=utf-8"},
    )


def text_response(status: int, text: str) -> http.Response:
    """A body a sandboxed tool may print to the user's terminal: one line per line, shown safely."""
    body = "\n".join(shown(line) for line in text.split("\n"))
    return http.Response.make(status, body, {"Content-Type": "text/plain; charset=utf-8"})


def body_too_big_to_answer(request: http.Request) -> bool:
    """True if a denied request's body cannot be waited for: it is killed instead of answered.

    mitmproxy sends a response set in `requestheaders` only after reading the
    whole request body, and cannot both answer and stream; a body over
    `stream_large_bodies` (or of unknown, chunked length) would either sit in
    memory or break the stream. Such a request gets its connection closed.
    """
    if request.method == "CONNECT":
        return False
    if "transfer-encoding" in request.headers:
        return True
    length = request.headers.get("content-length", "0").strip()
    return not length.isdigit() or int(length) > DENIED_BODY_LIMIT


def shown_host(host: str) -> str:
    """A host as records and answers show it: canonical, or escaped and cut if it is not a host at all."""
    try:
        return str(canonical_target(host))
    except ValueError:
        return host.encode("unicode_escape").decode("ascii")[:255]


def where(flow: http.HTTPFlow) -> str:
    return f"{shown_host(flow.request.host)}:{flow.request.port}"
