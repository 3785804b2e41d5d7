"""Credentials the sandbox holds only as placeholders: where each may go, and the swap.

A session's credential (profiles/credentials.py) comes with a placeholder made
for that run. On a request the daemon sees (plain HTTP, or a tunnel whose
TLS it terminates), `judge` finds every placeholder in the request line and
headers, and either refuses the request or names the swaps to make:
- a placeholder goes on only to one of its credential's hosts, over TLS, in
  its one named header (as a Bearer or token value, or inside Basic
  credentials) or its one named query parameter; it is then swapped for the
  value (`swap`);
- anywhere else (another header, the path, another parameter, another
  host, plain HTTP, a body: `BodyWatch`) the request is refused and audited.
The value never goes back: every response of a credential's host (to a
request that carried it or not: a host may keep it and show it later) has it
masked, same length, in its headers, trailers and body, as it is and in the encodings
an echo would send it back in: %-escaped, base64 (Basic), JSON (`mask_forms`,
`mask_headers`, `ResponseMask`).

The placeholder itself is no secret; refusing it where it may not go keeps a
tool's mistake (or a planted script's try) from going unseen, and keeps the
swap to one place the policy named.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from mitmproxy import http

from stockade.proxy.control import SessionCredential
from stockade.proxy.rules.decide import Decision, Secret, Target, canonical_target

MASK = b"stockade-masked-"  # what a credential's value becomes in a response, repeated to its length


def secrets_of(credentials: tuple[SessionCredential, ...]) -> tuple[Secret, ...]:
    return tuple(Secret(credential) for credential in credentials)


def carried(secrets: tuple[Secret, ...], host: str, port: int) -> tuple[Secret, ...]:
    """The credentials that may go to host:port: the daemon terminates such a tunnel's TLS to swap them in."""
    if not secrets:
        return ()
    try:
        target = canonical_target(host)
    except ValueError:
        return ()
    return tuple(secret for secret in secrets if secret.goes_to(target, port))


class Swap:
    """Where one placeholder was found in a request that may carry it there."""

    __slots__ = ("secret", "header", "query")

    def __init__(self, secret: Secret, header: bool, query: bool) -> None:
        self.secret = secret
        self.header = header
        self.query = query


def judge(secrets: tuple[Secret, ...], request: http.Request, host: str, tls: bool) -> Decision | list[Swap]:
    """A refusal, or the swaps to make, for the placeholders in a request's line and headers.

    `host` is the canonical host the request goes to; `tls` whether the
    client's side is TLS the daemon terminated (a value never goes in clear)."""
    swaps: list[Swap] = []
    try:
        target: Target | None = canonical_target(host)
    except ValueError:
        target = None
    for secret in secrets:
        places = _places(secret.placeholder, request)
        if not places:
            continue
        allowed_here = target is not None and secret.goes_to(target, request.port)
        if not allowed_here:
            return _refusal(secret, f"to {host}, which is not one of its hosts", host)
        if not tls:
            return _refusal(secret, "over plain HTTP (a credential goes only over TLS)", host)
        wrong = [place for place in places if place not in (f"header {secret.header}", f"query {secret.query}")]
        if wrong:
            return _refusal(secret, f"in the {wrong[0]}, where it may not travel (only in {_allowed(secret)})", host)
        swaps.append(Swap(secret, f"header {secret.header}" in places, f"query {secret.query}" in places))
    return swaps


def _refusal(secret: Secret, why: str, host: str) -> Decision:
    return Decision(False, f"credential {secret.name} {why}", "", host)


def _allowed(secret: Secret) -> str:
    found = ([f"the {secret.header} header"] if secret.header else []) + ([f"the {secret.query} query parameter"] if secret.query else [])
    return " or ".join(found)


def _places(placeholder: str, request: http.Request) -> list[str]:
    """Each place in the request line and headers that holds `placeholder` ("header NAME", "query NAME", "path", "host")."""
    found: list[str] = []
    folded = placeholder.lower()
    if folded in request.host.lower() or folded in (request.host_header or "").lower():
        found.append("host")
    path, _, query = request.path.partition("?")
    if folded in unquote(path).lower():
        found.append("path")
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        found += [f"query {name}" for name, value in pairs if folded in value.lower()]
        if any(folded in name.lower() for name, _value in pairs) or (not pairs and folded in unquote(query).lower()):
            found.append("query")
    for name, value in request.headers.items(multi=True):
        if name.lower() == "host":
            continue
        if folded in value.lower() or folded in _basic(value).lower() or folded in name.lower():
            found.append(f"header {name.lower()}")
    return list(dict.fromkeys(found))


