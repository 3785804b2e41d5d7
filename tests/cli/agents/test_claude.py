"""Claude Code's deny and ask rules keep applying to commands the hook sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stockade.cli import hook
from stockade.cli.agents import claude as agent_rules
from stockade.cli.hook import Wrapper

WRAPPER = Wrapper("/opt/stockade/bin/stockade", "/usr/bin/bash")


@pytest.mark.parametrize(
    ("rule", "command", "covered"),
    [
        ("Bash", "anything at all", True),
        ("Bash(*)", "anything at all", True),
        ("Bash(echo denied-marker)", "echo denied-marker", True),
        ("Bash(echo denied-marker)", "echo denied-marker now", False),
        ("Bash(git push:*)", "git push origin main", True),
        ("Bash(git push:*)", "git push", True),
        ("Bash(git push:*)", "git pushx", False),
        ("Bash(git push *)", "git push", True),
        ("Bash(git push *)", "git push -f", True),
        ("Bash(ls*)", "lsof -i", True),
        ("Bash(ls *)", "lsof -i", False),
        ("Bash(git * main)", "git merge main", True),
        ("Bash(git * main)", "git merge dev", False),
        ("Read(./.env)", "cat .env", False),
    ],
)
def test_rule_matching_follows_claude_code(rule: str, command: str, covered: bool) -> None:
    assert agent_rules.matches(rule, command) is covered


@pytest.mark.parametrize(
    "command",
    [
        "echo denied-marker",
        "true && echo denied-marker",
        "ls | echo denied-marker; pwd",
        "timeout 5 echo denied-marker",
        "FOO=1 nohup echo denied-marker &",
        "echo $(echo denied-marker)",
        "cd /x\necho denied-marker",
    ],
)
def test_every_part_of_a_compound_command_is_checked(command: str) -> None:
    parts = list(agent_rules.command_parts(command))
    assert any(agent_rules.matches("Bash(echo denied-marker)", part) for part in parts), parts


def test_quoted_operators_do_not_split() -> None:
    parts = list(agent_rules.command_parts("echo 'a; echo denied-marker'"))
    assert not any(agent_rules.matches("Bash(echo denied-marker)", part) for part in parts), parts


def _settings(folder: Path, **permissions: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps({"permissions": permissions}))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


def _claude(command: str, cwd: Path) -> dict[str, object]:
    payload = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}, "cwd": str(cwd)}
    out = hook.answer("claude", payload, WRAPPER)
    assert out is not None
    return out["hookSpecificOutput"]  # type: ignore[return-value]


def test_a_user_deny_rule_denies_and_others_are_sandboxed(home: Path, tmp_path: Path) -> None:
    _settings(home / ".claude", deny=["Bash(echo denied-marker)"])
    denied = _claude("echo denied-marker", tmp_path)
    assert denied["permissionDecision"] == "deny" and "updatedInput" not in denied
    assert "Bash(echo denied-marker)" in str(denied["permissionDecisionReason"])
    allowed = _claude("echo fine", tmp_path)  # control
    assert allowed["permissionDecision"] == "allow" and allowed["updatedInput"] == {"command": WRAPPER.wrap("echo fine")}


def test_an_ask_rule_asks_with_the_sandboxed_command(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    _settings(project / ".claude", ask=["Bash(git push:*)"])
    asked = _claude("git push origin main", project / "sub")
    assert asked["permissionDecision"] == "ask"
    assert asked["updatedInput"] == {"command": WRAPPER.wrap("git push origin main")}


def test_deny_beats_ask_and_local_and_managed_files_count(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"permissions": {"deny": ["Bash(rm *)"]}}))
    _settings(home / ".claude", ask=["Bash(rm -rf build)"])
    assert _claude("rm -rf build", project)["permissionDecision"] == "deny"
    monkeypatch.setattr(agent_rules, "MANAGED", (str(tmp_path / "managed-settings.json"),))
    (tmp_path / "managed-settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(curl:*)"]}}))
    assert _claude("curl https://example.test", tmp_path)["permissionDecision"] == "deny"


def test_a_wrapped_command_is_judged_by_what_it_runs(home: Path, tmp_path: Path) -> None:
    _settings(home / ".claude", deny=["Bash(echo denied-marker)"])
    assert _claude(WRAPPER.wrap("echo denied-marker"), tmp_path)["permissionDecision"] == "deny"


def test_an_unreadable_settings_file_asks(home: Path, tmp_path: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text("{ not json")
    asked = _claude("echo hi", tmp_path)
    assert asked["permissionDecision"] == "ask" and "could not read" in str(asked["permissionDecisionReason"])
