"""proxy/rules/bodies.py: what a body asks of the origin, judged before it goes on.

The spellings come from two hostile reviews (issue 34): each is one a real
framework reads as `_method`, or a request line a lenient origin parses.
"""

from __future__ import annotations

import json

import pytest

from stockade.proxy.rules import bodies
from stockade.proxy.rules.bodies import BodyGate, head_refusal, is_method_name, may_override, overrides_in

FORM = ["application/x-www-form-urlencoded"]


@pytest.mark.parametrize(
    ("method", "headers", "refused"),
    [
        ("GET", {"content-length": "20"}, True),
        ("head", {"transfer-encoding": "chunked"}, True),
        ("TRACE", {"content-length": "1"}, True),
        ("GET", {"content-length": "0"}, False),
        ("GET", {}, False),
        ("POST", {"content-length": "20"}, False),
        ("DELETE", {"content-length": "5"}, False),
    ],
)
def test_a_get_head_or_trace_with_a_body_is_refused_by_its_head(method: str, headers: dict[str, str], refused: bool) -> None:
    assert (head_refusal(method, headers) is not None) is refused


def test_a_compressed_body_to_be_judged_whole_is_refused_by_its_head() -> None:
    assert head_refusal("POST", {"content-encoding": "gzip", "content-length": "9"}, whole=True) is not None
    assert head_refusal("POST", {"content-encoding": "gzip", "content-length": "9"}, whole=False) is None
    assert head_refusal("POST", {"content-encoding": "identity", "content-length": "9"}, whole=True) is None


@pytest.mark.parametrize("name", ["_method", "_METHOD", "[_method]", "_method[]", "_method[0]", ".method", " method", "_method]"])
def test_every_name_an_origin_reads_as_method(name: str) -> None:
    assert is_method_name(name)


@pytest.mark.parametrize("name", ["method", "x_method", "_methods", "meth_od", "_method_x"])
def test_names_no_origin_reads_as_method(name: str) -> None:
    assert not is_method_name(name)


@pytest.mark.parametrize(
    ("types", "expected"),
    [([], True), (FORM, True), (["application/x-www-form-urlencoded, text/plain"], True), (["text/plain; x=/json"], True),
     (["application/jsonp"], True), (["multipart/form-data; boundary=b"], True), (["application/x-git-upload-pack-request"], False),
     (["application/octet-stream"], False), (["text/plain"], False), ([""], True), (["multipart/mixed; boundary=b"], True),
     (["multipart/related; boundary=b"], True)],
)  # fmt: skip
def test_which_types_an_origin_might_read_method_from(types: list[str], expected: bool) -> None:
    assert may_override(types) is expected


@pytest.mark.parametrize(
    ("types", "body"),
    [
        (FORM, b"name=x&_method=DELETE"),
        (FORM, b"%5Fmethod=delete"),
        ([], b"_method=DELETE"),  # Rack: a POST without a type is a form
        (FORM, b"[_method]=DELETE"),
        (FORM, b"_method[]=DELETE"),
        (FORM, b".method=DELETE"),
        (FORM, b"+method=DELETE"),
        (["application/json"], json.dumps({"_method": "DELETE", "a": 1}).encode()),
        (["application/vnd.api+json"], b'{"\\u005fmethod": "DELETE"}'),
        (["text/plain; x=/json"], b'{"_method": "DELETE"}'),
        (["application/json"], b'\xef\xbb\xbf{"_method": ["DELETE"]}'),
        (["multipart/form-data; boundary=b"], b'--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'),
        (['multipart/form-data; boundary="b"'], b'--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'),
        (
            ["multipart/form-data; BOUNDARY=b"],
            b"--b\r\nContent-Type: text/plain\r\nContent-Disposition: form-data; name=_method\r\n\r\nDELETE\r\n--b--\r\n",
        ),
        (["multipart/form-data"], b'preamble name="x"\r\n--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'),
        (["multipart/form-data; boundary=b"], b"--b\r\nContent-Disposition: form-data; name*=utf-8''%5Fmethod\r\n\r\nDELETE\r\n--b--\r\n"),
        (["multipart/form-data; boundary=b"], b'--b\r\nContent-Disposition: form-data;\r\n name="_method"\r\n\r\nDELETE\r\n--b--\r\n'),
        (["multipart/form-data; boundary=b"], b'--b\r\nX-Note: Content-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'),
        (["multipart/mixed; boundary=b"], b'--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'),
    ],
)
def test_every_reading_of_an_override_is_found(types: list[str], body: bytes) -> None:
    assert [value.upper() for _where, value in overrides_in(types, body)] == ["DELETE"]


@pytest.mark.parametrize(
    ("types", "body"),
    [(FORM, b"method=DELETE&x_method=GET"), (["application/json"], b'[{"_method": "DELETE"}]'), (["application/json"], b"{not json"),
     (FORM, b"_method="), (["text/plain"], b"plain words")],
)  # fmt: skip
def test_what_no_origin_reads_as_an_override(types: list[str], body: bytes) -> None:
    assert overrides_in(types, body) == []


def _gate(whole: bool, verdict: str | None = None, types: list[str] | None = None, no_body: bool = False) -> tuple[BodyGate, list[str]]:
    refused: list[str] = []

    def judge(found: list[tuple[str, str]]) -> str | None:
        return verdict if found else None

    return BodyGate(types if types is not None else FORM, whole, judge, refused.append, no_body), refused


