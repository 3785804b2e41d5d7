"""open_ends names what a policy leaves open or shut by accident: a read-only project, no denials, a bare host home, loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.profiles.model import FilesystemRules, NetworkMode, NetworkRules, Policy
from stockade.profiles.openings import open_ends

HOME = "/home/me"
PROJECT = Path("/home/me/proj")
DEFAULT = ("builtin:default", "/home/me/proj/.stockade.toml")
FROM_NOTHING = ("/home/me/proj/.stockade.toml",)
REMOVE_EXTENDS = 'to build on your own policy instead, remove `extends = []` (or write extends = ["default"])'


def policy(
    *,
    allow_write: tuple[str, ...] = (str(PROJECT),),
    deny_read: tuple[str, ...] = ("/home/me/proj/**/.env",),
    home: str = "private",
    allow: tuple[str, ...] = (),
    sources: tuple[str, ...] = DEFAULT,
) -> Policy:
    return Policy(
        filesystem=FilesystemRules(allow_write=allow_write, deny_read=deny_read, home=home),
        network=NetworkRules(mode=NetworkMode.ALLOWLIST if allow else NetworkMode.NONE, allow=allow),
        project_dir=PROJECT,
        sources=sources,
    )


def test_a_policy_that_hides_and_allows_what_it_should_says_nothing() -> None:
    assert open_ends(policy(), HOME) == []
    assert open_ends(policy(sources=FROM_NOTHING), HOME) == []  # from nothing, but nothing to say: no hint either


@pytest.mark.parametrize(
    ("allow_write", "read_only"),
    [
        pytest.param((str(PROJECT),), False, id="the-project"),
        pytest.param(("/home/me",), False, id="a-parent"),
        pytest.param(("/",), False, id="root"),
        pytest.param(("/home/me/",), False, id="trailing-slash"),
        pytest.param((), True, id="nothing"),
        pytest.param(("/home/me/proj/build",), True, id="only-inside"),
        pytest.param(("/home/me/pro",), True, id="a-prefix-is-not-a-parent"),
        pytest.param(("/tmp", "/var/tmp"), True, id="elsewhere"),
    ],
)
def test_the_project_is_read_only_unless_an_allow_write_covers_it(allow_write: tuple[str, ...], read_only: bool) -> None:
    notes = open_ends(policy(allow_write=allow_write), HOME)
    said = f'the project ({PROJECT}) is read-only: no allow_write entry covers it ("." would)'
    assert (said in notes) is read_only
    assert len(notes) == int(read_only)


def test_an_empty_deny_read_is_named() -> None:
    assert open_ends(policy(deny_read=()), HOME) == [
        "deny_read is empty: the project's .env files and every secret outside your home are readable inside"
    ]


HOST_HOME = 'home = "host" with nothing under /home/me in deny_read: ~/.ssh, ~/.aws and every other secret there are readable inside'


@pytest.mark.parametrize(
    ("deny_read", "said"),
    [
        pytest.param(("/home/me/.ssh",), False, id="a-secret-folder"),
        pytest.param(("/home/me",), False, id="the-home-itself"),
        pytest.param(("/home/me/**/.env",), False, id="a-glob-under-it"),
        pytest.param(("/home/me/.aws*",), False, id="a-star-in-the-name"),
        pytest.param(("/**/.ssh",), True, id="a-glob-from-the-root-is-not-under-it"),
        pytest.param(("/etc/shadow",), True, id="only-elsewhere"),
        pytest.param(("/home/meme/.ssh",), True, id="a-prefix-is-not-the-home"),
        pytest.param(("/home/*/.ssh",), True, id="a-glob-above-it"),
    ],
)
def test_a_host_home_needs_a_denial_under_it(deny_read: tuple[str, ...], said: bool) -> None:
    notes = open_ends(policy(home="host", deny_read=deny_read), HOME)
    assert notes == ([HOST_HOME] if said else [])


def test_a_private_home_needs_no_denial_under_it() -> None:
    assert open_ends(policy(home="private", deny_read=("/etc/shadow",)), HOME) == []


def test_a_host_home_with_nothing_denied_says_both() -> None:
    notes = open_ends(policy(home="host", deny_read=()), HOME)
    assert notes == ["deny_read is empty: the project's .env files and every secret outside your home are readable inside", HOST_HOME]


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("127.0.0.1", True),
        ("127.0.0.0/8", True),
        ("localhost:8080", False),  # a port: reached at the same address inside (bwrap/parts/forwards.py)
        ("localhost", True),
        ("[::1]:6379", False),
        ("127.0.0.1:5432", False),
        ("::1", True),
        ("pypi.org", False),
        ("127.0.0.1.nip.io", False),
        ("10.0.0.0/8", False),
        ("*.localhost.example", False),
    ],
)
def test_an_allowed_loopback_endpoint_gets_a_note_of_its_own(rule: str, said: bool) -> None:
    notes = open_ends(policy(allow=("pypi.org", rule)), HOME)
    if not said:
        assert notes == []
        return
    assert len(notes) == 1
    assert notes[0].startswith(f'allow "{rule}": the host\'s loopback is reached from any client only at a port the entry names')
    assert '--noproxy ""' in notes[0] and "NO_PROXY" in notes[0]


def test_each_loopback_rule_is_named_in_order() -> None:
    notes = open_ends(policy(allow=("localhost", "pypi.org", "127.0.0.1")), HOME)
    assert [n.split(":", 1)[0] for n in notes] == ['allow "localhost"', 'allow "127.0.0.1"']


def test_a_policy_from_nothing_ends_with_how_to_build_on_your_own() -> None:
    notes = open_ends(policy(allow_write=(), deny_read=(), sources=FROM_NOTHING), HOME)
    assert len(notes) == 3
    assert "is read-only" in notes[0] and "deny_read is empty" in notes[1]
    assert notes[-1] == REMOVE_EXTENDS


@pytest.mark.parametrize(
    ("sources", "hint"),
    [
        pytest.param(("builtin:default",), False, id="the-default"),
        pytest.param(("builtin:offline", "/p/.stockade.toml"), False, id="any-built-in"),
        pytest.param(("/me.toml", "/p/.stockade.toml"), True, id="files-only"),
        pytest.param((), True, id="nothing-at-all"),
    ],
)
def test_the_hint_comes_only_when_no_built_in_contributed(sources: tuple[str, ...], hint: bool) -> None:
    notes = open_ends(policy(deny_read=(), sources=sources), HOME)
    assert ("to build on your own policy instead" in notes[-1]) is hint
    assert len(notes) == 1 + int(hint)


def test_http_rules_for_a_host_that_is_not_allowed_are_said_to_change_nothing() -> None:
    tables = (("api.test", ("GET /a",), ()), ("*.cdn.test", ("GET /**",), ()), ("other.test:8443", ("GET /",), ()))
    policy = Policy(
        filesystem=FilesystemRules(deny_read=("/h/.ssh",), allow_write=("/p",)),
        network=NetworkRules(
            mode=NetworkMode.ALLOWLIST, allow=("api.test", "*.cdn.test", "other.test"), http=(*tables, ("nope.test", ("GET /",), ()))
        ),
        project_dir=Path("/p"),
        sources=("builtin:default",),
    )
    notes = open_ends(policy, "/h")
    assert notes == [
        '[network.http."nope.test"] changes nothing: nope.test is not in [network] allow, and HTTP rules only narrow '
        'what an allowed host may be sent (add "nope.test" to allow)'
    ]


def test_an_allow_entry_a_deny_entry_covers_is_said() -> None:
    base = policy(allow=("api.example.com", "pypi.org"))
    denied = Policy(
        filesystem=base.filesystem, project_dir=PROJECT, sources=DEFAULT,
        network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("api.example.com", "pypi.org"), deny=("*.example.com",)),
    )  # fmt: skip
    assert open_ends(denied, HOME) == ['allow "api.example.com" changes nothing: deny "*.example.com" covers it, and deny wins (remove one of them)']
    assert open_ends(base, HOME) == []  # control: without the deny, nothing to say


def test_a_chain_of_files_from_nothing_is_told_to_extend_default_not_to_remove_an_empty_extends() -> None:
    chain = ("/home/me/proj/base.toml", "/home/me/proj/.stockade.toml")
    notes = open_ends(policy(deny_read=(), sources=chain), HOME)
    assert notes[-1] == 'to build on your own policy instead, add "default" to the extends of /home/me/proj/.stockade.toml'
    assert open_ends(policy(deny_read=(), sources=FROM_NOTHING), HOME)[-1] == REMOVE_EXTENDS


def test_a_host_allowed_on_one_port_lets_its_tables_and_credentials_apply() -> None:
    from stockade.profiles.credentials import Credential

    network = NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("api.test:8443",), http=(("api.test", ("GET /x",), ()),))
    base = policy(allow=("api.test:8443",))
    ported = Policy(
        filesystem=base.filesystem, network=network, project_dir=PROJECT, sources=DEFAULT,
        credentials=(Credential("T", "env", ("A",), ("api.test",)),),
    )  # fmt: skip
    assert open_ends(ported, HOME) == []
    elsewhere = Policy(
        filesystem=base.filesystem, project_dir=PROJECT, sources=DEFAULT,
        network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("other.test",), http=(("api.test", ("GET /x",), ()),)),
        credentials=(Credential("T", "env", ("A",), ("api.test",)),),
    )  # fmt: skip
    assert len(open_ends(elsewhere, HOME)) == 2  # control: a host allowed nowhere is said, for both


def test_a_method_that_looks_like_a_typo_is_said() -> None:
    base = policy(allow=("api.test",))
    typo = Policy(
        filesystem=base.filesystem, project_dir=PROJECT, sources=DEFAULT,
        network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("api.test",), http=(("api.test", ("GET,PSOT /y", "PURGE /c"), ("GTE /x",)),)),
    )  # fmt: skip
    assert open_ends(typo, HOME) == [
        '[network.http."api.test"] "GET,PSOT /y": PSOT is not a standard HTTP method; if it is a typo, the rule never matches (did you mean POST?)',
        '[network.http."api.test"] "GTE /x": GTE is not a standard HTTP method; if it is a typo, the rule never matches (did you mean GET?)',
    ]


def test_hosts_under_allow_with_the_network_off_are_named() -> None:
    off = Policy(network=NetworkRules(mode=NetworkMode.NONE, allow=("registry.npmjs.org",)), project_dir=PROJECT, sources=DEFAULT,
                 filesystem=FilesystemRules(allow_write=(str(PROJECT),), deny_read=("/home/me/proj/**/.env",)))  # fmt: skip
    assert any('mode = "none" turns the network off' in note and "registry.npmjs.org" in note for note in open_ends(off, "/home/me"))
    on = policy(allow=("registry.npmjs.org",))  # control: the same hosts with the network on
    assert not any("turns the network off" in note for note in open_ends(on, "/home/me"))
