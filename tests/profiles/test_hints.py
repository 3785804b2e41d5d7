"""Denial hints: the host rule in a hint line, and the `stockade allow` command to paste."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from stockade.profiles.hints import allow_command, rule_of


@pytest.mark.parametrize(
    ("hint", "rule"),
    [
        pytest.param('allow = ["pypi.org"]', "pypi.org", id="host"),
        pytest.param('allow = ["pypi.org:8443"]', "pypi.org:8443", id="host-port"),
        pytest.param('  allow = ["*.github.com"]\n', "*.github.com", id="padded"),
        pytest.param('allow = ["10.0.0.0/8"]', "10.0.0.0/8", id="cidr"),
        pytest.param('allow = ["a\\"b"]', 'a"b', id="json-escape"),
        pytest.param('allow = ["a", "b"]', None, id="two-rules"),
        pytest.param("allow = ['pypi.org']", None, id="single-quotes"),
        pytest.param('allow = ["unterminated]', None, id="bad-json"),
        pytest.param('deny = ["pypi.org"]', None, id="other-key"),
        pytest.param('allow=["pypi.org"]', None, id="unspaced"),
        pytest.param("", None, id="empty"),
        pytest.param("no hint here", None, id="prose"),
    ],
)
def test_rule_of(hint: str, rule: str | None) -> None:
    assert rule_of(hint) == rule


@pytest.mark.parametrize(("origin", "command"), [
    ("builtin:default", "stockade allow pypi.org:8443"),
    ("builtin:pypi", "stockade allow pypi.org:8443 --profile pypi"),
    ("/p/my policy.toml", "stockade allow pypi.org:8443 --policy '/p/my policy.toml'"),
])  # fmt: skip
def test_every_hint_is_a_command_that_can_be_pasted(origin: str, command: str) -> None:
    assert allow_command('allow = ["pypi.org:8443"]', origin) == command


def test_no_origin_names_no_policy() -> None:
    assert allow_command('allow = ["pypi.org"]', "") == "stockade allow pypi.org"


@pytest.mark.parametrize("hint", ["", "no rule", 'allow = ["a", "b"]'])
def test_a_hint_without_a_rule_gives_no_command(hint: str) -> None:
    assert allow_command(hint, "/p/.stockade.toml") == ""


def test_a_hostile_rule_is_quoted_for_the_shell() -> None:
    command = allow_command('allow = ["x.test; rm -rf ~"]', "/p/$(id).toml")
    assert shlex.split(command) == ["stockade", "allow", "x.test; rm -rf ~", "--policy", "/p/$(id).toml"]


def test_a_rule_the_file_already_lists_needs_trust_not_another_allow(tmp_path: Path) -> None:
    """After `stockade allow pypi.org` on an untrusted file, the refusal's fix is trusting it."""
    policy = tmp_path / ".stockade.toml"
    policy.write_text('[network]\nallow = ["files.test", "pypi.org"]\n')
    assert allow_command('allow = ["pypi.org"]', str(policy)) == f"stockade trust {policy}"
    assert allow_command('allow = ["other.test"]', str(policy)) == f"stockade allow other.test --policy {policy}"  # control
    policy.write_text('[network]\nallow = ["files.test"]\n')  # changed: read again
    assert allow_command('allow = ["pypi.org"]', str(policy)) == f"stockade allow pypi.org --policy {policy}"
    assert allow_command('allow = ["pypi.org"]', str(tmp_path / "missing.toml")).startswith("stockade allow pypi.org")
