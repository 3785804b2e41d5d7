"""Gemini CLI's policy rules for the shell tool: files by tier, patterns over the arguments, priority decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stockade.cli.agents import gemini as gemini_rules
from stockade.cli.agents.gemini import MAX_POLICY_FILE, PolicyError, PolicyRule, policy_files, read_policy


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


@pytest.mark.parametrize("text", ["[[rule]\n", '[[rule]]\ntoolName = "run_shell_command"\ndecision = "maybe"\n', "rule = 3\n"])
def test_a_gemini_policy_stockade_cannot_read_blocks(tmp_path: Path, text: str) -> None:
    env = _gemini(tmp_path, text)
    found = gemini_rules.verdict("echo hi", {"command": "echo hi"}, str(tmp_path), env)
    assert found.decision == "deny" and "could not read the Gemini CLI policy" in found.reason


def policy_in(tmp_path: Path, text: str, tier: int = 4) -> list[PolicyRule]:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return read_policy(str(path), tier)


def arguments(command: str, **more: str) -> str:
    return json.dumps({**more, "command": command}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_read_policy_keeps_shell_rules_with_tier_and_priority(tmp_path: Path) -> None:
    rules = policy_in(tmp_path, GEMINI_RULES)
    assert [(r.decision, r.priority, r.limited_to_modes) for r in rules] == [
        ("deny", 4.1, False),
        ("allow", 4.2, False),
        ("ask_user", 4.1, False),
        ("allow", 4.999, True),
        ("deny", 4.001, False),
    ]  # the read_file rule is not the shell's
    assert all(r.path == str(tmp_path / "p.toml") for r in rules)


@pytest.mark.parametrize(
    ("tool", "kept"),
    [
        pytest.param('toolName = "run_shell_command"', True, id="exact"),
        pytest.param('toolName = "*"', True, id="star"),
        pytest.param('toolName = "run_*"', True, id="wildcard"),
        pytest.param("", True, id="no-tool-name-means-every-tool"),
        pytest.param('toolName = ["read_file", "run_shell_command"]', True, id="list"),
        pytest.param('toolName = "read_file"', False, id="another-tool"),
        pytest.param('toolName = "run_shell"', False, id="a-prefix-is-not-a-match"),
        pytest.param('toolName = "*_file"', False, id="wildcard-elsewhere"),
    ],
)
def test_which_rules_name_the_shell(tmp_path: Path, tool: str, kept: bool) -> None:
    assert len(policy_in(tmp_path, f'[[rule]]\n{tool}\ndecision = "deny"\n')) == int(kept)


@pytest.mark.parametrize(
    ("rule", "command", "covered"),
    [
        pytest.param('commandPrefix = "git push"', "git push", True, id="prefix-whole"),
        pytest.param('commandPrefix = "git push"', "git push -f", True, id="prefix-then-space"),
        pytest.param('commandPrefix = "git push"', "git pushx", False, id="prefix-mid-word"),
        pytest.param('commandPrefix = "git push"', "echo git push", False, id="prefix-not-at-start"),
        pytest.param('commandPrefix = ["npm", "yarn"]', "yarn add x", True, id="prefix-list"),
        pytest.param('commandPrefix = "echo \\"hi"', 'echo "hi there', True, id="prefix-with-a-quote"),
        pytest.param('commandRegex = "rm .*-rf"', "rm x -rf", True, id="regex"),
        pytest.param('commandRegex = "rm .*-rf"', "echo rm -rf", False, id="regex-anchored-at-the-command"),
        pytest.param('argsPattern = "\\"dir_path\\":\\"/etc"', "ls", True, id="args-pattern-over-every-argument"),
        pytest.param("", "anything", True, id="no-pattern-matches-every-call"),
        pytest.param('commandRegex = "(unclosed"', "anything", True, id="unreadable-regex-matches-strict"),
    ],
)
def test_patterns_over_the_arguments(tmp_path: Path, rule: str, command: str, covered: bool) -> None:
    (found,) = policy_in(tmp_path, f'[[rule]]\ntoolName = "run_shell_command"\n{rule}\ndecision = "deny"\n')
    assert found.covers(arguments(command, dir_path="/etc/x")) is covered


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param('rule = "x"\n', "is not an array of tables", id="rule-not-array"),
        pytest.param("rule = [1]\n", "rule 1 is not a table", id="rule-not-table"),
        pytest.param('[[rule]]\ndecision = "allow"\n[[rule]]\ndecision = "no"\n', "rule 2: decision 'no'", id="bad-decision-numbered"),
        pytest.param('[[rule]]\ndecision = "deny"\npriority = "high"\n', "priority is not a number", id="priority-text"),
        pytest.param('[[rule]]\ndecision = "deny"\npriority = true\n', "priority is not a number", id="priority-bool"),
        pytest.param('[[rule]]\ndecision = "deny"\ncommandPrefix = 3\n', "commandPrefix is not a string", id="prefix-number"),
        pytest.param('[[rule]]\ndecision = "deny"\ncommandPrefix = ["a", 1]\n', "commandPrefix is not a string", id="prefix-list-number"),
        pytest.param('[[rule]]\ndecision = "deny"\ncommandRegex = ["a"]\n', "commandRegex is not a string", id="regex-list"),
        pytest.param('[[rule]]\ndecision = "deny"\nargsPattern = 1\n', "argsPattern is not a string", id="args-number"),
    ],
)
def test_read_policy_refuses(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        policy_in(tmp_path, text)


def test_a_rule_for_another_tool_is_not_checked(tmp_path: Path) -> None:
    assert policy_in(tmp_path, '[[rule]]\ntoolName = "read_file"\ndecision = "never"\n') == []


def test_a_huge_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="larger than 1 MiB"):
        policy_in(tmp_path, "#" * (MAX_POLICY_FILE + 1))


def test_policy_files_by_tier_and_upwards(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "work" / "proj"
    for folder in (home / ".gemini" / "policies", project / ".gemini" / "policies", tmp_path / "work" / ".gemini" / "policies"):
        folder.mkdir(parents=True)
    (home / ".gemini" / "policies" / "b.toml").write_text("")
    (home / ".gemini" / "policies" / "a.toml").write_text("")
    (home / ".gemini" / "policies" / "a.json").write_text("")
    (project / ".gemini" / "policies" / "p.toml").write_text("")
    (tmp_path / "work" / ".gemini" / "policies" / "w.toml").write_text("")
    found = [(str(Path(p).relative_to(tmp_path)), tier) for p, tier in policy_files(str(project), {"HOME": str(home)}) if p.startswith(str(tmp_path))]
    assert found == [
        ("home/.gemini/policies/a.toml", 4),
        ("home/.gemini/policies/b.toml", 4),
        ("work/proj/.gemini/policies/p.toml", 3),
        ("work/.gemini/policies/w.toml", 3),
    ]
    in_home = [tier for p, tier in policy_files(str(home), {"HOME": str(home)}) if p.startswith(str(tmp_path))]
    assert in_home == [4, 4]  # the home's folder is the user's tier, read once


def test_an_allow_limited_to_modes_never_outranks(tmp_path: Path) -> None:
    env = _gemini(
        tmp_path,
        '[[rule]]\ncommandPrefix = "curl"\ndecision = "ask_user"\npriority = 1\n[[rule]]\ncommandPrefix = "curl"\ndecision = "allow"\npriority = 9\nmodes = ["autoEdit"]\n',
    )
    assert gemini_rules.verdict("curl x", {"command": "curl x"}, str(tmp_path), env).decision == "ask"


def test_on_a_priority_tie_the_stricter_rule_decides(tmp_path: Path) -> None:
    env = _gemini(
        tmp_path,
        '[[rule]]\ncommandPrefix = "make"\ndecision = "allow"\npriority = 5\n[[rule]]\ncommandPrefix = "make"\ndecision = "deny"\npriority = 5\n',
    )
    found = gemini_rules.verdict("make", {"command": "make"}, str(tmp_path), env)
    assert found.decision == "deny"
    assert found.reason == f"your Gemini CLI policy says deny for this command ({tmp_path / '.gemini' / 'policies' / 'mine.toml'})"


def test_the_worst_simple_command_decides(tmp_path: Path) -> None:
    env = _gemini(tmp_path, '[[rule]]\ncommandPrefix = "a"\ndecision = "ask_user"\n[[rule]]\ncommandPrefix = "b"\ndecision = "deny"\n')
    assert gemini_rules.verdict("a; b", {"command": "a; b"}, str(tmp_path), env).decision == "deny"
    assert gemini_rules.verdict("a && c", {"command": "a && c"}, str(tmp_path), env).decision == "ask"


def test_no_policy_no_verdict(tmp_path: Path) -> None:
    assert gemini_rules.verdict("rm -rf /", {"command": "rm -rf /"}, str(tmp_path), {"HOME": str(tmp_path)}).decision == ""
