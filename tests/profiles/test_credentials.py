"""[credentials.NAME] tables: the loader's checks (FILE:LINE), merging, narrowing and what the policy hides."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.errors import PolicyError
from stockade.profiles.credentials import Credential
from stockade.profiles.loader import parse_layer
from stockade.profiles.merge import compose
from stockade.profiles.narrow import narrow
from stockade.profiles.serialize import policy_to_dict, policy_to_toml

HOME = Path("/home/u")
PROJECT = Path("/work/p")


def layer(text: str, source: str = "/work/p/policy.toml"):  # type: ignore[no-untyped-def]
    return parse_layer(text, source, base=PROJECT, home=HOME)


def test_a_table_becomes_a_credential_with_its_defaults() -> None:
    found = layer('[credentials.GH_TOKEN]\nenv = "GH"\nhosts = ["API.github.com", "api.github.com"]\n').values["credentials"]
    assert found == {"GH_TOKEN": Credential("GH_TOKEN", "env", ("GH",), ("api.github.com",), "Authorization", None, "/work/p/policy.toml")}


def test_file_paths_are_made_absolute_and_commands_kept_as_words() -> None:
    found = layer(
        '[credentials.A]\nfile = "~/.tok"\nhosts = ["a.test"]\nquery = "key"\n'
        '[credentials.B]\ncommand = ["gh", "auth", "token"]\nhosts = ["*.b.test"]\nheader = "X-Key"\n'
    ).values["credentials"]
    assert found["A"].where == ("/home/u/.tok",) and found["A"].header is None and found["A"].query == "key"
    assert found["B"].where == ("gh", "auth", "token") and found["B"].hosts == ("*.b.test",)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('[credentials.T]\nhosts = ["a.test"]\n', 1, "exactly one of"),
        ('[credentials.T]\nenv = "A"\nfile = "/x"\nhosts = ["a.test"]\n', 3, "exactly one of"),
        ('[credentials.T]\nenv = "A"\n', 1, "needs hosts"),
        ('[credentials.T]\nenv = "A"\nhosts = []\n', 3, "needs hosts"),
        ('[credentials.T]\nenv = "A"\nhosts = ["10.0.0.1"]\n', 3, "is an address"),
        ('[credentials.T]\nenv = "A"\nhosts = ["a.test"]\nheader = "Host"\n', 4, "routes or frames"),
        ('[credentials.T]\nenv = "A"\nhosts = ["a.test"]\nheader = "Bad Name"\n', 4, "header name"),
        ('[credentials.T]\nenv = "A"\nhosts = ["a.test"]\nquery = "a&b"\n', 4, "parameter name"),
        ('[credentials.T]\nenv = "A B"\nhosts = ["a.test"]\n', 2, "must name a variable"),
        ('[credentials.T]\ncommand = []\nhosts = ["a.test"]\n', 2, "non-empty list"),
        ('[credentials.T]\nenv = "A"\nhosts = ["a.test"]\nvalue = "literal"\n', 4, "unknown key 'value'"),
        ('[credentials."1X"]\nenv = "A"\nhosts = ["a.test"]\n', 1, "not a variable name"),
        ("credentials = 3\n", 1, "must be tables"),
    ],
)
def test_every_mistake_is_reported_at_its_line(text: str, line: int, words: str) -> None:
    with pytest.raises(PolicyError) as caught:
        layer(text)
    assert caught.value.line == line and words in str(caught.value), str(caught.value)


def test_the_policy_hides_its_file_and_withholds_its_variable() -> None:
    policy = compose(
        [layer('[network]\nallow = ["a.test"]\n[credentials.T]\nfile = "~/.tok"\nhosts = ["a.test"]\n[credentials.U]\nenv = "HOST_U"\nhosts = ["a.test"]\n')],
        project_dir=PROJECT, origin="x",
    )  # fmt: skip
    assert "/home/u/.tok" in policy.filesystem.deny_read
    assert "HOST_U" in policy.env.deny
    assert policy.terminated_hosts == ("a.test",)


def test_passing_its_variable_in_is_a_policy_error() -> None:
    text = '[env]\npass = ["HOST_U"]\n[credentials.U]\nenv = "HOST_U"\nhosts = ["a.test"]\n'
    with pytest.raises(PolicyError, match="which \\[env\\] pass lets into the sandbox") as caught:
        compose([layer(text)], project_dir=PROJECT, origin="x")
    assert caught.value.line == 2


def test_a_later_file_replaces_a_credential_of_the_same_name() -> None:
    first = layer('[credentials.T]\nenv = "A"\nhosts = ["a.test"]\n', "/one.toml")
    second = layer('[credentials.T]\nenv = "B"\nhosts = ["b.test"]\n', "/two.toml")
    (only,) = compose([first, second], project_dir=PROJECT, origin="x").credentials
    assert only.where == ("B",) and only.hosts == ("b.test",)


def test_an_untrusted_project_keeps_only_your_own_credentials() -> None:
    mine = layer('[credentials.T]\nenv = "A"\nhosts = ["a.test"]\n', "/home/u/.config/stockade/config.toml")
    theirs = layer('[credentials.T]\nenv = "A"\nhosts = ["evil.test"]\n[credentials.N]\nenv = "B"\nhosts = ["n.test"]\n')
    base = compose([mine], project_dir=PROJECT, origin="mine")
    project = compose([mine, theirs], project_dir=PROJECT, origin="theirs")
    effective, notes = narrow(base, project)
    assert effective.credentials == base.credentials  # T still goes to a.test only; N is not added
    assert sorted(n for n in notes if "credentials" in n) == [
        "[credentials.N] (an untrusted policy cannot add credentials)",
        "[credentials.T] (an untrusted policy cannot add credentials)",
    ]
    control, _ = narrow(base, compose([mine], project_dir=PROJECT, origin="same"))
    assert control.credentials == base.credentials


def test_explain_shows_where_a_value_lives_never_a_value() -> None:
    policy = compose([layer('[credentials.T]\ncommand = ["gh", "auth", "token"]\nhosts = ["a.test"]\n')], project_dir=PROJECT, origin="x")
    assert policy_to_dict(policy)["credentials"] == {"T": {"command": ["gh", "auth", "token"], "hosts": ["a.test"], "header": "Authorization"}}
    assert '[credentials.T]\ncommand = [\n    "gh",' in policy_to_toml(policy)


def test_a_credential_for_a_host_the_network_does_not_reach_is_said() -> None:
    from stockade.profiles.openings import open_ends

    text = '[network]\nallow = ["a.test"]\n[credentials.T]\nenv = "A"\nhosts = ["a.test", "b.test"]\n'
    notes = open_ends(compose([layer(text)], project_dir=PROJECT, origin="x"), "/home/u")
    assert [n for n in notes if "credentials" in n] == [
        '[credentials.T] goes to b.test, which [network] allow does not list: it is never sent there (add "b.test" to allow)'
    ]
    off = open_ends(compose([layer('[credentials.T]\nenv = "A"\nhosts = ["a.test"]\n')], project_dir=PROJECT, origin="x"), "/home/u")
    assert any("the network is off" in n for n in off)


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "SSL_CERT_FILE", "STOCKADE_SANDBOX", "PATH", "JAVA_TOOL_OPTIONS"])
def test_a_credential_may_not_take_a_variable_stockade_sets(name: str) -> None:
    with pytest.raises(PolicyError, match="stockade or the sandbox needs for itself") as caught:
        layer(f'[credentials.{name}]\nenv = "A"\nhosts = ["a.test"]\n')
    assert caught.value.line == 1
    assert layer('[credentials.GH_TOKEN]\nenv = "A"\nhosts = ["a.test"]\n').values["credentials"]  # control
