"""Push patterns: validation and matching of ref names."""

from __future__ import annotations

import pytest

from stockade.profiles.gitrefs import parse_ref_pattern, ref_matches, ref_name_problem


@pytest.mark.parametrize("bad", ["agent/*", "main", "refs/heads/", "refs/heads/a**", "refs/heads/a b", "refs/heads/../x", "refs/x", "refs/heads/.x"])
def test_bad_patterns_say_why(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_ref_pattern(bad)


def test_star_stays_in_one_component_and_double_star_spans_them() -> None:
    assert ref_matches("refs/heads/agent/*", "refs/heads/agent/x")
    assert not ref_matches("refs/heads/agent/*", "refs/heads/agent/x/y")
    assert not ref_matches("refs/heads/agent/*", "refs/heads/main")
    assert ref_matches("refs/heads/agent/**", "refs/heads/agent/x/y")
    assert ref_matches("refs/**", "refs/tags/v1")
    assert ref_matches("refs/tags/v*", "refs/tags/v1.2")


def test_ref_names_git_would_not_send_are_flagged() -> None:
    assert ref_name_problem("refs/heads/ok") is None
    for bad in ("HEAD", "refs/heads/a..b", "refs/heads/x.lock", "refs/heads/*", "refs/heads//x", "refs/heads/x\x01"):
        assert ref_name_problem(bad), bad
