from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from stockade.core.locations import Locations
from stockade.profiles.model import AuditRules, NetworkMode, NetworkRules, Policy
from stockade.proxy.client import launch, sessionclient
from stockade.proxy.control import SessionSpec


def test_ticket_repr_hides_the_token() -> None:
    assert "tok" not in repr(sessionclient.SessionTicket(port=1, token="tok", session_id="s"))


def test_register_end_and_errors(fresh_locations: Callable[[str], Locations], tmp_path: Path) -> None:
    locations = fresh_locations("api")
    port = launch.ensure_daemon(locations, idle_timeout=30)
    spec = SessionSpec(session_id="one", command=["true"], cwd="/", allow=("allowed.test",), audit_path=str(tmp_path / "a.jsonl"))
    ticket = sessionclient.register_session(locations, spec)  # registration starts nothing new
    assert (ticket.port, ticket.session_id) == (port, "one") and ticket.token
    with pytest.raises(launch.ProxyDaemonError, match="already registered"):
        sessionclient.register_session(locations, spec)
    with pytest.raises(launch.ProxyDaemonError, match="wildcard"):
        sessionclient.register_session(
            locations, SessionSpec(session_id="bad", command=[], cwd="/", allow=("*",), audit_path=str(tmp_path / "b.jsonl"))
        )
    assert sessionclient.end_session(locations, "one") == []
    with pytest.raises(launch.ProxyDaemonError, match="unknown session"):
        sessionclient.end_session(locations, "one")


def test_register_starts_a_daemon_when_none_answers(fresh_locations: Callable[[str], Locations], tmp_path: Path) -> None:
    locations = fresh_locations("cold")
    spec = SessionSpec(session_id="cold", command=["true"], cwd="/", allow=(), audit_path=str(tmp_path / "a.jsonl"))
    ticket = sessionclient.register_session(locations, spec)
    assert ticket.port == launch.ensure_daemon(locations)
    sessionclient.end_session(locations, "cold")


def test_session_rules_are_the_policy_as_plain_data(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("rules")
    policy = Policy(network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("pypi.org",), deny=("evil.test",)), origin="/p/.stockade.toml")
    assert sessionclient.session_rules(policy, locations) == {
        "mode": "allowlist",
        "allow": ["pypi.org"],
        "deny": ["evil.test"],
        "audit_path": str(locations.default_audit_log),
        "origin": "/p/.stockade.toml",
        "http": [],
        "credentials": [],
    }
    logged = Policy(audit=AuditRules(log="/var/log/a.jsonl"))
    assert sessionclient.session_rules(logged, locations)["audit_path"] == "/var/log/a.jsonl"


def test_close_session_without_a_daemon_says_why_and_does_not_raise(fresh_locations: Callable[[str], Locations]) -> None:
    ended = sessionclient.close_session(fresh_locations("gone"), "nobody")
    assert ended.denials == [] and ended.audit_error is None
    assert ended.trouble.startswith("the proxy daemon was gone when the run ended (")


def test_attach_listener_needs_a_session_of_this_process() -> None:
    with pytest.raises(launch.ProxyDaemonError, match="not registered by this process"):
        sessionclient.attach_listener("never-registered", None)  # type: ignore[arg-type]
