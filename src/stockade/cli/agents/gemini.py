"""Gemini CLI's own policy rules for `run_shell_command`, matched against the command the model wrote.

Gemini CLI applies a BeforeTool hook's rewritten arguments first and checks its
policy engine against them, so a user's `decision = "deny"` rule for
`commandPrefix = "git push"` stopped applying once stockade's hook rewrote the
command (seen live with Gemini CLI 0.61). The hook therefore reads the policy
files Gemini reads (`~/.gemini/policies/*.toml`, a project's
`.gemini/policies/*.toml` from the working directory up, and the system's
`/etc/gemini-cli/policies/*.toml`) and evaluates them on the original command
the way Gemini does: a rule's `commandPrefix`, `commandRegex` or `argsPattern`
becomes a pattern over the call's arguments as sorted JSON; the matching rule
with the highest priority (its tier plus priority/1000: system 5, user 4,
project 3) decides.

Where this could differ from Gemini, it errs strict: every simple command in a
compound one is checked (claude.py splits them), and `modes` are ignored
for deny and ask rules (the hook does not know the approval mode) while an
allow rule limited to some modes never outranks them. A policy file that
cannot be read blocks rather than guessing.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass
from typing import Any

from stockade.cli.agents.claude import Verdict, command_parts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SYSTEM_POLICIES = "/etc/gemini-cli/policies"
TIERS = {"system": 5, "user": 4, "project": 3}
MAX_POLICY_FILE = 1 << 20
STRICTNESS = {"deny": 2, "ask_user": 1, "allow": 0}
SHELL_TOOL = "run_shell_command"


@dataclass(frozen=True)
class PolicyRule:
    patterns: tuple[str, ...]  # regular expressions over the arguments' JSON; () matches any call
    decision: str
    priority: float
    limited_to_modes: bool
    path: str

    def covers(self, arguments_json: str) -> bool:
        if not self.patterns:
            return True
        for pattern in self.patterns:
            try:
                if re.search(pattern, arguments_json, re.DOTALL):
                    return True
            except re.error:
                return True  # a pattern Python cannot read: assume it matches (strict)
        return False


class PolicyError(Exception):
    """A policy file Gemini would read and stockade cannot."""


def verdict(command: str, tool_input: dict[str, Any], cwd: str, env: Mapping[str, str]) -> Verdict:
    """ "deny" or "ask" when the user's Gemini policy says so for any simple command in `command`."""
    rules: list[PolicyRule] = []
    for path, tier in policy_files(cwd, env):
        try:
            rules += read_policy(path, tier)
        except (OSError, PolicyError) as error:
            return Verdict("deny", f"stockade could not read the Gemini CLI policy {path} ({error}); fix the file so stockade can apply it")
    if not rules:
        return Verdict("")
    worst: PolicyRule | None = None
    for part in command_parts(command):
        arguments = json.dumps({**tool_input, "command": part}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        decided = _decide(rules, arguments)
        if decided and (worst is None or STRICTNESS[decided.decision] > STRICTNESS[worst.decision]):
            worst = decided
    if worst is None or worst.decision == "allow":
        return Verdict("")
    kind = "deny" if worst.decision == "deny" else "ask"
    return Verdict(kind, f"your Gemini CLI policy says {worst.decision} for this command ({worst.path})")


def _decide(rules: list[PolicyRule], arguments: str) -> PolicyRule | None:
    """The matching rule Gemini would apply: highest priority, the stricter on a tie."""
    best: PolicyRule | None = None
    for rule in rules:
        if rule.decision == "allow" and rule.limited_to_modes:
            continue
        if not rule.covers(arguments):
            continue
        if best is None or (rule.priority, STRICTNESS[rule.decision]) > (best.priority, STRICTNESS[best.decision]):
            best = rule
    return best


def policy_files(cwd: str, env: Mapping[str, str]) -> list[tuple[str, int]]:
    home = env.get("HOME") or os.path.expanduser("~")
    places = [(SYSTEM_POLICIES, TIERS["system"]), (os.path.join(home, ".gemini", "policies"), TIERS["user"])]
    folder = os.path.abspath(cwd) if cwd else ""
    while folder:
        places.append((os.path.join(folder, ".gemini", "policies"), TIERS["project"]))
        parent = os.path.dirname(folder)
        folder = "" if parent == folder else parent
    found: list[tuple[str, int]] = []
    seen: set[str] = set()
    for place, tier in places:
        if place in seen:
            continue
        seen.add(place)
        try:
            names = sorted(os.listdir(place))
        except OSError:
            continue
        found += [(os.path.join(place, n), tier) for n in names if n.endswith(".toml") and os.path.isfile(os.path.join(place, n))]
    return found


def read_policy(path: str, tier: int) -> list[PolicyRule]:
    with open(path, "rb") as handle:
        data = handle.read(MAX_POLICY_FILE + 1)
    if len(data) > MAX_POLICY_FILE:
        raise PolicyError("larger than 1 MiB")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise PolicyError(f"not valid TOML: {error}") from None
    entries = document.get("rule", [])
    if not isinstance(entries, list):
        raise PolicyError("`rule` is not an array of tables")
    rules: list[PolicyRule] = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise PolicyError(f"rule {number} is not a table")
        if not _names_the_shell(entry.get("toolName")):
            continue
        decision = entry.get("decision")
        if decision not in STRICTNESS:
            raise PolicyError(f"rule {number}: decision {decision!r} is not allow, deny or ask_user")
        priority = entry.get("priority", 0)
        if not isinstance(priority, (int, float)) or isinstance(priority, bool):
            raise PolicyError(f"rule {number}: priority is not a number")
        rules.append(PolicyRule(_patterns(entry, number), decision, tier + priority / 1000, bool(entry.get("modes")), path))
    return rules


def _names_the_shell(tool: Any) -> bool:
    names = tool if isinstance(tool, list) else [tool]
    for name in names:
        if name is None or name == "*" or name == SHELL_TOOL:
            return True
        if isinstance(name, str) and "*" in name and re.fullmatch(name.replace("*", ".*"), SHELL_TOOL):
            return True
    return False


def _patterns(entry: dict[str, Any], number: int) -> tuple[str, ...]:
    prefix, regex, args = entry.get("commandPrefix"), entry.get("commandRegex"), entry.get("argsPattern")
    if prefix is not None:
        prefixes = prefix if isinstance(prefix, list) else [prefix]
        if not all(isinstance(p, str) for p in prefixes):
            raise PolicyError(f"rule {number}: commandPrefix is not a string or a list of strings")
        return tuple(_prefix_pattern(p) for p in prefixes)
    if regex is not None:
        if not isinstance(regex, str):
            raise PolicyError(f"rule {number}: commandRegex is not a string")
        return ('"command":"' + regex,)
    if args is not None:
        if not isinstance(args, str):
            raise PolicyError(f"rule {number}: argsPattern is not a string")
        return (args,)
    return ()


def _prefix_pattern(prefix: str) -> str:
    """The prefix as its JSON string, open at the end, then a space, a quote or an escaped quote."""
    encoded = json.dumps(prefix, ensure_ascii=False)[:-1]
    return re.escape(f'"command":{encoded}') + r'(?:[\s"]|\\")'