def _basic(value: str) -> str:
    """The decoded credentials of a `Basic` authorization value, or ""."""
    scheme, _, encoded = value.strip().partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(encoded.strip(), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def swap(request: http.Request, swaps: list[Swap]) -> None:
    """Put each value where its placeholder is, in the one place it may be."""
    for one in swaps:
        secret = one.secret
        if one.header:
            values = [_swapped_header(value, secret) for value in request.headers.get_all(secret.header)]
            request.headers.set_all(secret.header, values)
        if one.query:
            pairs = [(name, value.replace(secret.placeholder, secret.value) if name == secret.query else value)
                     for name, value in request.query.items(multi=True)]  # fmt: skip
            path = request.path.partition("?")[0]
            # the other parameters go on as they came: bytes that are not UTF-8 (%ff) included
            request.path = f"{path}?{urlencode(pairs, quote_via=quote, encoding='utf-8', errors='surrogateescape')}"
    # The answer is masked on its way back (ResponseMask): it must come as it is, not compressed.
    request.headers["Accept-Encoding"] = "identity"


def _swapped_header(value: str, secret: Secret) -> str:
    if secret.placeholder in value:
        return value.replace(secret.placeholder, secret.value)
    decoded = _basic(value)
    if secret.placeholder in decoded:
        scheme = value.strip().partition(" ")[0]
        return f"{scheme} {base64.b64encode(decoded.replace(secret.placeholder, secret.value).encode()).decode()}"
    return value


MIN_CORE = 12  # characters: a shorter piece of an encoding could match unrelated text, and tells little


@lru_cache(maxsize=64)
def mask_forms(value: str) -> tuple[str, ...]:
    """Every form a value may come back in, longest first: as it is, and as an echo would encode it.

    The value goes out as it is (a Bearer value), %-escaped (a query
    parameter, urlencode) or in base64 (inside Basic credentials, after a
    user name the sandbox chose); an endpoint that reflects what it got
    sends it back in that form, or JSON- or HTML-escaped. For base64, the
    characters that only the value's bytes decide, at each of the three
    alignments it can start at: whatever surrounds it (a user name, a
    password after it), those characters are in the encoding, and masking
    them leaves at most two bytes of the value on each side.
    """
    from urllib.parse import quote, quote_plus

    forms = {value, quote(value, safe=""), quote(value), quote_plus(value), html.escape(value)}
    forms |= {_lower_escapes(form) for form in forms}  # a server that escapes again may use lower-case hex
    escaped = json.dumps(value)[1:-1]
    forms |= {escaped, escaped.replace("/", "\\/"), json.dumps(value, ensure_ascii=False)[1:-1]}
    raw = value.encode("utf-8")
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + raw).decode().rstrip("=")
        start = 4 if shift else 0
        end = len(encoded) if (shift + len(raw)) % 3 == 0 else (shift + len(raw)) // 3 * 4
        core = encoded[start:end]
        if len(core) >= MIN_CORE:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return tuple(sorted(forms, key=len, reverse=True))


def _escapes(form: str) -> set[str]:
    return {form[at + 1 : at + 3] for at in range(len(form)) if form[at] == "%"}


def _lower_escapes(form: str) -> str:
    for code in _escapes(form):
        form = form.replace("%" + code, "%" + code.lower())
    return form


def masked(value: str) -> bytes:
    """What a value becomes in a response: the same length, so no framing changes."""
    size = len(value.encode("utf-8"))
    return (MASK * (size // len(MASK) + 1))[:size]


def mask_text(text: str, values: list[str]) -> str:
    """`text` with each of `values` masked in every form `mask_forms` knows (repr's escapes too)."""
    for form in dict.fromkeys(form for value in values for form in mask_forms(value)):
        for shown in (form, repr(form)[1:-1], html.escape(form)):
            text = text.replace(shown, masked(shown).decode())
    return text


def mask_headers(headers: http.Headers, values: list[str]) -> None:
    """A response's headers or trailers, each value masked where it stands (in a field's name too)."""
    fields = list(headers.fields)
    for index, (name, value) in enumerate(fields):
        for secret in values:
            shown = masked(secret)
            name, value = name.replace(secret.encode(), shown), value.replace(secret.encode(), shown)
        fields[index] = (name, value)
    headers.fields = tuple(fields)


class ResponseMask:
    """A response `stream` callable: the body goes on with each value masked, split across chunks or not.

    Holds back the last (longest value - 1) bytes of each chunk until the next
    one shows whether a value starts there. A body in a content coding
    (gzip, br) cannot be read on the way: it is cut (the request asked for
    `identity`)."""

    def __init__(self, values: list[str], inner: Callable[[bytes], Any] | None, encoded: str, on_encoded: Callable[[], None]) -> None:
        self.values = [value.encode("utf-8") for value in values]
        self.keep = max(len(value) for value in self.values) - 1
        self.inner = inner
        self.encoded = encoded
        self.on_encoded = on_encoded
        self.pending = b""

    def __call__(self, chunk: bytes) -> Any:
        if self.encoded and chunk:
            self.on_encoded()
            return []
        data = self.pending + chunk
        for value in self.values:
            data = data.replace(value, masked(value.decode("utf-8")))
        if chunk:
            cut = max(len(data) - self.keep, 0)
            data, self.pending = data[:cut], data[cut:]
        else:
            self.pending = b""
        # Never an empty chunk (all of it held back): in a chunked answer "0\r\n\r\n" would end it.
        return self.inner(data) if self.inner is not None else ([data] if data else [])


class BodyWatch:
    """A request `stream` callable: a body holding a placeholder is stopped where it stands.

    The head went upstream already (bodies stream), so the request cannot be
    answered with a 403: `on_found` records the refusal and the flow is cut
    before the bytes holding the placeholder go on."""

    def __init__(self, secrets: tuple[Secret, ...], inner: Callable[[bytes], Any] | None, on_found: Callable[[Secret], None]) -> None:
        self.secrets = secrets
        self.needles = [secret.placeholder.encode() for secret in secrets]
        self.keep = max(len(needle) for needle in self.needles) - 1
        self.inner = inner
        self.on_found = on_found
        self.tail = b""
        self.stopped = False

    def __call__(self, chunk: bytes) -> Any:
        if self.stopped:
            return []
        window = (self.tail + chunk).lower()
        for secret, needle in zip(self.secrets, self.needles, strict=True):
            if needle in window:
                self.stopped = True
                self.on_found(secret)
                return []
        self.tail = window[-self.keep :] if self.keep else b""
        return self.inner(chunk) if self.inner is not None else ([chunk] if chunk else [])
