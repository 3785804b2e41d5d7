"""Codex's prefix rules and Gemini CLI's policy rules keep applying to commands the hook sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stockade.cli import gemini_rules, hook
from stockade.cli.hook import Wrapper

WRAPPER = Wrapper("/opt/stockade/bin/stockade", "/usr/bin/bash")


def _codex(home: Path, text: str) -> dict[str, str]:
    (home / ".codex" / "rules").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "rules" / "default.rules").write_text(text)
    return {"HOME": str(home)}


def _gemini(home: Path, text: str) -> dict[str, str]:
    (home / ".gemini" / "policies").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "policies" / "mine.toml").write_text(text)
    return {"HOME": str(home)}


GEMINI_RULES = """
[[rule]]
toolName = "run_shell_command"
commandPrefix = "git push"
decision = "deny"
priority = 100

[[rule]]
toolName = "run_shell_command"
commandPrefix = "git push --dry-run"
decision = "allow"
priority = 200

[[rule]]
toolName = ["run_shell_command", "read_file"]
commandRegex = "rm .*-rf"
decision = "ask_user"
priority = 100

[[rule]]
toolName = "run_shell_command"
commandPrefix = "curl"
decision = "allow"
priority = 999
modes = ["yolo"]

[[rule]]
toolName = "run_shell_command"
commandPrefix = "curl"
decision = "deny"
priority = 1

[[rule]]
toolName = "read_file"
decision = "deny"
priority = 999
"""


@pytest.mark.parametrize(
    ("command", "decision"),
    [
        ("git push origin", "deny"),
        ("git push", "deny"),
        ("git pushx", ""),
        ("git push --dry-run", ""),
        ("echo ok; git push", "deny"),
        ("rm -rf build", "ask"),
        ("curl https://example.com", "deny"),
        ("cat README", ""),
    ],
)
def test_gemini_policy_rules_by_priority(tmp_path: Path, command: str, decision: str) -> None:
    env = _gemini(tmp_path, GEMINI_RULES)
    assert gemini_rules.verdict(command, {"command": command}, str(tmp_path), env).decision == decision


def test_gemini_user_tier_outranks_project_tier(tmp_path: Path) -> None:
    env = _gemini(tmp_path, '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "make"\ndecision = "allow"\npriority = 1\n')
    project = tmp_path / "project"
    (project / ".gemini" / "policies").mkdir(parents=True)
    (project / ".gemini" / "policies" / "p.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "make"\ndecision = "deny"\npriority = 999\n'
    )
    assert gemini_rules.verdict("make all", {"command": "make all"}, str(project), env).decision == ""


@pytest.mark.parametrize("text", ["[[rule]\n", '[[rule]]\ntoolName = "run_shell_command"\ndecision = "maybe"\n', 'rule = 3\n'])
def test_a_gemini_policy_stockade_cannot_read_blocks(tmp_path: Path, text: str) -> None:
    env = _gemini(tmp_path, text)
    found = gemini_rules.verdict("echo hi", {"command": "echo hi"}, str(tmp_path), env)
    assert found.decision == "deny" and "could not read the Gemini CLI policy" in found.reason


def test_the_hook_answers_gemini_deny_and_ask_in_gemini_terms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _gemini(tmp_path, GEMINI_RULES)
    monkeypatch.setenv("HOME", str(tmp_path))
    payload = {"hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "cwd": str(tmp_path)}
    denied = hook.answer("gemini", {**payload, "tool_input": {"command": "git push"}}, WRAPPER)
    assert denied == {"decision": "deny", "reason": denied["reason"]} and "policy says deny" in denied["reason"]
    asked = hook.answer("gemini", {**payload, "tool_input": {"command": "rm -rf x"}}, WRAPPER)
    assert asked["decision"] == "ask" and asked["hookSpecificOutput"]["tool_input"]["command"].startswith(WRAPPER.stockade)
    plain = hook.answer("gemini", {**payload, "tool_input": {"command": "ls"}}, WRAPPER)
    assert "decision" not in plain


def test_the_hook_answers_codex_deny_without_a_rewrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _codex(tmp_path, 'prefix_rule(pattern=["git", "push"], decision="forbidden")\n')
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    payload = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": str(tmp_path), "tool_input": {"command": "git push"}}
    specific = hook.answer("codex", payload, WRAPPER)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny" and "updatedInput" not in specific
    wrapped = WRAPPER.sandboxed("git push")
    again = hook.answer("codex", {**payload, "tool_input": {"command": wrapped}}, WRAPPER)["hookSpecificOutput"]
    assert again["permissionDecision"] == "deny", "an already wrapped command is matched by what it runs"
    json.dumps(again)
