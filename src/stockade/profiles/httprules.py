"""HTTP rules of `[network.http."HOST"]`: which requests an allowed host may be sent.

    [network.http."api.github.com"]
    allow = ["GET,HEAD /repos/**", "POST /repos/*/*/issues"]
    deny = ["* /repos/*/*/actions/**"]

A rule is `METHODS PATH`. METHODS is one method, several joined by commas,
or `*` for any. PATH is an absolute path pattern: `*` matches within one
segment, and `**` as a whole segment matches any number of segments, none
included (so `/repos/**` matches `/repos` too). The query string is not
matched. A host's requests are judged one by one: a matching deny rule
refuses, else a matching allow rule lets it through, else it is refused.

Paths are compared as the origin server will read them: percent escapes
are decoded first, and a path that decodes into something ambiguous (an
escaped `/`, a `.` or `..` segment, an empty segment, a backslash, a
control character, a `#`) is refused whatever the rules say, since servers
disagree about those and a rule could be slipped past with them.

Where common servers read one path in more than one way, every reading is
judged: a `;` starts parameters that Tomcat, Jetty and Spring drop from a
segment (`/secret;x/y` is their `/secret/y`): a request is refused when
any reading is denied or refused, and passes only when every reading is
allowed. Deny rules also cover what routers take for the same route: the
path without its trailing `/` (Express, Flask: `/x/` is `/x`), and any
letter case (servers that route case-insensitively); allow rules match
exactly what they say.

Used by the policy loader (validation and canonical spelling) and by the
daemon (matching); nothing here is on a run's cached path.
"""

from __future__ import annotations

import re

_METHOD = re.compile(r"^[A-Z][A-Z0-9_-]*$")  # RFC 9110 tokens, as methods are written
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # NUL and the other control characters, decoded
_SEGMENT = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@%-]*$")  # a path segment's characters (RFC 3986 pchar), and *


class HttpRule:
    """One parsed rule: the methods it covers (None: any) and its path pattern's segments."""

    __slots__ = ("methods", "segments")

    def __init__(self, methods: frozenset[str] | None, segments: tuple[str, ...]) -> None:
        self.methods = methods
        self.segments = segments

    def __str__(self) -> str:
        methods = "*" if self.methods is None else ",".join(sorted(self.methods))
        return f"{methods} /{'/'.join(self.segments)}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HttpRule) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"HttpRule({str(self)!r})"

    def matches(self, method: str, segments: tuple[str, ...], *, any_case: bool = False) -> bool:
        """Whether a request (method upper-cased, path already through `request_segments`) is covered;
        `any_case` compares the path whatever its letters' case (for deny rules)."""
        if self.methods is not None and method not in self.methods:
            return False
        if any_case:
            return _match(tuple(part.casefold() for part in self.segments), tuple(part.casefold() for part in segments))
        return _match(self.segments, segments)


def parse_http_rule(text: str) -> HttpRule:
    """The rule `text` spells; ValueError saying what is wrong and how it should look."""
    words = text.split()
    if len(words) != 2:
        raise ValueError(f'{text!r} is not "METHODS /path" (for example "GET /repos/**" or "GET,HEAD /api/*")')
    methods_text, path = words
    if methods_text == "*":
        methods = None
    else:
        names = [name.strip() for name in methods_text.split(",")]
        bad = [name for name in names if not _METHOD.match(name)]
        if bad:
            raise ValueError(f"{bad[0]!r} in {text!r} is not an HTTP method in capitals (GET, POST, ...) or *")
        methods = frozenset(names)
    if not path.startswith("/"):
        raise ValueError(f"the path in {text!r} must start with /")
    segments = tuple(path[1:].split("/")) if path != "/" else ("",)
    for segment in segments:
        if not _SEGMENT.match(segment):
            raise ValueError(f"the path segment {segment!r} in {text!r} holds a character a path cannot (use * or **)")
        if "**" in segment and segment != "**":
            raise ValueError(f"** in {text!r} must be a whole segment (/**/), not part of {segment!r}")
        if segment in (".", ".."):
            raise ValueError(f"{text!r} has a {segment!r} segment, which no request that is judged can have")
        if "%" in segment:
            raise ValueError(f"write the path in {text!r} without percent escapes: requests are matched decoded")
    if "" in segments[:-1]:
        raise ValueError(f"the path in {text!r} has an empty segment (//)")
    return HttpRule(methods, segments)


