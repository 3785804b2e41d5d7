"""Tests of refusal.py (how a refusal reads)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mitmproxy import http
from mitmproxy.test import tflow, tutils

from stockade.proxy.control import SessionSpec
from stockade.proxy.filter import refusal
from stockade.proxy.filter.sessions import Registry
from stockade.proxy.rules.decide import Decision


@pytest.mark.parametrize(
    "host, port, rule, expected",
    [
        pytest.param(
            "x.test",
            443,
            Decision(False, "no allow rule matches", 'allow = ["x.test"]'),
            "run: stockade allow x.test --policy /p/.stockade.toml",
            id="hint",
        ),
        pytest.param("b.test", 443, Decision(False, 'deny "b.test"'), "listed under deny", id="deny rule"),
        pytest.param("2001:db8::1", 443, Decision(False, "IP literal not listed", 'allow = ["2001:db8::1"]'), "[2001:db8::1]:443", id="v6"),
        pytest.param("bad", 443, Decision(False, "invalid host name"), "no policy change", id="nothing to add"),
    ],
)
def test_denial_text(host: str, port: int, rule: Decision, expected: str) -> None:
    assert expected in refusal.denial_text(host, port, rule, "/p/.stockade.toml")


@pytest.mark.parametrize(
    "method, headers, too_big",
    [
        pytest.param("GET", {}, False, id="no body"),
        pytest.param("POST", {"Content-Length": str(refusal.DENIED_BODY_LIMIT)}, False, id="at the limit"),
        pytest.param("POST", {"Content-Length": str(refusal.DENIED_BODY_LIMIT + 1)}, True, id="over the limit"),
        pytest.param("POST", {"Transfer-Encoding": "chunked"}, True, id="chunked"),
        pytest.param("CONNECT", {"Transfer-Encoding": "chunked"}, False, id="CONNECT is always answered"),
    ],
)
def test_body_too_big_to_answer(method: str, headers: dict[str, str], too_big: bool) -> None:
    request = tutils.treq(method=method.encode(), headers=http.Headers(**{k.replace("-", "_"): v for k, v in headers.items()}))
    assert refusal.body_too_big_to_answer(request) is too_big


def test_auth_required_is_a_407_that_asks_for_basic() -> None:
    response = refusal.auth_required_response()
    assert response.status_code == 407 and response.headers["Proxy-Authenticate"] == 'Basic realm="stockade"'


def test_fail_records_the_known_session_and_answers(
    make_spec: Callable[..., SessionSpec], audit_lines: Callable[[], list[dict[str, object]]]
) -> None:
    _token, session = Registry().register(make_spec())
    f = tflow.tflow()
    refusal.track(f, session, Decision(True, 'allow "x"', "", "x.test"), scheme="http", path="/")
    refusal.fail(f)
    assert f.response is not None and f.response.status_code == 403 and refusal.INTERNAL_ERROR.encode() in f.response.content
    assert [(r["decision"], r["rule"]) for r in audit_lines()] == [("deny", refusal.INTERNAL_ERROR)]
