"""Small things a new user trips on: repeated sources listed once, CA bundle paths passed and keys beside them withheld."""

from __future__ import annotations

from pathlib import Path

from stockade.core.locations import Locations
from stockade.profiles.envfilter import sandbox_env
from stockade.profiles.model import EnvRules
from stockade.profiles.resolve import resolve


def test_an_untrusted_file_lists_each_source_once(project: Path, locations: Locations) -> None:
    (project / ".stockade.toml").write_text('[network]\nallow = ["pypi.org"]\n')
    result = resolve(project, locations)
    assert not result.trusted
    assert len(result.policy.sources) == len(set(result.policy.sources)) == 2, result.policy.sources


def test_a_ca_bundle_path_passes_and_the_keys_beside_it_do_not() -> None:
    host = {"AWS_CA_BUNDLE": "/etc/corp-ca.pem", "AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_SESSION_TOKEN": "T"}
    env = sandbox_env(host, EnvRules())
    assert env == {"AWS_CA_BUNDLE": "/etc/corp-ca.pem", "AWS_REGION": "eu-west-1"}
    assert sandbox_env(host, EnvRules(deny=("AWS_CA_BUNDLE",))) == {"AWS_REGION": "eu-west-1"}  # a policy may still withhold it
