"""proxy/bodies.py: what a body asks of the origin, judged before it goes on."""

from __future__ import annotations

import json

import pytest

from stockade.proxy import bodies
from stockade.proxy.bodies import BodyGate, head_refusal, overrides_in


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


def test_overrides_are_read_as_each_body_type_is_parsed() -> None:
    assert overrides_in("application/x-www-form-urlencoded", b"name=x&_method=DELETE") == [("the _method form field", "DELETE")]
    assert overrides_in("application/x-www-form-urlencoded; charset=utf-8", b"%5Fmethod=delete") == [("the _method form field", "delete")]
    assert overrides_in("application/json", json.dumps({"_method": "PUT", "a": 1}).encode()) == [("the _method JSON field", "PUT")]
    assert overrides_in("application/vnd.api+json", b'{"\\u005fmethod": "PATCH"}') == [("the _method JSON field", "PATCH")]
    body = b'--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'
    assert overrides_in("multipart/form-data; boundary=b", body) == [("the _method multipart field", "DELETE")]
    # Controls: what no origin reads as an override.
    assert overrides_in("text/plain", b"_method=DELETE") == []
    assert overrides_in("application/json", b'[{"_method": "DELETE"}]') == []
    assert overrides_in("application/json", b"{not json") == []
    assert overrides_in("application/x-www-form-urlencoded", b"method=DELETE&x_method=GET") == []


def _gate(whole: bool, verdict: str | None = None) -> tuple[BodyGate, list[str], list[list[tuple[str, str]]]]:
    refused: list[str] = []
    judged: list[list[tuple[str, str]]] = []

    def judge(found: list[tuple[str, str]]) -> str | None:
        judged.append(found)
        return verdict if found else None

    return BodyGate("application/x-www-form-urlencoded", whole, judge, refused.append), refused, judged


@pytest.mark.parametrize("body", [b"DELETE /items HTTP/1.1\r\nHost: api.test\r\n\r\n", b"\r\n\r\nGET /admin HTTP/1.0\r\n\r\n", b"PUT  /x   HTTP/2\n"])
def test_a_body_that_starts_with_a_request_line_never_goes_on(body: bytes) -> None:
    gate, refused, _judged = _gate(whole=False)
    given = [part for index in range(0, len(body), 5) for part in gate(body[index : index + 5])] + gate(b"")
    assert given == [] and len(refused) == 1 and "request line" in refused[0]


def test_an_ordinary_body_goes_on_whole_once_its_first_line_is_known() -> None:
    gate, refused, _judged = _gate(whole=False)
    assert gate(b'{"name": ') == []  # held: its first line may still turn out to be a request line
    assert gate(b'"x"}\n{"more": 1}') == [b'{"name": "x"}\n{"more": 1}']
    assert gate(b"rest") == [b"rest"] and gate(b"") == [] and refused == []


def test_a_post_judged_whole_is_held_to_its_end_and_refused_for_a_denied_override() -> None:
    gate, refused, judged = _gate(whole=True, verdict="http deny DELETE /items")
    assert gate(b"a=1&") == [] and gate(b"_method=DELETE") == []
    assert gate(b"") == [] and refused == ["http deny DELETE /items"]
    assert judged == [[("the _method form field", "DELETE")]]


def test_a_post_judged_whole_without_an_override_goes_on() -> None:
    gate, refused, _judged = _gate(whole=True, verdict="refused")
    assert gate(b"a=1&b=2") == [] and gate(b"") == [b"a=1&b=2"] and refused == []


def test_a_body_too_large_to_judge_whole_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "HELD_LIMIT", 8)
    gate, refused, _judged = _gate(whole=True)
    assert gate(b"a=1&b=2&c=3") == [] and len(refused) == 1 and "over" in refused[0]


def test_a_compressed_body_to_be_judged_whole_is_refused_by_its_head() -> None:
    assert head_refusal("POST", {"content-encoding": "gzip", "content-length": "9"}, whole=True) is not None
    assert head_refusal("POST", {"content-encoding": "gzip", "content-length": "9"}, whole=False) is None
    assert head_refusal("POST", {"content-encoding": "identity", "content-length": "9"}, whole=True) is None
