"""What a request's body asks of the origin, judged before the body goes on (ESCAPES 90, 91).

HTTP rules judge a request by its method and path, but an origin may act on
its body as well:
- a method override in the body: Rack (Rails, Sinatra), Laravel, Symfony and
  Express's method-override take `_method` from a POST's form fields, and
  Laravel and Rails from its JSON too, so `POST /items` with `_method=DELETE`
  deletes;
- a request inside the body: an origin that does not read a body it does not
  expect (a GET's, or a POST's to a static route: CL.0) reads the body's
  bytes as the connection's next request, which no rule judged.

So, on a host with HTTP rules or a credential, a GET, HEAD or TRACE with a body
is refused before anything goes on (RFC 9110 gives it no meaning; the
strictest origins refuse it), a body that starts with a request line is
refused, and a POST whose form, JSON or multipart body names `_method` has
that method judged like the header forms (decisions.method_overrides). Only
what must be read is held: the first line for the request-line check, and the
whole body (up to HELD_LIMIT) only for a POST on a path where some method would
be refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

NO_BODY_METHODS = frozenset({"GET", "HEAD", "TRACE"})
HELD_LIMIT = 1 << 20  # the daemon's stream_large_bodies: a body judged whole is held up to this
LINE_LIMIT = 8 << 10  # a first line longer than this is no request line an origin would take
# METHOD SP request-target SP HTTP/digit, after the blank lines an origin skips before a request
REQUEST_LINE = re.compile(rb"^[\r\n\t ]*[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32} +\S+ +HTTP/\d", re.ASCII)
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"


def head_refusal(method: str, headers: Mapping[str, str], whole: bool = False) -> str | None:
    """Why a request's head alone is refused on a host with rules or a credential, or None;
    `whole`: its body is to be judged whole (BodyGate), which a compressed one cannot be."""
    length = headers.get("content-length", "").strip()
    if method.upper() in NO_BODY_METHODS and (headers.get("transfer-encoding") or (length and length != "0")):
        return f"a {method.upper()} with a body (an origin that does not read it would take the body as a next request)"
    if whole and headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        return "a compressed body on a path whose methods are judged (its _method could not be read)"
    return None


def overrides_in(content_type: str, body: bytes) -> list[tuple[str, str]]:
    """(where, method) of each `_method` the body carries, as an origin parsing it by its type would."""
    kind = content_type.split(";", 1)[0].strip().lower()
    found: list[tuple[str, str]] = []
    if kind == FORM:
        from mitmproxy.net.http import url

        text = body.decode("latin-1")
        found += [("the _method form field", value.strip()) for key, value in url.decode(text) if key == "_method"]
    elif kind == MULTIPART:
        from mitmproxy.net.http import multipart

        try:
            fields = multipart.decode_multipart(content_type, body)
        except (ValueError, UnicodeError):
            fields = []
        found += [("the _method multipart field", value.decode("latin-1").strip()) for key, value in fields if key == b"_method"]
    elif kind.endswith("/json") or kind.endswith("+json"):
        try:
            data = json.loads(body)
        except (ValueError, UnicodeError, RecursionError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("_method"), str):
            found.append(("the _method JSON field", data["_method"].strip()))
    return found


class BodyGate:
    """A `request.stream` callable: the body is held until what it asks is judged, then goes on.

    `whole`: the body is read to its end (or HELD_LIMIT) and its overrides judged by `judge`
    (a reason to refuse, or None); otherwise only its first line is held, for the request-line
    check. `refuse(rule)` is called once (nothing of the body has gone on; the caller cuts the
    flow). Never returns an empty chunk while holding: in a chunked body upstream it would end it.
    """

    def __init__(self, content_type: str, whole: bool, judge: Callable[[list[tuple[str, str]]], str | None], refuse: Callable[[str], None]) -> None:
        self.content_type = content_type
        self.whole = whole
        self.judge = judge
        self.on_refuse = refuse
        self.held: bytearray | None = bytearray()
        self.refused = False

    def __call__(self, chunk: bytes) -> list[bytes]:
        held = self.held
        if held is None:
            return [chunk] if chunk else []
        if self.refused:
            return []
        held += chunk
        ended = not chunk
        reason = self._first_line(bytes(held), ended)
        if reason is None and self.whole:
            if len(held) > HELD_LIMIT:
                reason = f"a body over {HELD_LIMIT >> 20} MiB on a path whose methods are judged (its _method could not be read)"
            elif not ended:
                return []
            else:
                reason = self.judge(overrides_in(self.content_type, bytes(held)))
        elif reason is None and not self._line_known(bytes(held), ended):
            return []
        if reason:
            self.refused = True
            self.on_refuse(reason)
            return []
        self.held = None
        return [bytes(held)] if held else []

    @staticmethod
    def _line_known(held: bytes, ended: bool) -> bool:
        """Whether enough of the body is here to tell if it starts with a request line."""
        start = held.lstrip(b"\r\n\t ")
        return ended or b"\n" in start or len(held) >= LINE_LIMIT

    def _first_line(self, held: bytes, ended: bool) -> str | None:
        if not self._line_known(held, ended):
            return None
        if REQUEST_LINE.match(held[:LINE_LIMIT]):
            return "a body that starts with a request line (an origin that does not read it would run that request unjudged)"
        return None
