"""Merging layers: lists union in order, later scalars win, env tables merge, hidden cannot hold writable."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.errors import PolicyError
from stockade.profiles.loader import Layer, parse_layer
from stockade.profiles.merge import compose, merge_values
from stockade.profiles.model import NetworkMode

PROJECT = Path("/proj")
HOME = Path("/home/ann")


def layer(text: str, source: str = "/proj/.stockade.toml") -> Layer:
    return parse_layer(text, source, base=PROJECT, home=HOME)


def test_lists_union_in_load_order_without_repeats() -> None:
    merged = merge_values(
        [
            layer('[network]\nallow = ["a.test", "b.test"]\n', "builtin:base"),
            layer('[network]\nallow = ["b.test", "c.test"]\n'),
        ]
    )
    assert merged["network"]["allow"] == ("a.test", "b.test", "c.test")


def test_later_scalars_win_and_env_tables_merge() -> None:
    merged = merge_values(
        [
            layer('[network]\nmode = "open"\n[env]\nset = { A = "1", B = "1" }\n[limits]\npids = 10\n', "builtin:base"),
            layer('[network]\nmode = "none"\n[env]\nset = { B = "2", C = "3" }\n'),
        ]
    )
    assert merged["network"]["mode"] is NetworkMode.NONE
    assert merged["env"]["set"] == {"A": "1", "B": "2", "C": "3"}
    assert merged["limits"]["pids"] == 10  # kept from the earlier layer


def test_merge_of_nothing_is_empty() -> None:
    assert merge_values([]) == {}
    assert merge_values([layer("")]) == {}


def test_compose_builds_the_policy() -> None:
    policy = compose(
        [
            layer('[filesystem]\nallow_write = ["~/.cache/pip"]\n[env]\nset = { Z = "z", A = "a" }\n', "builtin:python"),
            layer('[filesystem]\nallow_write = ["."]\nhome = "host"\n[limits]\nmemory = "32M"\n[audit]\nlog = "~/audit.jsonl"\n'),
        ],
        project_dir=PROJECT,
        origin="/proj/.stockade.toml",
    )
    assert policy.filesystem.allow_write == ("/home/ann/.cache/pip", "/proj")
    assert policy.filesystem.home == "host"
    assert policy.env.set == (("A", "a"), ("Z", "z"))  # sorted by name
    assert policy.limits.memory == 32 << 20
    assert policy.audit.log == "/home/ann/audit.jsonl"
    assert policy.sources == ("builtin:python", "/proj/.stockade.toml")
    assert policy.protected_files == ("/proj/.stockade.toml",)  # built-ins are not files
    assert policy.origin == "/proj/.stockade.toml"
    assert policy.project_dir == PROJECT


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        pytest.param("", NetworkMode.NONE, id="nothing-is-none"),
        pytest.param('[network]\nallow = ["a.test"]\n', NetworkMode.ALLOWLIST, id="allow-implies-allowlist"),
        pytest.param('[network]\nallow = ["a.test"]\nmode = "none"\n', NetworkMode.NONE, id="explicit-mode-wins"),
        pytest.param('[network]\nmode = "open"\n', NetworkMode.OPEN, id="open"),
    ],
)
def test_network_mode_defaults_from_the_allow_list(text: str, mode: NetworkMode) -> None:
    assert compose([layer(text)], project_dir=PROJECT, origin="x").network.mode is mode


def test_defaults_when_no_layer_sets_anything() -> None:
    policy = compose([], project_dir=PROJECT, origin="x")
    assert policy.filesystem.home == "private"
    assert policy.audit.log is None
    assert policy.sources == () and policy.protected_files == ()


def test_protected_files_are_listed_once() -> None:
    one = layer("")
    assert compose([one, one], project_dir=PROJECT, origin="x").protected_files == ("/proj/.stockade.toml",)


def test_anywhere_rules_spread_to_places_the_user_opens_not_builtins() -> None:
    policy = compose(
        [
            layer('[filesystem]\nallow_write = ["~/.npm"]\n', "builtin:node"),
            layer('[filesystem]\nallow_write = ["~/shared"]\nallow_read = ["~/notes"]\ndeny_read = ["**/.env"]\ndeny_write = ["**/.git"]\n'),
        ],
        project_dir=PROJECT,
        origin="x",
    )
    assert policy.filesystem.deny_read == ("/proj/**/.env", "/home/ann/shared/**/.env", "/home/ann/notes/**/.env")
    assert policy.filesystem.deny_write == ("/proj/**/.git", "/home/ann/shared/**/.git")  # shown places are read-only anyway


def test_a_place_both_hidden_and_writable_names_the_users_allow_write_line() -> None:
    mine = layer('# mine\n[filesystem]\ndeny_read = ["~/secret"]\n\nallow_write = ["~/secret"]\n')
    with pytest.raises(PolicyError) as caught:
        compose([mine], project_dir=PROJECT, origin="x")
    assert caught.value.file == "/proj/.stockade.toml"
    assert caught.value.line == 5
    assert "allow_write /home/ann/secret is also deny_read" in str(caught.value)


def test_a_writable_place_inside_a_hidden_one_is_a_carve_out() -> None:
    """srt's carve-out: a hidden folder whose one subfolder stays writable (issue 33)."""
    mine = layer('[filesystem]\ndeny_read = ["~/secret"]\nallow_write = ["~/secret/out"]\n')
    policy = compose([mine], project_dir=PROJECT, origin="x")
    assert "/home/ann/secret/out" in policy.filesystem.allow_write and "/home/ann/secret" in policy.filesystem.deny_read


def test_writable_inside_hidden_from_a_builtin_names_no_file() -> None:
    with pytest.raises(PolicyError) as caught:
        compose(
            [layer('[filesystem]\nallow_write = ["~/.cache/pip"]\n', "builtin:python"), layer('[filesystem]\ndeny_read = ["~/.cache/pip"]\n')],
            project_dir=PROJECT,
            origin="x",
        )
    assert caught.value.file is None and caught.value.line is None
    assert "allow_write /home/ann/.cache/pip is also deny_read" in caught.value.reason


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('[filesystem]\nallow_write = ["~/a"]\ndeny_read = ["~/a/secret"]\n', id="hidden-inside-writable-is-a-carve-out"),
        pytest.param('[filesystem]\nallow_write = ["~/a/b"]\ndeny_read = ["~/a/*"]\n', id="globs-not-checked"),
        pytest.param('[filesystem]\nallow_write = ["~/ab"]\ndeny_read = ["~/a"]\n', id="sibling-prefix"),
    ],
)
def test_allowed_combinations(text: str) -> None:
    compose([layer(text)], project_dir=PROJECT, origin="x")


def test_http_rules_merge_per_host_across_layers() -> None:
    from stockade.profiles.merge import merge_http

    merged = merge_http(
        {"a.test": (("GET /x",), (), ("refs/heads/a/*",))},
        {"a.test": (("GET /y", "GET /x"), ("* /z",), ("refs/tags/*",)), "b.test": (("GET /",), (), ())},
    )
    assert merged == {"a.test": (("GET /x", "GET /y"), ("* /z",), ("refs/heads/a/*", "refs/tags/*")), "b.test": (("GET /",), (), ())}
