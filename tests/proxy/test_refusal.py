"""Tests of refusal.py (how a refusal reads)."""

from __future__ import annotations

import pytest

from stockade.proxy import refusal
from stockade.proxy.decide import Decision


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

