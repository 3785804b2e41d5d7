"""What a request's body asks of the origin, judged before the body goes on (ESCAPES 90, 91).

HTTP rules judge a request by its method and path, but an origin may act on
its body as well:
- a method override in the body: Rack (Rails, Sinatra), Laravel, Symfony and
  Express's method-override take `_method` from a POST's form fields, Laravel
  and Rails from its JSON too, and each parses names and media types its own
  way (PHP turns `.` and spaces in a name into `_`; Rack reads a POST without
  a type as a form; Laravel calls any type holding `/json` JSON);
- a request inside the body: an origin that does not read a body it does not
  expect (a GET's, or a POST's to a static route: CL.0) reads the body's
  bytes as the connection's next request, which no rule judged.

So, on a host with HTTP rules or a credential: a GET, HEAD or TRACE with a
body is refused (by its head, or at its first byte where HTTP/2 frames it
without a length); any body that starts like a request line (a method in
capitals, blanks, a target) is refused; and a POST to a path where some
method would be refused, with a type an origin might read `_method` from, is
read whole (up to HELD_LIMIT; a longer form or multipart body is watched for a
field of that name as it streams, a longer JSON one refused) and every
reading of `_method` it could carry is judged like the header forms
(decisions.method_overrides). A type no framework reads fields from (a git
pack, an octet stream) is only checked for its start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import unquote_plus

NO_BODY_METHODS = frozenset({"GET", "HEAD", "TRACE"})
HELD_LIMIT = 1 << 20  # the daemon's stream_large_bodies: a body judged whole is held up to this
START_LIMIT = 64  # bytes that tell whether a body starts like a request line
# A method in capitals, blanks (any a lenient parser splits on), then a target: origin form, `*`,
# or absolute form. Blank lines and other control bytes an origin may skip before it come first.
REQUEST_START = re.compile(rb"^[\x00-\x20]*[A-Z][A-Z_-]{1,31}[\x09-\x0d\x1c-\x20]+(?:/|\*|[hH][tT][tT][pP][sS]?:)")


def head_refusal(method: str, headers: Mapping[str, str], whole: bool = False) -> str | None:
    """Why a request's head alone is refused on a host with rules or a credential, or None;
    `whole`: its body is to be judged whole (BodyGate), which a compressed one cannot be."""
    length = headers.get("content-length", "").strip()
    if method.upper() in NO_BODY_METHODS and (headers.get("transfer-encoding") or (length and length != "0")):
        return f"a {method.upper()} with a body (an origin that does not read it would take the body as a next request)"
    if whole and headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        return "a compressed body on a path whose methods are judged (its _method could not be read)"
    return None


def may_override(content_types: Iterable[str]) -> bool:
    """Whether an origin might read `_method` from a body of these Content-Type values: none
    (Rack reads a POST without a type as a form), or any naming a form or JSON anywhere."""
    values = [value.lower() for value in content_types]
    return not values or any("form" in value or "json" in value for value in values)


def is_method_name(name: str) -> bool:
    """A field, parameter or header name an origin reads as `_method`: PHP turns `.`, ` ` and an
    open `[` into `_` and `a[b]` into an array `a`; Rack drops brackets around a name."""
    for spelled in (name, name.lstrip(" ")):  # PHP drops leading spaces; taken as `_` too, to be safe
        spelled = re.sub(r"^[\[\]]+", "", spelled.strip("\t\r\n"))
        spelled = spelled.split("[", 1)[0].rstrip("]")
        if spelled.replace(".", "_").replace(" ", "_").lower() == "_method":
            return True
    return False


def overrides_in(content_types: Iterable[str], body: bytes) -> list[tuple[str, str]]:
    """(where, method) of each `_method` the body could carry, read every way an origin might
    parse it: as a form, as JSON, and as multipart (with the boundary the type names, or the one
    the body opens with)."""
    types = [value.lower() for value in content_types]
    found = [("a _method form field", value) for value in _form_fields(body)]
    found += [("a _method JSON field", value) for value in _json_fields(body)]
    found += [("a _method multipart field", value) for value in _multipart_fields(types, body)]
    return [(where, value.strip()) for where, value in found if value.strip()]


def _form_fields(body: bytes) -> list[str]:
    text = body.decode("latin-1")
    values = []
    for pair in re.split(r"[&;]", text):
        name, _equals, value = pair.partition("=")
        if is_method_name(unquote_plus(name, encoding="latin-1")):
            values.append(unquote_plus(value, encoding="latin-1"))
    return values


def _json_fields(body: bytes) -> list[str]:
    try:
        data = json.loads(body.decode("utf-8-sig"))
    except (ValueError, UnicodeError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []
    values: list[str] = []
    for key, value in data.items():
        if isinstance(key, str) and is_method_name(key):
            values += [value] if isinstance(value, str) else [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
    return values


BOUNDARY = re.compile(r"boundary\s*=\s*(?:\"([^\"]*)\"|([^;,\s]+))", re.IGNORECASE)
PART_NAME = re.compile(r"(?:^|;)\s*name\*?\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^;\s]+))", re.IGNORECASE)


def _multipart_fields(types: list[str], body: bytes) -> list[str]:
    boundaries = {match.group(1) or match.group(2) for value in types for match in BOUNDARY.finditer(value)}
    opening = re.search(rb"(?m)^--([^\r\n]{1,200})\r?$", body[:HELD_LIMIT])  # the first boundary line, after any preamble
    if opening:
        boundaries.add(opening.group(1).decode("latin-1"))
    values: list[str] = []
    for boundary in boundaries:
        for part in body.split(b"--" + boundary.encode("latin-1")):
            head, blank, content = _split_part(part)
            if not blank:
                continue
            if any(is_method_name(name) for name in part_names(head.decode("latin-1"))):
                values.append(re.sub(rb"\r?\n$", b"", content).decode("latin-1"))
    return values


def _split_part(part: bytes) -> tuple[bytes, bool, bytes]:
    pieces = re.split(rb"\r?\n\r?\n", part.lstrip(b"\r\n"), maxsplit=1)
    return (pieces[0], True, pieces[1]) if len(pieces) == 2 else (part, False, b"")


def part_names(head: str) -> list[str]:
    """The names a part's Content-Disposition gives (quoted or not, RFC 2231 `name*=` decoded),
    wherever among its headers that one stands."""
    names = []
    for line in re.split(r"\r?\n", head):
        field, colon, value = line.partition(":")
        if colon and field.strip().lower() == "content-disposition":
            for match in PART_NAME.finditer(value):
                name = match.group(1) if match.group(1) is not None else match.group(2)
                if "''" in name:  # name*=utf-8''%5Fmethod
                    name = unquote_plus(name.split("''", 1)[1], encoding="latin-1")
                names.append(name)
    return names


class BodyGate:
    """A `request.stream` callable: the body is held until what it asks is judged, then goes on.

    `whole`: the body is read to its end (or HELD_LIMIT) and its overrides judged by `judge` (a
    reason to refuse, or None); past the limit a form or multipart body is watched for a `_method`
    field as it streams (`FieldWatch`), any other is refused. Otherwise only its start is held,
    for the request-line check. `no_body`: a method that takes none (HTTP/2 frames a body without
    any length header): its first byte is refused. `refuse(rule)` is called once (nothing of the
    body past what went on has gone on; the caller cuts the flow). Never returns an empty chunk
    while holding: in a chunked body upstream it would end it.
    """

    def __init__(
        self,
        content_types: list[str],
        whole: bool,
        judge: Callable[[list[tuple[str, str]]], str | None],
        refuse: Callable[[str], None],
        no_body: bool = False,
    ) -> None:
        self.content_types = content_types
        self.whole = whole
        self.judge = judge
        self.on_refuse = refuse
        self.no_body = no_body
        self.held: bytearray | None = bytearray()
        self.watch: FieldWatch | None = None
        self.refused = False

    def __call__(self, chunk: bytes) -> list[bytes]:
        if self.refused:
            return []
        if self.no_body and chunk:
            return self._refuse("a body on a method that takes none (an origin that does not read it would take it as a next request)")
        if self.watch is not None:
            reason = self.watch.feed(chunk)
            return self._refuse(reason) if reason else ([chunk] if chunk else [])
        held = self.held
        if held is None:
            return [chunk] if chunk else []
        held += chunk
        ended = not chunk
        if not ended and len(held) < START_LIMIT:
            return []  # its start is not known yet
        if REQUEST_START.match(bytes(held[:START_LIMIT])):
            return self._refuse("a body that starts like a request line (an origin that does not read it would run that request unjudged)")
        if self.whole:
            if ended:
                reason = self.judge(overrides_in(self.content_types, bytes(held)))
                if reason:
                    return self._refuse(reason)
            elif len(held) > HELD_LIMIT:
                return self._stream_on(bytes(held))
            else:
                return []
        self.held = None
        return [bytes(held)] if held else []

    def _stream_on(self, held: bytes) -> list[bytes]:
        """Past HELD_LIMIT: what was held is judged as far as it goes and the rest watched as it
        streams (a form's or multipart body's fields); a JSON body cannot be, and is refused."""
        kinds = " ".join(self.content_types).lower()
        if "json" in kinds:
            return self._refuse(f"a JSON body over {HELD_LIMIT >> 20} MiB on a path whose methods are judged (its _method could not be read)")
        reason = self.judge(overrides_in(self.content_types, held))
        if reason:
            return self._refuse(reason)
        self.watch = FieldWatch(self.content_types, held, self.judge)
        self.held = None
        return [held]

    def _refuse(self, reason: str) -> list[bytes]:
        self.refused = True
        self.on_refuse(reason)
        return []


class FieldWatch:
    """A body too long to hold, read as it streams for a field that names `_method`: form pairs
    (`NAME=` after `&` or `;`) and multipart part headers. A field found is judged by the name
    alone: its value may lie in bytes not yet come, so any `_method` field stops the body."""

    KEY_LIMIT = 4096  # a form name longer than this is no name an origin keeps

    def __init__(self, content_types: list[str], seen: bytes, judge: Callable[[list[tuple[str, str]]], str | None]) -> None:
        self.judge = judge
        self.key = bytearray()
        self.in_key = False
        self.line = bytearray()
        tail = seen.rsplit(b"&", 1)
        if len(tail) == 2 and b"=" not in tail[1]:
            self.key, self.in_key = bytearray(tail[1]), True
        self.line = bytearray(seen.rsplit(b"\n", 1)[-1][-self.KEY_LIMIT :])

    def feed(self, chunk: bytes) -> str | None:
        for byte in chunk:
            if self._form_byte(byte) or self._line_byte(byte):
                return "a _method field in a body too long to hold (its method could not be judged before it went on)"
        return None

    def _form_byte(self, byte: int) -> bool:
        if byte in b"&;":
            self.key, self.in_key = bytearray(), True
            return False
        if not self.in_key:
            return False
        if byte == ord("="):
            self.in_key = False
            return is_method_name(unquote_plus(bytes(self.key).decode("latin-1"), encoding="latin-1"))
        if len(self.key) < self.KEY_LIMIT:
            self.key.append(byte)
        return False

    def _line_byte(self, byte: int) -> bool:
        if byte != ord("\n"):
            if len(self.line) < self.KEY_LIMIT:
                self.line.append(byte)
            return False
        line = bytes(self.line).decode("latin-1")
        self.line = bytearray()
        return any(is_method_name(name) for name in part_names(line))
