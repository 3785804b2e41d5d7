"""Path spelling of the policy language: `~`, relative paths, `..`, globs and the glob regex."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stockade.profiles.paths import below_home, glob_base, glob_to_regex, is_glob, is_within, normalise_path

BASE = Path("/proj")
HOME = Path("/home/ann")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(".", "/proj", id="dot-is-base"),
        pytest.param("./build/", "/proj/build", id="relative-trailing-slash"),
        pytest.param("build/out", "/proj/build/out", id="relative"),
        pytest.param("~", "/home/ann", id="bare-tilde"),
        pytest.param("~/.cache/pip", "/home/ann/.cache/pip", id="tilde-slash"),
        pytest.param("  /etc/hosts  ", "/etc/hosts", id="stripped"),
        pytest.param("/abs//x", "/abs/x", id="double-slash"),
        pytest.param("//abs", "/abs", id="leading-double-slash"),
        pytest.param("/a/./b/", "/a/b", id="dot-component"),
        pytest.param("/a/...", "/a/...", id="three-dots-is-a-name"),
        pytest.param("/a/b?", "/a/b?", id="question-mark-is-ordinary"),
        pytest.param("/a/[x]", "/a/[x]", id="bracket-is-ordinary"),
    ],
)
def test_normalise_path_spells_absolute_paths(text: str, expected: str) -> None:
    assert normalise_path(text, base=BASE, home=HOME, allow_glob=False) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("**/.env", "/proj/**/.env"),
        ("~/*.key", "/home/ann/*.key"),
        ("/etc/*", "/etc/*"),
    ],
)
def test_normalise_path_keeps_globs_where_allowed(text: str, expected: str) -> None:
    assert normalise_path(text, base=BASE, home=HOME, allow_glob=True) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "empty path", id="empty"),
        pytest.param("   ", "empty path", id="blank"),
        pytest.param(None, "empty path", id="not-a-string"),
        pytest.param("/a\0b", "NUL or newline", id="nul"),
        pytest.param("/a\nb", "NUL or newline", id="newline"),
        pytest.param("~bob/x", "only '~' and '~/...'", id="tilde-user"),
        pytest.param("..", "climbs with '..'", id="dotdot"),
        pytest.param("/tmp/../etc", "climbs with '..'", id="inner-dotdot"),
        pytest.param("~/../x", "climbs with '..'", id="dotdot-after-home"),
        pytest.param("./build/*", "globs are only allowed in deny_read and deny_write", id="glob"),
    ],
)
def test_normalise_path_rejects_bad_spellings(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        normalise_path(text, base=BASE, home=HOME, allow_glob=False)


def test_dotdot_is_refused_even_with_globs() -> None:
    with pytest.raises(ValueError, match="climbs"):
        normalise_path("/a/**/../b", base=BASE, home=HOME, allow_glob=True)


@pytest.mark.parametrize(("path", "expected"), [("/a/*", True), ("/a/b?", True), ("/a/[xy]", True), ("/a/b", False), ("", False)])
def test_is_glob(path: str, expected: bool) -> None:
    assert is_glob(path) is expected


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("/a", "/a", True),
        ("/a/b", "/a", True),
        ("/a/b", "/a/", True),
        ("/a", "/a/", True),
        ("/ab", "/a", False),
        ("/a", "/a/b", False),
        ("/anything", "/", True),
        ("/anything", "", True),
        ("relative", "/", True),
    ],
)
def test_is_within(path: str, root: str, expected: bool) -> None:
    assert is_within(path, root) is expected


def test_below_home_is_strictly_inside_through_either_spelling(tmp_path: Path) -> None:
    real = tmp_path / "real-home"
    (real / "sub").mkdir(parents=True)
    link = tmp_path / "home"
    link.symlink_to(real)
    assert below_home(str(link / "sub"), str(link)) is True
    assert below_home(str(real / "sub"), str(link)) is True  # through the real path
    assert below_home(str(link / "new" / "folder"), str(link)) is True  # need not exist
    assert below_home(str(link), str(link)) is False  # the home itself
    assert below_home(str(real), str(link)) is False
    assert below_home(str(link) + "/", str(link)) is False
    assert below_home(str(tmp_path / "elsewhere"), str(link)) is False


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        pytest.param("/p/*.txt", ["/p/a.txt", "/p/.txt"], ["/p/d/a.txt", "/p/a.txtx", "/q/a.txt"], id="star-one-name"),
        pytest.param("/p/**/.env", ["/p/.env", "/p/a/.env", "/p/a/b/.env"], ["/p/a/.envx", "/p/x.env"], id="doublestar-slash"),
        pytest.param("/p/**", ["/p/", "/p/a", "/p/a/b"], ["/q/a", "/p"], id="doublestar-end"),
        pytest.param("/p/a?c", ["/p/abc"], ["/p/ac", "/p/a/c", "/p/abbc"], id="question"),
        pytest.param("/p/[ab].x", ["/p/a.x", "/p/b.x"], ["/p/c.x", "/p/ab.x"], id="class"),
        pytest.param("/p/[!ab].x", ["/p/c.x"], ["/p/a.x", "/p/b.x"], id="negated-class"),
        pytest.param("/p/[a-c]", ["/p/b"], ["/p/d"], id="range"),
        pytest.param("/p/a.b+(c)", ["/p/a.b+(c)"], ["/p/aXb+(c)", "/p/a.bb(c)"], id="regex-chars-literal"),
        pytest.param("/p/[]x", ["/p/[]x"], ["/p/x"], id="empty-brackets-literal"),
    ],
)
def test_glob_to_regex(pattern: str, matches: list[str], misses: list[str]) -> None:
    regex = re.compile(glob_to_regex(pattern))
    assert [m for m in matches if not regex.match(m)] == []
    assert [m for m in misses if regex.match(m)] == []


def test_glob_to_regex_escapes_backslash_in_a_class() -> None:
    regex = re.compile(glob_to_regex("/p/[\\x]"))
    assert regex.match("/p/\\") and regex.match("/p/x")
    assert not regex.match("/p/y")


@pytest.mark.parametrize(
    ("pattern", "base"),
    [
        ("/a/b/*.txt", "/a/b"),
        ("/a/*/c", "/a"),
        ("/a/**/.env", "/a"),
        ("/a/b?/c", "/a"),
        ("/*", "/"),
        ("/x", "/"),
        ("*.txt", "/"),
        ("a/b/*", "a/b"),
    ],
)
def test_glob_base(pattern: str, base: str) -> None:
    assert glob_base(pattern) == base
