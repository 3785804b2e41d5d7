"""HTTP rules: what parses and how it is spelled back, what each pattern matches, and the paths that are refused outright."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stockade.profiles import httprules
from stockade.profiles.httprules import judge, parse_http_rule, request_segments, suggested_rule


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("GET /repos/**", "GET /repos/**"),
        ("HEAD,GET   /a/*/c", "GET,HEAD /a/*/c"),
        ("* /", "* /"),
        ("POST /v1/items/", "POST /v1/items/"),
        ("PROPFIND /dav/*.ics", "PROPFIND /dav/*.ics"),
        ("GET /a/**/b", "GET /a/**/b"),
    ],
)
def test_rules_parse_to_one_spelling(text: str, canonical: str) -> None:
    assert str(parse_http_rule(text)) == canonical
    assert parse_http_rule(canonical) == parse_http_rule(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("/repos/**", 'is not "METHODS /path"'),
        ("GET", 'is not "METHODS /path"'),
        ("GET /a /b", 'is not "METHODS /path"'),
        ("get /a", "HTTP method in capitals"),
        ("GET,,POST /a", "HTTP method in capitals"),
        ("GET repos", "must start with /"),
        ("GET /a**/b", "must be a whole segment"),
        ("GET /a/../b", "'..' segment"),
        ("GET /a/%2e%2e/b", "without percent escapes"),
        ("GET /a//b", "empty segment"),
        ("GET /a/b\\c", "character a path cannot"),
    ],
)
def test_bad_rules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_http_rule(text)


@pytest.mark.parametrize(
    "rule, method, path, matches",
    [
        ("GET /repos/**", "GET", "/repos", True),
        ("GET /repos/**", "GET", "/repos/", True),
        ("GET /repos/**", "GET", "/repos/a/b/c?x=1", True),
        ("GET /repos/**", "GET", "/reposx", False),
        ("GET /repos/**", "POST", "/repos/a", False),
        ("GET /repos/**", "get", "/repos/a", True),  # methods are compared in capitals: "get" is no way around a rule
        ("* /repos/*", "DELETE", "/repos/a", True),
        ("* /repos/*", "DELETE", "/repos/a/b", False),
        ("GET /a/*.tar.gz", "GET", "/a/x.tar.gz", True),
        ("GET /a/*.tar.gz", "GET", "/a/.tar.gz", True),
        ("GET /a/*.tar.gz", "GET", "/a/x.tar", False),
        ("GET /a/**/info/refs", "GET", "/a/info/refs", True),
        ("GET /a/**/info/refs", "GET", "/a/b/c/info/refs", True),
        ("GET /a/**/info/refs", "GET", "/a/b/c/info/refsx", False),
        ("GET /a/x*y*z", "GET", "/a/xyz", True),
        ("GET /a/x*y*z", "GET", "/a/xzy", False),
        ("GET /a/x*y*z", "GET", "/a/xaybz", True),
        ("GET /", "GET", "/", True),
        ("GET /", "GET", "/a", False),
        ("GET /a/b", "GET", "/a/%62", True),  # an escape is compared decoded, as the server reads it
    ],
)
def test_what_a_rule_matches(rule: str, method: str, path: str, matches: bool) -> None:
    allowed, why = judge((parse_http_rule(rule),), (), method, path)
    assert allowed is matches, why


@pytest.mark.parametrize(
    "path, why",
    [
        ("/a/%2Fb", "hides a /"),
        ("/a/%2fb", "hides a /"),
        ("/a/%5Cb", "hides a /"),
        ("/a/b%00", "hides a /"),
        ("/a/../b", ". or .. segment"),
        ("/a/%2e%2e/b", ". or .. segment"),
        ("/a/./b", ". or .. segment"),
        ("/a//b", "empty segment"),
        ("/a/%zz", "broken percent escape"),
        ("/a/%ff", "not UTF-8"),
        ("a/b", "not absolute"),
    ],
)
def test_ambiguous_paths_are_refused_whatever_the_rules(path: str, why: str) -> None:
    assert isinstance(request_segments(path), str)
    allowed, reason = judge((parse_http_rule("* /**"),), (), "GET", path)
    assert not allowed and why in reason
    control, _ = judge((parse_http_rule("* /**"),), (), "GET", "/a/b")
    assert control


def test_deny_wins_and_the_deciding_rule_is_named() -> None:
    allow = (parse_http_rule("* /repos/**"),)
    deny = (parse_http_rule("DELETE /repos/**"), parse_http_rule("* /repos/*/*/actions/**"))
    assert judge(allow, deny, "GET", "/repos/o/r") == (True, "allow * /repos/**")
    assert judge(allow, deny, "DELETE", "/repos/o/r") == (False, "deny DELETE /repos/**")
    assert judge(allow, deny, "GET", "/repos/o/r/actions/runs") == (False, "deny * /repos/*/*/actions/**")
    assert judge(allow, deny, "GET", "/users/x") == (False, "no HTTP rule allows it")
    assert judge((), (), "GET", "/") == (False, "no HTTP rule allows it")


def test_the_suggested_rule_is_the_request_itself() -> None:
    assert suggested_rule("post", "/repos/o/r/issues?x=1") == "POST /repos/o/r/issues"
    assert suggested_rule("GET", "/a/%62") == "GET /a/b"


segment = st.text(alphabet="abcxyz019-_.~", min_size=1, max_size=6).filter(lambda s: s not in (".", ".."))


@given(st.lists(segment, max_size=6), st.sampled_from(["GET", "POST", "DELETE"]))
def test_any_plain_path_is_under_slash_star_star_and_exactly_under_itself(parts: list[str], method: str) -> None:
    path = "/" + "/".join(parts)
    assert judge((parse_http_rule("* /**"),), (), method, path)[0]
    assert judge((parse_http_rule(f"{method} {path}"),), (), method, path)[0]
    assert not judge((parse_http_rule(f"{method} {path}"),), (), method, path + "/more")[0]


@pytest.mark.parametrize(
    "method, path, why",
    [
        ("GET", "/repos/secret;x/y", "deny * /repos/secret/**"),  # Tomcat, Jetty, Spring: /repos/secret/y
        ("GET", "/repos/secret%3Bx/y", "deny * /repos/secret/**"),
        ("GET", "/repos/a/..;/secret/y", ". or .. segment before a ;"),  # Tomcat: /repos/a/../secret/y
        ("GET", "/repos/;x/secret", "only ;parameters"),
        ("DELETE", "/repos/x/", "deny DELETE /repos/x"),  # Express, Flask: /repos/x
        ("DELETE", "/repos/X", "deny DELETE /repos/x"),  # a server routing case-insensitively
        ("GET", "/REPOS/Secret/k", "deny * /repos/secret/**"),
        ("GET", "/files/secret.bin;.txt", "no HTTP rule allows it"),  # Tomcat serves secret.bin
        ("GET", "/repos/a#/../../secret/k", "has a #"),  # a server keeping the # would read /secret/k
        ("GET", "/repos/a%0a", "control character"),
    ],
)
def test_every_reading_a_server_may_make_of_a_path_is_judged(method: str, path: str, why: str) -> None:
    allow = (parse_http_rule("* /repos/**"), parse_http_rule("GET /files/*.txt"))
    deny = (parse_http_rule("* /repos/secret/**"), parse_http_rule("DELETE /repos/x"))
    allowed, reason = judge(allow, deny, method, path)
    assert not allowed and why in reason, reason


@pytest.mark.parametrize(
    "method, path, rule",
    [
        ("GET", "/repos/a;v=1/b", "* /repos/**"),  # parameters are no reason to refuse a request every reading allows
        ("DELETE", "/repos/y/", "* /repos/**"),
        ("GET", "/Repos/Owner/Name", "GET /Repos/**"),  # allow rules match exactly: a case-sensitive API still works
        ("POST", "/v1/items/", "POST /v1/items/"),  # an allow rule written with its trailing / lets exactly that pass
        ("GET", "/files/a.txt", "GET /files/*.txt"),
    ],
)
def test_plain_readings_still_pass(method: str, path: str, rule: str) -> None:
    allow = (parse_http_rule("* /repos/**"), parse_http_rule("GET /files/*.txt"), parse_http_rule(rule))
    deny = (parse_http_rule("* /repos/secret/**"), parse_http_rule("DELETE /repos/x"))
    assert judge(allow, deny, method, path)[0]


_SEGMENTS = ["a", "b", "c", "x*", "*b", "a*c"]


@settings(max_examples=300, deadline=None)
@given(
    pattern=st.lists(st.sampled_from([*_SEGMENTS, "**"]), max_size=6),
    path=st.lists(st.sampled_from(["a", "b", "c", "xb", "abc", "ac"]), max_size=7),
)
def test_the_table_matcher_agrees_with_the_plain_recursive_one(pattern: list[str], path: list[str]) -> None:
    def plain(p: tuple[str, ...], s: tuple[str, ...]) -> bool:
        if not p:
            return not s
        if p[0] == "**":
            return any(plain(p[1:], s[skip:]) for skip in range(len(s) + 1))
        return bool(s) and httprules._segment_matches(p[0], s[0]) and plain(p[1:], s[1:])

    assert httprules._match(tuple(pattern), tuple(path)) is plain(tuple(pattern), tuple(path))


def test_a_long_path_against_a_rule_with_several_double_stars_takes_bounded_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review of issue 34: `* /**/a/**/b` against 2,500 `a/` segments stalled the daemon for seconds (n^2.7)."""
    calls = []
    real = httprules._segment_matches
    monkeypatch.setattr(httprules, "_segment_matches", lambda part, segment: calls.append(1) or real(part, segment))
    segments = tuple(["a"] * 30_000)
    assert not httprules._match(("**", "a", "**", "b"), segments)
    assert len(calls) <= 4 * len(segments)  # one step per (pattern part, segment) at most
