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
LINE_LIMIT = 64 << 10  # the longest request line common origins take (Python's http.server: 65536)
# What any lenient parser skips before a request or splits its words on: control bytes and space,
# and the two Python's str.split() also takes (NEL, NBSP), on a line decoded as Latin-1.
BLANK = bytes([*range(0x21), 0x85, 0xA0])
WORD = re.compile(rb"[^" + re.escape(BLANK) + rb"]+")
METHOD = re.compile(rb"^[A-Za-z_-]{1,32}$")


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
    """Whether an origin might read `_method` from a body of these Content-Type values: none, or
    an empty one (Rack reads a POST without a media type as a form), or any naming a form, JSON
    or a multipart type anywhere (Rack parses multipart/mixed and multipart/related too)."""
    values = [value.lower() for value in content_types if value.strip()]
    return not values or any(word in value for value in values for word in ("form", "json", "multipart"))


def request_line(held: bytes, ended: bool) -> bool | None:
    """Whether the body starts as a request an origin that does not read it would run: after any
    blank bytes, a first line whose words are a method (any case: Werkzeug and Django upper-case
    it) and a target then HTTP/x (any target: routers re-add a missing `/`), or GET and a target
    (HTTP/0.9). None while the first line is not all here."""
    start = held.lstrip(BLANK)
    end = start.find(b"\n")
    if end < 0 and not ended and len(held) < LINE_LIMIT:
        return None
    if not start:
        return len(held) >= LINE_LIMIT  # that much blank before anything: no body an origin expects
    line = start[:end] if end >= 0 else start
    words = WORD.findall(line[:LINE_LIMIT])
    if not words or not METHOD.match(words[0]):
        return False
    if end < 0 and len(start) >= LINE_LIMIT:
        return len(words) >= 2  # a method and a target longer than a line an origin keeps reading
    if len(words) == 3:
        return words[2][:5].upper() == b"HTTP/"
    return len(words) == 2 and words[0].upper() == b"GET"


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
# As Rack reads a part's name: `Content-Disposition:` anywhere in its head (even inside another
# header's value), then anything but a colon (a folded line too), `;`, `name=` quoted or not.
PART_NAME = re.compile(r"content-disposition:[^:]*?;\s*name\*?\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^;\s]+))", re.IGNORECASE)
NAME_PARAM = re.compile(r"(?:^|[;\s])name\*?\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^;\s]+))", re.IGNORECASE)


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
    """The names a part's head gives (quoted or not, RFC 2231 `name*=` decoded): every
    `name=` after a Content-Disposition anywhere in the head, as Rack's unanchored pattern
    finds them, and every one on a Content-Disposition line."""
    found = [match.group(1) if match.group(1) is not None else match.group(2) for match in PART_NAME.finditer(head)]
    for line in re.split(r"\r?\n", head):
        field, colon, value = line.partition(":")
        if colon and field.strip().lower() == "content-disposition":
            found += [match.group(1) if match.group(1) is not None else match.group(2) for match in NAME_PARAM.finditer(value)]
    names = []
    for name in found:
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
        starts = request_line(bytes(held[: LINE_LIMIT + 1]), ended)
        if starts is None:
            return []  # its first line is not all here yet
        if starts:
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
        self.watch = FieldWatch(held)
        self.held = None
        return [held]

    def _refuse(self, reason: str) -> list[bytes]:
        self.refused = True
        self.on_refuse(reason)
        return []


class FieldWatch:
    """A body too long to hold, read as it streams for a field that names `_method`: form pairs
    (`NAME=` after `&` or `;`) and multipart part heads (any line with a `name=` naming it). A
    field found is judged by its name alone: its value may lie in bytes not yet come, so any
    `_method` field stops the body. A name or line longer than WINDOW is judged by its first and
    its last WINDOW bytes (padding before the name, `[[[...[_method`, is what Rack strips)."""

    WINDOW = 4096

    def __init__(self, seen: bytes) -> None:
        self.key = _Window(self.WINDOW)
        self.in_key = False
        tail = re.split(rb"[&;]", seen)
        if len(tail) > 1 and b"=" not in tail[-1]:
            self.key.extend(tail[-1])
            self.in_key = True
        self.line = _Window(self.WINDOW)
        self.line.extend(seen.rsplit(b"\n", 1)[-1])

    def feed(self, chunk: bytes) -> str | None:
        for byte in chunk:
            if self._form_byte(byte) or self._line_byte(byte):
                return "a _method field in a body too long to hold (its method could not be judged before it went on)"
        return None

    def _form_byte(self, byte: int) -> bool:
        if byte in b"&;":
            self.key, self.in_key = _Window(self.WINDOW), True
            return False
        if not self.in_key:
            return False
        if byte == ord("="):
            self.in_key = False
            return any(is_method_name(unquote_plus(part.decode("latin-1"), encoding="latin-1")) for part in self.key.parts())
        self.key.append(byte)
        return False

    def _line_byte(self, byte: int) -> bool:
        if byte != ord("\n"):
            self.line.append(byte)
            return False
        parts = self.line.parts()
        self.line = _Window(self.WINDOW)
        for part in parts:
            text = part.decode("latin-1")
            names = part_names(text) + [m.group(1) if m.group(1) is not None else m.group(2) for m in NAME_PARAM.finditer(text)]
            if any(is_method_name(name) for name in names):
                return True
        return False


class _Window:
    """The first and the last `size` bytes of a run of bytes too long to keep whole."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.head = bytearray()
        self.tail = bytearray()

    def append(self, byte: int) -> None:
        if len(self.head) < self.size:
            self.head.append(byte)
            return
        self.tail.append(byte)
        if len(self.tail) > 2 * self.size:
            del self.tail[: len(self.tail) - self.size]

    def extend(self, data: bytes) -> None:
        for byte in data:
            self.append(byte)

    def parts(self) -> list[bytes]:
        """The head, and the tail three ways: its cut may fall inside a %XX escape."""
        tail = bytes(self.tail[-self.size :])
        return [bytes(self.head), *([tail, tail[1:], tail[2:]] if tail else [])]
