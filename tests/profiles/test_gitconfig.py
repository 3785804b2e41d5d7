"""git config as git reads it: what stockade must find (hooksPath, includes) and refuse (bad syntax)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.profiles.gitconfig import ConfigSyntaxError, parse, with_includes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[core]\n\thooksPath = .husky/_\n", [("core.hookspath", ".husky/_")]),
        ('[CORE] HooksPath="a b" # comment\n', [("core.hookspath", "a b")]),
        ('[remote "Up\\"x"]\n url = /r\n', [('remote.Up"x.url', "/r")]),
        ("[Sec.Sub]\n bare\n", [("sec.sub.bare", "true")]),
        ("[a]\n k = one \\\n two\n", [("a.k", "one  two")]),
        ("[a]\n k = x ; y\n", [("a.k", "x")]),
        ('[a]\n k = "x ; y"\n', [("a.k", "x ; y")]),
        ("; only a comment\n", []),
    ],
)
def test_parse(text: str, expected: list[tuple[str, str]]) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("text", ["k = v\n", "[a\n", "[a]\n 1k = v\n", '[a]\n k = "open\n', "[a]\n k = \\q\n", "[a b]\n"])
def test_syntax_errors(text: str) -> None:
    with pytest.raises(ConfigSyntaxError):
        parse(text)


def test_includes_are_followed_whatever_their_condition(tmp_path: Path) -> None:
    (tmp_path / "a.inc").write_text("[core]\n\thooksPath = from-a\n[include]\n\tpath = b.inc\n")
    (tmp_path / "b.inc").write_text("[core]\n\thooksPath = from-b\n[include]\n\tpath = a.inc\n")
    main = tmp_path / "config"
    main.write_text('[includeIf "gitdir:/nowhere/"]\n\tpath = a.inc\n')
    entries, included = with_includes(str(main), str(tmp_path))
    assert [v for k, v in entries if k == "core.hookspath"] == ["from-a", "from-b"]
    assert included[:2] == [str(tmp_path / "a.inc"), str(tmp_path / "b.inc")]


def test_hooks_paths_from_the_users_config_and_the_environment(tmp_path: Path) -> None:
    from stockade.profiles.gitdirs import user_hooks_paths

    (tmp_path / ".gitconfig").write_text("[core]\n\thooksPath = ~/hooks\n")
    env = {
        "GIT_CONFIG_SYSTEM": str(tmp_path / "none"),
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "user.name",
        "GIT_CONFIG_VALUE_0": "x",
        "GIT_CONFIG_KEY_1": "Core.HooksPath",
        "GIT_CONFIG_VALUE_1": ".githooks",
    }
    assert user_hooks_paths(str(tmp_path), env) == ["~/hooks", ".githooks"]
