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


def test_matching_a_long_ref_against_double_stars_takes_no_time() -> None:
    """The ref comes from the sandbox: a backtracking match held the shared daemon for minutes."""
    import time

    from stockade.profiles.gitrefs import MAX_REF_BYTES, first_match

    patterns = tuple(parse_ref_pattern(p) for p in ("refs/**/agent/*", "refs/**/a/**/b", "refs/**/x/**/y/**/z"))
    ref = "refs/" + "a/" * (MAX_REF_BYTES // 2 - 4) + "c"
    started = time.monotonic()
    assert first_match(patterns, ref) is None
    assert first_match(patterns, "refs/" + "a/" * 400 + "b") == "refs/**/a/**/b"
    assert time.monotonic() - started < 1
    assert ref_name_problem("refs/heads/" + "a/" * 8000 + "c")  # longer than any ref a server keeps: refused unread


@pytest.mark.parametrize(
    ("pattern", "ref", "expected"),
    [
        ("refs/**", "refs", True), ("refs/**", "refs/a", True), ("refs/**/b", "refs/b", True), ("refs/**/b", "refs/a/a/b", True),
        ("refs/**/b", "refs/a/b/c", False), ("refs/**/b/**", "refs/b", True), ("refs/a/**/*", "refs/a", False),
        ("refs/a/**/*", "refs/a/x", True), ("refs/**/**/c", "refs/c", True), ("refs/h*/x*y", "refs/heads/xzzy", True),
    ],
)  # fmt: skip
def test_double_star_covers_any_number_of_components(pattern: str, ref: str, expected: bool) -> None:
    from stockade.profiles.httprules import _match

    assert ref_matches(pattern, ref) is expected
    assert _match(tuple(pattern.split("/")), tuple(ref.split("/"))) is expected  # as the path rules' matcher reads it
