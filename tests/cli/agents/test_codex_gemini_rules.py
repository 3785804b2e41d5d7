"""Codex's prefix rules and Gemini CLI's policy rules keep applying to commands the hook sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stockade.cli import hook
from stockade.cli.hook import Wrapper
from tests.cli.agents.test_gemini import GEMINI_RULES

WRAPPER = Wrapper("/opt/stockade/bin/stockade", "/usr/bin/bash")


def _codex(home: Path, text: str) -> dict[str, str]:
    (home / ".codex" / "rules").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "rules" / "default.rules").write_text(text)
    return {"HOME": str(home)}


def _gemini(home: Path, text: str) -> dict[str, str]:
    (home / ".gemini" / "policies").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "policies" / "mine.toml").write_text(text)
    return {"HOME": str(home)}


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
