"""Hostile path names never change the profile's structure (ESCAPES 16).

Paths reach SBPL only as `-D` parameters; glob rules (the one place a path
must become regex source) are encoded into a fixed ASCII alphabet. The
regexes are checked with Python's `re`, which reads the subset we emit
(bracket expressions, groups, `*`, `+`, `^`, `$`) the way POSIX ERE does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stockade.core.backend import RunRequest
from stockade.core.errors import UsageError
from stockade.seatbelt import sbpl
from stockade.seatbelt.planner import SeatbeltPlanner
from tests.seatbelt import seatbelt_support as sup


def _default_for(name: str) -> sup.Case:
    return sup.make_case("hostile", sup.resolve(sup.HOME / name, sup.locations(), profile="default").policy)


@pytest.mark.parametrize("name", sup.HOSTILE_NAMES, ids=[repr(n) for n in sup.HOSTILE_NAMES])
def test_hostile_project_folder(name: str) -> None:
    case = _default_for(name)
    text = case.profile.text
    project = f"{sup.HOME}/{name}"
    sup.forms(text)  # still balanced and readable
    assert "\\" not in text
    assert "(allow default" not in text
    assert text.count('"') % 2 == 0
    if not name.replace(" ", "").isalnum():
        assert name not in text
    for literal in sup.strings(text):
        assert "\n" not in literal and "\t" not in literal
    params = dict(case.profile.params)
    assert params["WRITABLE_0"] == project  # carried exactly
    assert f"{project}/.git/hooks" in params.values()
    # The parameters are passed as separate argv words, byte for byte.
    args = case.profile.sandbox_exec_args()
    assert f"WRITABLE_0={project}" in args


@pytest.mark.parametrize("name", sup.HOSTILE_NAMES, ids=[repr(n) for n in sup.HOSTILE_NAMES])
def test_glob_under_hostile_folder_still_matches(name: str) -> None:
    """The default `**/.env` rule, anchored in a hostile project folder, denies what it should."""
    project = f"{sup.HOME}/{name}"
    case = _default_for(name)
    env_rule = next(e for e in case.profile.index.deny_read if e.text == f"{project}/**/.env")
    regexes = [re.compile(r) for r in env_rule.regexes]

    def denied(path: str) -> bool:
        return any(r.search(path) for r in regexes)

    assert denied(f"{project}/.env")
    assert denied(f"{project}/a/b/.env")
    assert denied(f"{project}/.env/inside")
    assert not denied(f"{project}/x.env")
    assert not denied(f"{project}/.envy")
    if any(ch.isascii() and ch.isalnum() for ch in name):  # an all-non-ASCII name widens to any folder
        assert not denied(f"{sup.HOME}/elsewhere/.env")


@pytest.mark.parametrize(
    "text",
    ['p") (allow default) ("', "a\nb", "c\\d", 'e"f', "[x]", "^$", "\x1b[31m", "\u00e9", "(a|b)*+?{2}", "#;'!&<>`"],
)
def test_encode_literal_alphabet(text: str) -> None:
    source = sbpl.encode_literal(text)
    assert source.isascii() and source.isprintable()
    assert not set(source) & set('"\\\n')
    assert re.fullmatch(source, text)


def test_encode_literal_is_exact_for_plain_punctuation() -> None:
    text = "/a.b+c(d)e{f}|g$h*i?j!k#l&m'n;o<p>q`r,s@t%u~v=w:x y-z_0"
    source = sbpl.encode_literal(text)
    assert re.fullmatch(source, text)
    for index, ch in enumerate(text):
        if ch.isalnum():
            changed = text[:index] + ("Q" if ch != "Q" else "R") + text[index + 1 :]
            assert not re.fullmatch(source, changed)
    assert not re.fullmatch(source, text.replace(".", "X", 1))  # '.' is literal, not "any"


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("/p/**/.env", ["/p/.env", "/p/a/.env", "/p/a/b/.env/x"], ["/p/x.env", "/q/.env", "/p/.envrc"]),
        ("/p/*.db", ["/p/a.db", "/p/.db"], ["/p/a/b.db", "/p/a.dbx"]),
        ("/p/?.txt", ["/p/a.txt"], ["/p/ab.txt", "/p/.txt"]),
        ("/p/a[b]c", ["/p/abc", "/p/a[b]c", "/p/axc"], ["/p/ac", "/p/abbc"]),
        ("/p/[/x", ["/p/[/x", "/p/a/x"], ["/p/ab/x"]),  # a lone '[' widens to one character
        ("/p/**", ["/p", "/p/a", "/p/a/b"], ["/q", "/pp"]),
    ],
)
def test_glob_semantics(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    base, rest = sbpl.split_glob(pattern)
    regexes = [re.compile(r) for r in sbpl.glob_regexes(base, rest)]
    for path in matching:
        assert any(r.search(path) for r in regexes), path
    for path in not_matching:
        assert not any(r.search(path) for r in regexes), path


def test_split_glob() -> None:
    assert sbpl.split_glob("/p/**/.env") == ("/p", "**/.env")
    assert sbpl.split_glob("/**/x") == ("/", "**/x")
    assert sbpl.split_glob("/p/q") == ("/p/q", "")


def test_regex_filter_refuses_anything_outside_the_alphabet() -> None:
    for bad in ['a"b', "a\\b", "a\nb", "\u00e9"]:
        with pytest.raises(ValueError):
            sbpl.regex_filter(bad)


def test_constants_and_tags_are_checked() -> None:
    assert sbpl.quote_constant("com.apple.logd") == '"com.apple.logd"'
    for bad in ['x" (allow default', "a b", "", "new\nline"]:
        with pytest.raises(ValueError):
            sbpl.quote_constant(bad)
        with pytest.raises(ValueError):
            sbpl.check_tag(bad)


def test_params_refuse_nul_and_bad_names() -> None:
    params = sbpl.Params()
    with pytest.raises(ValueError):
        params.ref("lower", "/x")
    with pytest.raises(ValueError):
        params.ref('X") (allow default', "/x")
    with pytest.raises(ValueError):
        params.ref("X", "/a\0b")
    assert params.ref("X", "/p") == '(param "X")'
    with pytest.raises(ValueError):
        params.ref("X", "/other")


def test_session_id_cannot_inject(tmp_path: Path) -> None:
    policy = sup.resolve(sup.PROJECT, sup.locations(), profile="offline").policy
    request = RunRequest(policy=policy, command=("true",), cwd=sup.PROJECT, host_env={}, locations=sup.locations())
    with pytest.raises(UsageError):
        SeatbeltPlanner(session_id='x") (allow default) ("', temp_base=tmp_path).build(request)


def test_private_aliases() -> None:
    assert sbpl.private_aliases("/tmp/x") == ("/tmp/x", "/private/tmp/x")
    assert sbpl.private_aliases("/private/var/y") == ("/private/var/y", "/var/y")
    assert sbpl.private_aliases("/etc") == ("/etc", "/private/etc")
    assert sbpl.private_aliases("/tmpfoo") == ("/tmpfoo",)
    assert sbpl.private_aliases("/Users/x/tmp") == ("/Users/x/tmp",)
