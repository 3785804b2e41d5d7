"""The bodies around a credential's swap: requests watched for placeholders, responses masked.

Decisions judges a request's line and headers and swaps each value in
(proxy/filter/placeholders.py); bodies stream, so they are handled here, on the way,
wrapped around Metering's counters (this addon runs after Metering):
- a request body of a session with credentials is watched: a placeholder in
  it stops the request there, recorded as a denial;
- a response to a request a value was swapped into has that value masked in
  its headers and body, so a server that echoes it (an error page, a debug
  endpoint) does not hand it to the sandbox.

mitmproxy swallows exceptions from hooks and carries on (the flow passes),
so every hook here catches everything itself and stops the flow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mitmproxy import http

from stockade.proxy.filter import refusal
from stockade.proxy.filter.placeholders import BodyWatch, ResponseMask, mask_forms, mask_headers, masked
from stockade.proxy.filter.sessions import Session
from stockade.proxy.filter.state import HELD_BODY, META, SESSION, SWAPPED
from stockade.proxy.filter.tracking import Tracked
from stockade.proxy.rules.decide import Decision, Secret

logger = logging.getLogger(__name__)

ENCODED_ANSWER = "an answer in a content or transfer coding to a request that carried a credential (it cannot be checked for the value)"


def _found_in_body(flow: http.HTTPFlow, tracked: Tracked) -> Callable[[Secret], None]:
    def found(secret: Secret) -> None:
        tracked.deny(Decision(False, f"credential {secret.name} in the request body, where it may not travel", "", tracked.record.host))
        refusal.cut(flow)

    return found


class Swapping:
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        session: Session | None = flow.metadata.get(SESSION)
        tracked: Tracked | None = flow.metadata.get(META)
        if session is None or not session.rules.secrets or tracked is None or tracked.written or flow.response is not None:
            return
        try:
            if flow.metadata.get(HELD_BODY) is not None:
                return  # read whole before it goes on: watched in `request`
            inner = flow.request.stream if callable(flow.request.stream) else None
            flow.request.stream = BodyWatch(session.rules.secrets, inner, _found_in_body(flow, tracked))
        except Exception:
            logger.exception("requestheaders failed; stopping %s", refusal.where(flow))
            refusal.cut(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        """Trailers (HTTP/2, chunked) go on after this hook: a placeholder in them stops the request;
        so does one in a body read whole (HELD_BODY), before any of it goes on."""
        session: Session | None = flow.metadata.get(SESSION)
        tracked: Tracked | None = flow.metadata.get(META)
        if session is not None and session.rules.secrets and tracked is not None and flow.metadata.get(HELD_BODY) is not None:
            if flow.response is None and not tracked.written:
                watch = BodyWatch(session.rules.secrets, None, _found_in_body(flow, tracked))
                watch(flow.request.raw_content or b"")
                if watch.stopped:
                    return
        trailers = flow.request.trailers
        if session is None or not session.rules.secrets or not trailers or flow.response is not None:
            return
        try:
            for secret in session.rules.secrets:
                folded = secret.placeholder.lower()
                if any(folded in f"{name}: {value}".lower() for name, value in trailers.items(multi=True)):
                    if tracked is not None:
                        why = f"credential {secret.name} in the request trailers, where it may not travel"
                        tracked.deny(Decision(False, why, "", tracked.record.host))
                    flow.request.trailers = None
                    refusal.cut(flow)
                    return
        except Exception:
            logger.exception("request failed; stopping %s", refusal.where(flow))
            refusal.cut(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        """Trailers go to the client after this hook (the body streamed already): masked as the headers were."""
        swapped: list[str] | None = flow.metadata.get(SWAPPED)
        response = flow.response
        if not swapped or response is None or not response.trailers:
            return
        try:
            mask_headers(response.trailers, list(dict.fromkeys(form for value in swapped for form in mask_forms(value))))
        except Exception:
            logger.exception("response failed; stopping %s", refusal.where(flow))
            response.trailers = None
            refusal.cut(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        """mitmproxy answers a failed flow with an error page that quotes what the server sent (a
        malformed status line, say): on a credential's host that could be the value. The flow is
        killed instead, so no page is sent (Metering recorded the error, masked, before this)."""
        if flow.metadata.get(SWAPPED) and flow.killable:
            flow.kill()

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        swapped: list[str] | None = flow.metadata.get(SWAPPED)
        tracked: Tracked | None = flow.metadata.get(META)
        response = flow.response
        if not swapped or response is None:
            return
        try:
            values = list(dict.fromkeys(form for value in swapped for form in mask_forms(value)))  # as it went, and as an echo encodes it
            mask_headers(response.headers, values)
            reason = response.reason.encode("latin-1", "replace") if isinstance(response.reason, str) else bytes(response.reason or b"")
            for secret in values:  # the status line's reason phrase is the origin's to write too
                reason = reason.replace(secret.encode(), masked(secret))
            response.reason = reason.decode("latin-1")
            coding = unreadable_coding(response.headers)
            inner = response.stream if callable(response.stream) else None

            def encoded() -> None:
                if tracked is not None:
                    tracked.deny(Decision(False, ENCODED_ANSWER, "", tracked.record.host))
                refusal.cut(flow)

            response.stream = ResponseMask(values, inner, coding, encoded)
        except Exception:
            logger.exception("responseheaders failed; stopping %s", refusal.where(flow))
            refusal.cut(flow)


def unreadable_coding(headers: http.Headers) -> str:
    """The codings a body comes in that the daemon cannot read on the way, or "": any content
    coding but identity, and any transfer coding but chunked (which mitmproxy takes off), in
    any case, spacing, list or repeated header; the client would decode them, the mask would not."""
    fields = [value for name in ("content-encoding", "transfer-encoding") for value in headers.get_all(name)]
    codings = [part.strip().lower() for value in fields for part in value.split(",")]
    return ", ".join(coding for coding in codings if coding not in ("", "identity", "chunked"))
