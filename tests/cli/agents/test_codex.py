"""Codex's prefix rules, read from its .rules files without running them and matched word by word."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.cli.agents import codex as codex_rules
from stockade.cli.agents.codex import MAX_RULES_FILE, PrefixRule, RulesError, read_rules, rules_files


def _codex(home: Path, text: str) -> dict[str, str]:
    (home / ".codex" / "rules").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "rules" / "default.rules").write_text(text)
    return {"HOME": str(home)}


@pytest.mark.parametrize(
    ("command", "decision"),
    [
        ("git push origin main", "deny"),
        ("git push", "deny"),
        ("git pushx", ""),
        ("git", ""),
        ("git status && git push -f", "deny"),
        ("echo $(git push)", "deny"),
        ("jj git push", ""),
        ("rm -rf build", "deny"),
        ("rm -r build", ""),
        ("npm test", ""),
    ],
)
def test_codex_prefix_rules_match_word_by_word(tmp_path: Path, command: str, decision: str) -> None:
    env = _codex(
        tmp_path,
        'prefix_rule(pattern=["git", "push"], decision="forbidden", justification="use the review tool")\n'
        'prefix_rule(pattern=["rm", ["-rf", "-fr"]], decision="prompt")\n'
        'prefix_rule(pattern=["npm"], decision="allow")\n',
    )
    assert codex_rules.verdict(command, str(tmp_path), env).decision == decision


def test_codex_reasons_name_the_rule_and_why(tmp_path: Path) -> None:
    env = _codex(
        tmp_path,
        'prefix_rule(pattern=["git", "push"], decision="forbidden", justification="use the review tool")\nprefix_rule(["rm"], decision="prompt")\n',
    )
    forbidden = codex_rules.verdict("git push", str(tmp_path), env)
    assert "forbids `git push` (use the review tool)" in forbidden.reason
    asked = codex_rules.verdict("rm x", str(tmp_path), env)
    assert asked.decision == "deny" and "cannot let Codex ask" in asked.reason


@pytest.mark.parametrize(
    "text",
    [
        "prefix_rule(pattern=[\n",
        "prefix_rule(pattern=some_list)\n",
        "prefix_rule(pattern=[], decision='forbidden')\n",
        "prefix_rule(pattern=['x'], decision='never')\n",
        "prefix_rule(pattern=[1])\n",
        "\udcff",
    ],
    ids=["syntax", "not-literal", "empty", "bad-decision", "not-a-word", "not-utf8"],
)
def test_a_codex_rules_file_stockade_cannot_read_blocks(tmp_path: Path, text: str) -> None:
    (tmp_path / ".codex" / "rules").mkdir(parents=True)
    (tmp_path / ".codex" / "rules" / "default.rules").write_bytes(text.encode("utf-8", "surrogateescape"))
    found = codex_rules.verdict("echo hi", str(tmp_path), {"HOME": str(tmp_path)})
    assert found.decision == "deny" and "could not read the Codex rules" in found.reason


def test_codex_project_rules_and_codex_home(tmp_path: Path) -> None:
    project = tmp_path / "project" / "sub"
    project.mkdir(parents=True)
    (tmp_path / "project" / ".codex" / "rules").mkdir(parents=True)
    (tmp_path / "project" / ".codex" / "rules" / "team.rules").write_text('prefix_rule(pattern=["deploy"], decision="forbidden")\n')
    assert codex_rules.verdict("deploy now", str(project), {"HOME": str(tmp_path / "nohome")}).decision == "deny"
    elsewhere = tmp_path / "codex-home"
    (elsewhere / "rules").mkdir(parents=True)
    (elsewhere / "rules" / "a.rules").write_text('prefix_rule(pattern=["curl"], decision="forbidden")\n')
    assert codex_rules.verdict("curl x", str(tmp_path), {"HOME": str(tmp_path), "CODEX_HOME": str(elsewhere)}).decision == "deny"


def rules_in(tmp_path: Path, text: str) -> list[PrefixRule]:
    path = tmp_path / "x.rules"
    path.write_text(text)
    return read_rules(str(path))


def test_read_rules_takes_literal_calls_only(tmp_path: Path) -> None:
    rules = rules_in(
        tmp_path,
        "# a Starlark file, parsed never run\n"
        'prefix_rule(pattern=["git", ["push", "pull"]], decision="forbidden", justification="review first")\n'
        'prefix_rule(["ls"])\n'
        'other_call(pattern=["rm"], decision="forbidden")\n'
        'x.prefix_rule(pattern=["rm"], decision="forbidden")\n'
        'def f():\n    prefix_rule(pattern=["nested"], decision="prompt", justification=3)\n',
    )
    path = str(tmp_path / "x.rules")
    assert rules == [
        PrefixRule((frozenset({"git"}), frozenset({"push", "pull"})), "forbidden", "review first", path),
        PrefixRule((frozenset({"ls"}),), "allow", "", path),  # allow unless it says otherwise
        PrefixRule((frozenset({"nested"}),), "prompt", "", path),  # a justification that is not text is dropped
    ]


def test_a_keyword_pattern_wins_over_a_positional_one(tmp_path: Path) -> None:
    (rule,) = rules_in(tmp_path, 'prefix_rule(["a"], pattern=["b"], decision="forbidden")\n')
    assert rule.pattern == (frozenset({"b"}),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("prefix_rule(decision='forbidden')\n", "needs a non-empty pattern list", id="no-pattern"),
        pytest.param("prefix_rule(pattern='git push')\n", "needs a non-empty pattern list", id="pattern-is-a-string"),
        pytest.param("prefix_rule(pattern=[[]])\n", "each pattern word is a string or a list of strings", id="empty-choices"),
        pytest.param("prefix_rule(pattern=[['a', 1]])\n", "each pattern word", id="odd-choice"),
        pytest.param("prefix_rule(pattern=['a'], decision=d)\n", "prefix_rule takes literal values", id="decision-not-literal"),
        pytest.param(
            "\n\nprefix_rule(pattern=['a'], decision='deny')\n", "line 3: decision 'deny' is not allow, prompt or forbidden", id="line-number"
        ),
    ],
)
def test_read_rules_refuses(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(RulesError, match=message):
        rules_in(tmp_path, text)


def test_a_huge_rules_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match="larger than 1 MiB"):
        rules_in(tmp_path, "#" * (MAX_RULES_FILE + 1))
    assert rules_in(tmp_path, "#" * MAX_RULES_FILE) == []


@pytest.mark.parametrize(
    ("words", "covered"),
    [
        (["git", "push"], True),
        (["git", "pull", "--rebase"], True),
        (["git"], False),
        (["git", "fetch"], False),
        (["sudo", "git", "push"], False),
        ([], False),
    ],
)
def test_a_rule_covers_commands_that_start_with_its_pattern(words: list[str], covered: bool) -> None:
    rule = PrefixRule((frozenset({"git"}), frozenset({"push", "pull"})), "forbidden", "", "/r")
    assert rule.covers(words) is covered
    assert rule.text() == "git pull|push"


def test_rules_files_codex_home_then_the_project_upwards(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "work" / "proj"
    for folder in (home / ".codex" / "rules", tmp_path / "work" / ".codex" / "rules", project / ".codex" / "rules"):
        folder.mkdir(parents=True)
    (home / ".codex" / "rules" / "b.rules").write_text("")
    (home / ".codex" / "rules" / "a.rules").write_text("")
    (home / ".codex" / "rules" / "notes.txt").write_text("")
    (home / ".codex" / "rules" / "dir.rules").mkdir()
    (project / ".codex" / "rules" / "p.rules").write_text("")
    (tmp_path / "work" / ".codex" / "rules" / "w.rules").write_text("")
    found = rules_files(str(project), {"HOME": str(home)})
    assert [str(Path(f).relative_to(tmp_path)) for f in found] == [
        "home/.codex/rules/a.rules",
        "home/.codex/rules/b.rules",
        "work/proj/.codex/rules/p.rules",
        "work/.codex/rules/w.rules",
    ]
    assert rules_files(str(home), {"HOME": str(home)}) == found[:2]  # the home's own folder once


def test_rules_files_without_home_uses_the_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _codex(tmp_path, "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert rules_files("", {}) == [str(tmp_path / ".codex" / "rules" / "default.rules")]


def test_no_rules_no_verdict(tmp_path: Path) -> None:
    assert codex_rules.verdict("git push", str(tmp_path), {"HOME": str(tmp_path)}).decision == ""


def test_the_strictest_rule_decides(tmp_path: Path) -> None:
    env = _codex(
        tmp_path,
        'prefix_rule(["git"], decision="prompt")\nprefix_rule(["git", "push"], decision="forbidden")\nprefix_rule(["git", "push", "-n"], decision="allow")\n',
    )
    assert "forbids `git push`" in codex_rules.verdict("git push -n", str(tmp_path), env).reason
    assert "asks for approval before `git`" in codex_rules.verdict("git status", str(tmp_path), env).reason


def test_a_command_shlex_cannot_split_is_split_on_spaces(tmp_path: Path) -> None:
    env = _codex(tmp_path, 'prefix_rule(["git", "push"], decision="forbidden")\n')
    assert codex_rules.verdict("git push 'unclosed", str(tmp_path), env).decision == "deny"
