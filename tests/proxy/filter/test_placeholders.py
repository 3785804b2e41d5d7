"""Where a placeholder may go and the swap itself: judged on mitmproxy requests, no network."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mitmproxy import http
from mitmproxy.test import tutils

from stockade.proxy.control import SessionCredential
from stockade.proxy.filter.placeholders import BodyWatch, ResponseMask, carried, judge, mask_headers, masked, secrets_of, swap
from stockade.proxy.rules.decide import Decision

PLACEHOLDER = "stockade-placeholder-t-" + "ab" * 20
VALUE = "real-value-42"
SECRETS = secrets_of((SessionCredential("T", PLACEHOLDER, VALUE, ("api.test",), "Authorization", "key"),))


def request(path: str = "/x", **headers: str) -> http.Request:
    return tutils.treq(host="api.test", port=443, path=path.encode(), headers=http.Headers(host="api.test", **headers))


def test_its_header_and_its_parameter_are_swapped() -> None:
    req = request(f"/x?key={PLACEHOLDER}&b=2", authorization=f"Bearer {PLACEHOLDER}")
    swaps = judge(SECRETS, req, "api.test", tls=True)
    assert isinstance(swaps, list) and len(swaps) == 1
    swap(req, swaps)
    assert req.headers["authorization"] == f"Bearer {VALUE}" and req.path == f"/x?key={VALUE}&b=2"
    assert req.headers["accept-encoding"] == "identity"


def test_basic_credentials_are_decoded_and_swapped() -> None:
    req = request(authorization="Basic " + base64.b64encode(f"user:{PLACEHOLDER}".encode()).decode())
    swaps = judge(SECRETS, req, "api.test", tls=True)
    assert isinstance(swaps, list)
    swap(req, swaps)
    assert base64.b64decode(req.headers["authorization"].split()[1]) == f"user:{VALUE}".encode()


def test_a_request_without_a_placeholder_needs_no_swap() -> None:
    assert judge(SECRETS, request(authorization="Bearer mine"), "api.test", tls=True) == []


@pytest.mark.parametrize(
    ("req", "host", "tls", "words"),
    [
        (request(authorization=f"Bearer {PLACEHOLDER}"), "evil.test", True, "to evil.test, which is not one of its hosts"),
        (request(authorization=f"Bearer {PLACEHOLDER}"), "api.test", False, "over plain HTTP"),
        (request(x_debug=PLACEHOLDER), "api.test", True, "in the header x-debug"),
        (request(x_debug=PLACEHOLDER.upper()), "api.test", True, "in the header x-debug"),
        (request(f"/log/{PLACEHOLDER}"), "api.test", True, "in the path"),
        (request(f"/log/%73{PLACEHOLDER[1:]}"), "api.test", True, "in the path"),
        (request(f"/x?other={PLACEHOLDER}"), "api.test", True, "in the query other"),
    ],
)
def test_anywhere_else_is_refused(req: http.Request, host: str, tls: bool, words: str) -> None:
    judged = judge(SECRETS, req, host, tls=tls)
    assert isinstance(judged, Decision) and not judged.allowed and words in judged.rule, judged
    assert judged.rule.startswith("credential T ")


def test_a_credential_host_is_terminated_and_others_are_not() -> None:
    assert carried(SECRETS, "API.test.", 443) and not carried(SECRETS, "other.test", 443) and not carried((), "api.test", 443)


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=50))
def test_a_body_is_stopped_at_a_placeholder_however_it_is_split(prefix: bytes, size: int) -> None:
    found: list[str] = []
    watch = BodyWatch(SECRETS, None, lambda secret: found.append(secret.name))
    body = prefix + PLACEHOLDER.encode() + b"tail"
    sent = b"".join(part for i in range(0, len(body), size) for part in watch(body[i : i + size]))
    assert found == ["T"] and PLACEHOLDER.encode() not in sent
    clean = BodyWatch(SECRETS, None, lambda secret: found.append("again"))
    passed = b"".join(part for i in range(0, len(prefix), size) for part in clean(prefix[i : i + size]))
    assert passed == prefix or PLACEHOLDER.encode() in prefix


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=50))
def test_a_value_in_an_answer_is_masked_however_it_is_split(prefix: bytes, size: int) -> None:
    mask = ResponseMask([VALUE], None, "", lambda: None)
    body = prefix + VALUE.encode() + prefix
    parts = [part for i in range(0, len(body), size) for part in mask(body[i : i + size])] + list(mask(b""))
    assert b"" not in parts  # never an empty chunk: in a chunked answer it would end the body
    out = b"".join(parts)
    assert VALUE.encode() not in out and len(out) == len(body)  # same length: the framing holds


def test_an_encoded_answer_is_cut_and_headers_are_masked() -> None:
    said: list[bool] = []
    mask = ResponseMask([VALUE], None, "gzip", lambda: said.append(True))
    assert mask(b"\x1f\x8b...") == [] and said == [True]
    response = tutils.tresp(headers=http.Headers(x_echo=f"token {VALUE}"))
    mask_headers(response.headers, [VALUE])
    assert response.headers["x-echo"] == "token " + masked(VALUE).decode()


def test_mask_forms_cover_the_encodings_an_echo_sends_back() -> None:
    import base64
    from urllib.parse import quote, urlencode

    from stockade.proxy.filter.placeholders import mask_forms

    value = "sk/S3cret+Value=Seen/Only+Outside=="
    forms = mask_forms(value)
    assert forms[0] == max(forms, key=len) and value in forms
    lower_hex = quote(value, safe="").replace("%2F", "%2f").replace("%2B", "%2b").replace("%3D", "%3d")
    for sent in (urlencode({"key": value}), lower_hex, '{"v": "' + value.replace("/", "\\/") + '"}'):
        assert any(form in sent for form in forms), sent
    for user in ("", "u", "us", "x-access-token"):  # Basic credentials, whatever the user name's length
        for after in ("", ":", ":pw"):
            encoded = base64.b64encode(f"{user}:{value}{after}".encode()).decode()
            assert any(form in encoded for form in forms), (user, after)
    assert all(len(form) >= 12 for form in forms)  # never a short piece that would match unrelated text
    assert mask_forms("short") == ("short",)


def test_mask_text_masks_a_value_quoted_by_repr_or_html() -> None:
    from stockade.proxy.filter.placeholders import mask_text

    value = "sk/S3cret+Value'Seen/Only+Outside"
    said = f"Bad response line: {('HTTP/1.1 2xx ' + value).encode()!r} &#x27;{value.replace(chr(39), '&#x27;')}"
    shown = mask_text(said, [value])
    assert value not in shown and "S3cret+Value" not in shown and len(shown) == len(said)


def test_a_parameter_that_is_not_utf8_goes_on_as_it_came_beside_the_swap() -> None:
    """Review of issue 34: `?key=PH&x=%ff` raised UnicodeEncodeError in the swap (a 403 and a traceback)."""
    req = request(f"/x?key={PLACEHOLDER}&x=%ff")
    swaps = judge(SECRETS, req, "api.test", tls=True)
    assert isinstance(swaps, list) and swaps
    swap(req, swaps)
    assert req.path == f"/x?key={VALUE}&x=%FF"