SMUGGLED = [
    b"delete /items/lower HTTP/1.1\r\n\r\n",  # Werkzeug and Django upper-case the method
    b"DELETE\xa0/items/nbsp\xa0HTTP/1.1\r\n\r\n",  # str.split() splits on NBSP
    b"\x85DELETE /items/nel HTTP/1.1\r\n\r\n",
    b"DELETE items/rel HTTP/1.1\r\n\r\n",  # routers re-add the /
    b"DELETE x://api.test/items/scheme HTTP/1.1\r\n\r\n",
    b"\r\n" * 40 + b"DELETE /items/crlf HTTP/1.1\r\n\r\n",
    b"GET /admin\r\n",  # HTTP/0.9
    b"DELETE /items HTTP/1.1\r\nHost: api.test\r\n\r\n",
    b"\r\n\r\nGET /admin HTTP/1.0\r\n\r\n",
    b"PUT  /x   HTTP/2\n",
    b"DELETE\t/items/3\tHTTP/1.1\r\n\r\n",
    b"\x0cDELETE /items/4 HTTP/1.1\r\n\r\n",
    b"\x0b\x1fDELETE /items/5 HTTP/1.1\r\n\r\n",
    b"DELETE /items/2?pad=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: api.test\r\n\r\n",
    b"GET http://api.test/x HTTP/1.1\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\n\r\n",
]


@pytest.mark.parametrize("body", SMUGGLED)
def test_a_body_that_starts_like_a_request_line_never_goes_on(body: bytes) -> None:
    gate, refused = _gate(whole=False)
    given = [part for index in range(0, len(body), 5) for part in gate(body[index : index + 5])] + gate(b"")
    assert given == [] and len(refused) == 1 and "request line" in refused[0]


@pytest.mark.parametrize("body", [b'{"name": "DELETE /items/1 HTTP/1.1"}', b"plain text\nDELETE /items/1 HTTP/1.1\r\n", b"Hello World, how are you",
                                  b"GET", b"Dear reader, see HTTP/1.1 below\n", b"x" * 200, b"a b c\n", b"\x00\x01binary\xff"])  # fmt: skip
def test_an_ordinary_body_goes_on_once_its_start_is_known(body: bytes) -> None:
    gate, refused = _gate(whole=False)
    given = [part for index in range(0, len(body), 7) for part in gate(body[index : index + 7])] + gate(b"")
    assert b"".join(given) == body and refused == []


def test_a_body_on_a_method_that_takes_none_is_refused_at_its_first_byte() -> None:
    """HTTP/2 frames a GET's body without a length header: the head cannot tell."""
    gate, refused = _gate(whole=False, no_body=True)
    assert gate(b"") == [] and refused == []
    gate, refused = _gate(whole=False, no_body=True)
    assert gate(b"x") == [] and len(refused) == 1


def test_a_post_judged_whole_is_held_to_its_end_and_refused_for_a_denied_override() -> None:
    gate, refused = _gate(whole=True, verdict="http deny DELETE /items")
    assert gate(b"a=1&") == [] and gate(b"_method=DELETE") == []
    assert gate(b"") == [] and refused == ["http deny DELETE /items"]


def test_a_post_judged_whole_without_an_override_goes_on() -> None:
    gate, refused = _gate(whole=True, verdict="refused")
    assert gate(b"a=1&b=2") == [] and gate(b"") == [b"a=1&b=2"] and refused == []


def test_a_long_form_streams_on_and_is_stopped_at_a_method_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "HELD_LIMIT", 128)
    monkeypatch.setattr(bodies, "LINE_LIMIT", 64)
    gate, refused = _gate(whole=True, verdict="refused")
    assert gate(b"file=" + b"a" * 200) == [b"file=" + b"a" * 200]  # past the limit: judged so far, goes on
    assert gate(b"b" * 50) == [b"b" * 50] and gate(b"&x=1") == [b"&x=1"]
    assert gate(b"&_met") == [b"&_met"] and gate(b"hod=DELETE") == [] and len(refused) == 1


def test_a_long_multipart_upload_streams_on_and_is_stopped_at_a_method_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "HELD_LIMIT", 128)
    monkeypatch.setattr(bodies, "LINE_LIMIT", 64)
    types = ["multipart/form-data; boundary=b"]
    gate, refused = _gate(whole=True, verdict="refused", types=types)
    start = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n' + b"\x00method\xff" * 20
    assert gate(start) == [start] and refused == []  # "method" in a file's bytes is no field
    assert gate(b'\r\n--b\r\nContent-Disposition: form-data; name="_method"\r\n') == [] and len(refused) == 1


def test_a_long_json_body_on_a_judged_path_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "HELD_LIMIT", 100)
    monkeypatch.setattr(bodies, "LINE_LIMIT", 64)
    gate, refused = _gate(whole=True, verdict="refused", types=["application/json"])
    assert gate(b'{"a": "' + b"x" * 140) == [] and len(refused) == 1 and "JSON" in refused[0]


def test_a_long_form_name_padded_before_method_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rack strips the brackets before a name: `[[[...[_method` past the watcher's window still names it."""
    monkeypatch.setattr(bodies, "HELD_LIMIT", 128)
    monkeypatch.setattr(bodies, "LINE_LIMIT", 64)
    for padding in (b"[" * 5000, b"%5B" * 3000):
        gate, refused = _gate(whole=True, verdict="refused")
        assert gate(b"file=" + b"a" * 200) != [] and refused == []
        gate(b"&" + padding)
        assert gate(b"_method=DELETE") == [] and len(refused) == 1, padding[:10]


def test_a_long_part_head_with_the_name_last_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "HELD_LIMIT", 128)
    monkeypatch.setattr(bodies, "LINE_LIMIT", 64)
    gate, refused = _gate(whole=True, verdict="refused", types=["multipart/form-data; boundary=b"])
    assert gate(b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\n' + b"a" * 200) != []
    head = b'\r\n--b\r\nContent-Disposition: form-data; filename="' + b"p" * 5000 + b'"; name="_method"\r\n'
    assert gate(head) == [] and len(refused) == 1
