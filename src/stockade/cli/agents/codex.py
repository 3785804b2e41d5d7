"""Codex's own command rules (`prefix_rule` in `.rules` files), matched against the command the model wrote.

Codex checks its execpolicy rules against the command it finally runs, which
after the hook is `stockade run ...`: a user's
`prefix_rule(pattern=["git", "push"], decision="forbidden")` stopped applying
once stockade was installed (seen live with Codex 0.169). So the hook reads the
rule files Codex reads (`$CODEX_HOME/rules/*.rules`, default `~/.codex`, and a
project's `.codex/rules/*.rules` from the working directory up) and matches the
original command: each simple command in it (split as for Claude Code's rules,
claude.py), word by word against each pattern.

`forbidden` blocks. `prompt` blocks too: Codex reads a hook's "ask" as a failed
hook and runs the original command unwrapped (seen live), so there is no way
to let Codex ask; the reason says so. The files are Starlark; they are read
with Python's parser (never run) and only literal `prefix_rule(...)` calls
count. A file that cannot be read blocks rather than guessing.
"""

from __future__ import annotations

import ast
import os
import shlex
from dataclasses import dataclass

from stockade.cli.agents.claude import Verdict, command_parts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_RULES_FILE = 1 << 20  # bytes read of one .rules file
STRICTNESS = {"forbidden": 2, "prompt": 1, "allow": 0}


@dataclass(frozen=True)
class PrefixRule:
    pattern: tuple[frozenset[str], ...]  # one set of alternatives per word
    decision: str
    justification: str
    path: str

    def covers(self, words: list[str]) -> bool:
        return len(words) >= len(self.pattern) and all(word in choices for word, choices in zip(words, self.pattern, strict=False))

    def text(self) -> str:
        return " ".join("|".join(sorted(choices)) for choices in self.pattern)


class RulesError(Exception):
    """A rules file Codex would read and stockade cannot."""


def verdict(command: str, cwd: str, env: Mapping[str, str]) -> Verdict:
    """deny when a forbidden or prompt rule covers any simple command in `command`."""
    rules: list[PrefixRule] = []
    for path in rules_files(cwd, env):
        try:
            rules += read_rules(path)
        except (OSError, RulesError) as error:
            return Verdict("deny", f"stockade could not read the Codex rules in {path} ({error}); fix the file so stockade can apply it")
    if not rules:
        return Verdict("")
    worst: PrefixRule | None = None
    for part in command_parts(command):
        words = _words(part)
        for rule in rules:
            if rule.covers(words) and (worst is None or STRICTNESS.get(rule.decision, 2) > STRICTNESS.get(worst.decision, 2)):
                worst = rule
    if worst is None or worst.decision == "allow":
        return Verdict("")
    why = f" ({worst.justification})" if worst.justification else ""
    if worst.decision == "prompt":
        return Verdict(
            "deny",
            f"your Codex rule asks for approval before `{worst.text()}`{why} ({worst.path}); "
            "stockade cannot let Codex ask, so the command was blocked: run it yourself, or change the rule",
        )
    return Verdict("deny", f"your Codex rule forbids `{worst.text()}`{why} ({worst.path})")


def rules_files(cwd: str, env: Mapping[str, str]) -> list[str]:
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".codex")
    folders = [os.path.join(home, "rules")]
    folder = os.path.abspath(cwd) if cwd else ""
    while folder:
        folders.append(os.path.join(folder, ".codex", "rules"))
        parent = os.path.dirname(folder)
        folder = "" if parent == folder else parent
    found: list[str] = []
    for place in dict.fromkeys(folders):
        try:
            names = sorted(os.listdir(place))
        except OSError:
            continue
        found += [os.path.join(place, name) for name in names if name.endswith(".rules") and os.path.isfile(os.path.join(place, name))]
    return found


def read_rules(path: str) -> list[PrefixRule]:
    with open(path, "rb") as handle:
        data = handle.read(MAX_RULES_FILE + 1)
    if len(data) > MAX_RULES_FILE:
        raise RulesError("larger than 1 MiB")
    try:
        tree = ast.parse(data.decode("utf-8"), filename=path)
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as error:
        raise RulesError(f"not parseable: {error}") from None
    rules: list[PrefixRule] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "prefix_rule":
            rules.append(_rule(node, path))
    return rules


def _rule(node: ast.Call, path: str) -> PrefixRule:
    arguments = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
    if node.args and "pattern" not in arguments:
        arguments["pattern"] = node.args[0]
    try:
        pattern = ast.literal_eval(arguments["pattern"]) if "pattern" in arguments else None
        decision = ast.literal_eval(arguments["decision"]) if "decision" in arguments else "allow"
        justification = ast.literal_eval(arguments["justification"]) if "justification" in arguments else ""
    except (ValueError, TypeError, SyntaxError, RecursionError) as error:
        raise RulesError(f"line {node.lineno}: prefix_rule takes literal values ({error})") from None
    if not isinstance(pattern, (list, tuple)) or not pattern:
        raise RulesError(f"line {node.lineno}: prefix_rule needs a non-empty pattern list")
    words: list[frozenset[str]] = []
    for item in pattern:
        choices = [item] if isinstance(item, str) else list(item) if isinstance(item, (list, tuple)) else None
        if not choices or not all(isinstance(choice, str) for choice in choices):
            raise RulesError(f"line {node.lineno}: each pattern word is a string or a list of strings")
        words.append(frozenset(choices))
    if decision not in STRICTNESS:
        raise RulesError(f"line {node.lineno}: decision {decision!r} is not allow, prompt or forbidden")
    return PrefixRule(tuple(words), decision, justification if isinstance(justification, str) else "", path)


def _words(part: str) -> list[str]:
    try:
        return shlex.split(part)
    except ValueError:
        return part.split()