def request_segments(path: str) -> tuple[str, ...] | str:
    """A request target's path as decoded segments, or why it is refused (see the module docstring)."""
    if "#" in path:
        return "the request target has a # (a fragment is never sent; servers read it in different ways)"
    raw = path.split("?", 1)[0]
    if not raw.startswith("/"):
        return "the request path is not absolute"
    segments = []
    for part in raw[1:].split("/") if raw != "/" else [""]:
        try:
            decoded = _unquote(part)
        except ValueError as exc:
            return str(exc)
        if "/" in decoded or "\\" in decoded or _CONTROL.search(decoded):
            return "the request path hides a /, \\ or NUL (or another control character) in a percent escape"
        if decoded in (".", ".."):
            return "the request path has a . or .. segment"
        segments.append(decoded)
    if "" in segments[:-1]:
        return "the request path has an empty segment (//)"
    return tuple(segments)


def request_readings(path: str) -> tuple[tuple[str, ...], ...] | str:
    """Every way common servers read a request's path (see the module docstring), the plain one
    first; or why the path is refused, when some reading is ambiguous in itself."""
    segments = request_segments(path)
    if isinstance(segments, str):
        return segments
    readings = [segments]
    if any(";" in part for part in segments):  # path parameters: dropped by Tomcat, Jetty, Spring
        bare = tuple(part.split(";", 1)[0] for part in segments)
        if any(part in (".", "..") for part in bare):
            return "the request path has a . or .. segment before a ; (servers that drop ;parameters read it as one)"
        if "" in bare[:-1]:
            return "the request path has a segment that is only ;parameters (an empty segment to some servers)"
        readings.append(bare)
    return tuple(dict.fromkeys(readings))


def judge(allow: tuple[HttpRule, ...], deny: tuple[HttpRule, ...], method: str, path: str) -> tuple[bool, str]:
    """(allowed, the rule that decided or why none did) for one request to a host with HTTP rules:
    denied if any reading of its path is, allowed only if every reading is."""
    readings = request_readings(path)
    if isinstance(readings, str):
        return False, readings
    method = method.upper()
    # /x/ is /x to many routers: a deny rule for /x refuses /x/ too (an allow rule says itself which it means).
    slashless = tuple(reading[:-1] for reading in readings if len(reading) > 1 and reading[-1] == "")
    for segments in (*readings, *slashless):
        for rule in deny:
            if rule.matches(method, segments, any_case=True):
                return False, f"deny {rule}"
    decided = ""
    for segments in readings:
        found = next((rule for rule in allow if rule.matches(method, segments)), None)
        if found is None:
            return False, "no HTTP rule allows it"
        decided = decided or f"allow {found}"
    return True, decided


def suggested_rule(method: str, path: str) -> str:
    """The narrowest allow rule for a refused request: its method and its path as written."""
    segments = request_segments(path)
    shown = "/" + "/".join(segments) if isinstance(segments, tuple) else path.split("?", 1)[0]
    return f"{method.upper()} {shown}"


def _match(pattern: tuple[str, ...], segments: tuple[str, ...]) -> bool:
    """Whether the segments match the pattern, `**` spanning any number of them. A table of
    (pattern position, segment position) reached: at most len(pattern) * len(segments) steps,
    so no path (64 KiB of `a/`) makes a rule with several `**` backtrack for minutes while the
    daemon's one event loop waits."""
    reached = {0}  # segment positions the pattern so far can end at
    for part in pattern:
        if not reached:
            return False
        if part == "**":
            reached = set(range(min(reached), len(segments) + 1))
        else:
            reached = {at + 1 for at in reached if at < len(segments) and _segment_matches(part, segments[at])}
    return len(segments) in reached


def _segment_matches(pattern: str, segment: str) -> bool:
    if "*" not in pattern:
        return pattern == segment
    parts = pattern.split("*")
    if not segment.startswith(parts[0]) or not segment.endswith(parts[-1]) or len(segment) < len(parts[0]) + len(parts[-1]):
        return False
    position = len(parts[0])
    end = len(segment) - len(parts[-1])
    for middle in parts[1:-1]:
        found = segment.find(middle, position, end)
        if found < 0:
            return False
        position = found + len(middle)
    return True


def _unquote(part: str) -> str:
    """Percent-decoding as a server does it; ValueError for a broken escape or bytes that are not UTF-8."""
    if "%" not in part:
        return part
    data = bytearray()
    index = 0
    raw = part.encode("utf-8", "surrogateescape")
    while index < len(raw):
        if raw[index] == 0x25:  # %
            digits = raw[index + 1 : index + 3]
            if len(digits) != 2 or not all(chr(d) in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("the request path has a broken percent escape")
            data.append(int(digits, 16))
            index += 3
        else:
            data.append(raw[index])
            index += 1
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the request path decodes to bytes that are not UTF-8") from None
