"""The effective policy as JSON-ready data and as a standalone TOML document that loads back the same."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from stockade.profiles.loader import parse_layer
from stockade.profiles.merge import compose
from stockade.profiles.model import AuditRules, EnvRules, FilesystemRules, Limits, NetworkMode, NetworkRules, Policy
from stockade.profiles.serialize import policy_to_dict, policy_to_toml

PROJECT = Path("/proj")

FULL = Policy(
    filesystem=FilesystemRules(
        deny_read=("/proj/**/.env", "/home/ann/.ssh", "/home/ann/notes/**/.env"),  # as compose spreads it
        allow_write=("/proj",),
        deny_write=("/proj/.git/hooks",),
        home="host",
        allow_read=("/home/ann/notes",),
    ),
    network=NetworkRules(
        mode=NetworkMode.ALLOWLIST,
        allow=("pypi.org", "*.github.com", "x.test:8443"),
        deny=("10.0.0.0/8",),
        unix_sockets=("/run/a.sock",),
        unix_datagram=True,
    ),
    env=EnvRules(deny=("AWS_*",), set=(("CI", "1"), ("LANG", "C.UTF-8")), passthrough=("TERM",)),
    limits=Limits(memory=4 << 30, pids=256, wall_time=1800.0, file_size=1536, tmp_size=512 << 20),
    audit=AuditRules(log="/home/ann/audit.jsonl"),
    project_dir=PROJECT,
    origin="/proj/.stockade.toml",
    sources=("builtin:default", "/proj/.stockade.toml"),
)


def reloaded(policy: Policy) -> Policy:
    text = policy_to_toml(policy)
    return compose([parse_layer(text, "again.toml", base=Path("/elsewhere"), home=Path("/nohome"))], project_dir=policy.project_dir, origin="again")


def test_policy_to_dict() -> None:
    data = policy_to_dict(FULL)
    assert data["origin"] == "/proj/.stockade.toml"
    assert data["sources"] == ["builtin:default", "/proj/.stockade.toml"]
    assert data["project_dir"] == "/proj"
    assert data["filesystem"]["deny_read"] == ["/proj/**/.env", "/home/ann/.ssh", "/home/ann/notes/**/.env"]
    assert data["filesystem"]["home"] == "host"
    assert data["network"] == {
        "mode": "allowlist",
        "allow": ["pypi.org", "*.github.com", "x.test:8443"],
        "deny": ["10.0.0.0/8"],
        "unix_sockets": ["/run/a.sock"],
        "unix_datagram": True,
        "http": {},
    }
    assert data["env"] == {"deny": ["AWS_*"], "set": {"CI": "1", "LANG": "C.UTF-8"}, "pass": ["TERM"]}
    assert data["limits"] == {"memory": 4 << 30, "pids": 256, "wall_time": 1800.0, "file_size": 1536, "tmp_size": 512 << 20}
    assert data["audit"] == {"log": "/home/ann/audit.jsonl", "otlp": None}
    assert json.loads(json.dumps(data)) == data  # plain data only


def test_the_toml_is_valid_and_spells_limits_in_units() -> None:
    text = policy_to_toml(FULL)
    assert text.startswith("# effective policy from /proj/.stockade.toml\n# built from: builtin:default, /proj/.stockade.toml\n")
    document = tomllib.loads(text)
    assert "extends" not in document
    assert document["limits"] == {"memory": "4G", "pids": 256, "wall_time": "30m", "file_size": "1536", "tmp_size": "512M"}
    assert document["network"]["unix_datagram"] is True
    assert document["env"]["set"] == {"CI": "1", "LANG": "C.UTF-8"}


def test_the_toml_loads_back_to_the_same_rules() -> None:
    again = reloaded(FULL)
    assert (again.filesystem, again.network, again.env, again.limits, again.audit) == (
        FULL.filesystem,
        FULL.network,
        FULL.env,
        FULL.limits,
        FULL.audit,
    )


def test_an_empty_policy_leaves_unset_values_out() -> None:
    text = policy_to_toml(Policy())
    document = tomllib.loads(text)
    assert document["limits"] == {}
    assert document["audit"] == {}
    assert document["env"] == {"deny": [], "set": {}, "pass": []}  # an empty set is still written
    assert document["network"]["mode"] == "none" and document["network"]["unix_datagram"] is False
    again = reloaded(Policy())
    assert (again.filesystem, again.network, again.env, again.limits, again.audit) == (
        FilesystemRules(),
        NetworkRules(),
        EnvRules(),
        Limits(),
        AuditRules(),
    )


@pytest.mark.parametrize(
    "value",
    [
        pytest.param('quote " and back\\slash', id="quote-backslash"),
        pytest.param("esc \x1b[2J and bell \x07", id="c0-controls"),
        pytest.param("del \x7f and c1 \x9b", id="del-c1"),
        pytest.param("rtl \u202e override", id="bidi"),
        pytest.param("tag \U000e0001 past the bmp", id="astral-format"),
        pytest.param("line\nbreak\ttab", id="newline-tab"),
        pytest.param("café ünïcödé 😀", id="printable-non-ascii"),
    ],
)
def test_outside_text_is_escaped_and_loads_back(value: str) -> None:
    policy = Policy(env=EnvRules(set=(("V", value),)), audit=AuditRules(log="/logs/" + value.replace("\n", "")))
    text = policy_to_toml(policy)
    assert text.isprintable() or set(ch for ch in text if not ch.isprintable()) <= {"\n"}
    document = tomllib.loads(text)
    assert document["env"]["set"]["V"] == value
    assert document["audit"]["log"] == "/logs/" + value.replace("\n", "")


@pytest.mark.parametrize(("seconds", "spelled"), [(1.5, "1500ms"), (90.0, "90s"), (7200.0, "2h"), (0.25, "250ms")])
def test_wall_time_spellings(seconds: float, spelled: str) -> None:
    document = tomllib.loads(policy_to_toml(Policy(limits=Limits(wall_time=seconds))))
    assert document["limits"]["wall_time"] == spelled


def test_a_tiny_wall_time_loads_back() -> None:
    policy = compose([parse_layer('[limits]\nwall_time = "0.4ms"\n', "p.toml", base=PROJECT, home=PROJECT)], project_dir=PROJECT, origin="p")
    assert reloaded(policy).limits.wall_time == pytest.approx(0.0004)


def test_http_tables_are_written_as_tables_that_read_back() -> None:
    policy = Policy(network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("api.test",), http=(("api.test", ("GET /a/**",), ("* /a/x",)),)))
    text = policy_to_toml(policy)
    assert '[network.http."api.test"]' in text
    assert tomllib.loads(text)["network"]["http"] == {"api.test": {"allow": ["GET /a/**"], "deny": ["* /a/x"]}}
    assert policy_to_dict(policy)["network"]["http"] == {"api.test": {"allow": ["GET /a/**"], "deny": ["* /a/x"]}}
