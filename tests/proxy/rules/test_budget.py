"""A session's share of the daemon's descriptors (budget.py), at chosen limits."""

from __future__ import annotations

import resource

import pytest

from stockade.proxy.rules import budget


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The soft descriptor limit the budget sees (a list, so a test can change it)."""
    value = [1024]
    monkeypatch.setattr(resource, "getrlimit", lambda what: (value[0], value[0]))
    return value


def fill(b: budget.Budget, session: str) -> int:
    """Admit connections for `session` until refused; how many it got."""
    got = 0
    while b.admit(session) is None:
        got += 1
        assert got <= budget.MAX_PER_SESSION
    return got


def test_one_session_leaves_every_other_its_floor(limit: list[int]) -> None:
    b = budget.Budget()
    for name in ("hostile", "victim", "third"):
        b.open(name)
    capacity = (1024 - budget.RESERVE) // budget.COST
    floor = min(budget.FLOOR, capacity // 6)
    assert fill(b, "hostile") == capacity - 2 * floor
    assert fill(b, "victim") == floor  # its floor was kept; what is free past it, the hostile holds
    assert fill(b, "third") == floor
    assert sum(b.live.values()) == capacity


def test_a_released_connection_can_be_taken_again(limit: list[int]) -> None:
    b = budget.Budget()
    b.open("a")
    got = fill(b, "a")
    assert b.admit("a") is not None
    b.release("a")
    assert b.admit("a") is None and b.live["a"] == got


def test_plenty_of_descriptors_still_caps_a_session(limit: list[int]) -> None:
    limit[0] = 1 << 20
    b = budget.Budget()
    b.open("a")
    assert fill(b, "a") == budget.MAX_PER_SESSION
    assert "the most one run may" in (b.admit("a") or "")


def test_a_lowered_limit_takes_effect_at_once(limit: list[int]) -> None:
    b = budget.Budget()
    b.open("a")
    b.open("b")
    for _ in range(50):
        assert b.admit("a") is None
    limit[0] = 256  # (256 - 64) // 8 = 24 connections in all
    refusal = b.admit("a")
    assert refusal is not None and "its share of the proxy daemon's 24" in refusal
    assert b.admit("b") is None  # the control: the other session still gets its floor


def test_a_closed_session_gives_back_its_floor(limit: list[int]) -> None:
    limit[0] = 64 + 8 * 40  # 40 connections
    b = budget.Budget()
    b.open("a")
    b.open("b")
    assert fill(b, "a") == 30  # floor min(16, 40 // 4) = 10 kept for b
    b.close("b")
    assert fill(b, "a") == 10


def test_pace_admit_drops_past_the_burst_without_taking_a_slot() -> None:
    pace = budget.Pace(1.0, 2)
    assert [pace.admit(0.0) for _ in range(4)] == [True, True, False, False]  # dropped ones take no slot
    assert pace.admit(1.0) and not pace.admit(1.0)  # one slot a second comes back
    same = budget.Pace(1.0, 2)
    assert [same.delay(0.0) == 0 for _ in range(3)] == [True, True, False]  # admit agrees with delay
