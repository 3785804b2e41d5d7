"""Small things a new user trips on: repeated sources, CA bundle paths withheld, audit rows in time order."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_audit_rows_are_in_time_order_and_fit_80_columns(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from stockade.cli.main import main

    monkeypatch.setenv("COLUMNS", "80")
    log = project / "audit.jsonl"
    records = [  # written as flows end: the long download first started, last ended
        {"time": "2026-01-01T00:00:02+00:00", "session": "s1", "decision": "deny", "host": "second.test", "port": 443, "rule": "no allow rule matches"},
        {"time": "2026-01-01T00:00:01+00:00", "session": "s1", "decision": "allow", "host": "first.example.test", "port": 443,
         "method": "CONNECT", "rule": 'allow "*.example.test"', "bytes_up": 1200, "bytes_down": 52000000},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["audit", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert out.index("00:00:01") < out.index("00:00:02") and "first.example" in out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "1.2K/52M" in out
