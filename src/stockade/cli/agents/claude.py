"""Claude Code's own permission rules for Bash, matched against the command the model wrote.

The hook rewrites every command into `stockade run ... -c '<command>'`, and
Claude Code checks its `permissions.deny` and `ask` rules against what the
hook returns, which no user rule names: without this, a user's
`"deny": ["Bash(git push *)"]` stopped applying once stockade was installed.
So the hook reads the rule files Claude Code reads and matches the original
command the way Claude Code does: deny, then ask; a compound command matches
when any of its parts does; process wrappers (`timeout`, `nice`, `nohup`, ...)
and leading variable assignments are stripped first.

Where the two could differ, this errs towards the stricter answer: it splits
at every unquoted `;`, `&&`, `||`, `|`, `&` and newline, and also matches the
text of each `$(...)` and backquote. A rule file that cannot be read asks the
user rather than guessing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MANAGED = ("/etc/claude-code/managed-settings.json", "/Library/Application Support/ClaudeCode/managed-settings.json")
PROJECT_FILES = (".claude/settings.json", ".claude/settings.local.json")
WRAPPERS = frozenset({"timeout", "nice", "nohup", "time", "stdbuf", "ionice", "env", "command", "builtin", "exec"})
MAX_SETTINGS = 4 << 20  # bytes read of one settings file
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")
_RULE = re.compile(r"Bash(?:\((?P<spec>.*)\))?", re.DOTALL)


@dataclass(frozen=True)
class Verdict:
    """What the user's rules say of one command: "deny", "ask" or "" (no rule), and why."""

    decision: str
    reason: str = ""


def verdict(command: str, cwd: str, env: Mapping[str, str]) -> Verdict:
    """The first of deny, then ask, that a rule in any of Claude Code's settings files gives."""
    rules: dict[str, list[tuple[str, str]]] = {"deny": [], "ask": []}
    unreadable: list[str] = []
    for path in settings_files(cwd, env):
        try:
            permissions = _permissions(path)
        except (OSError, ValueError):
            unreadable.append(path)
            continue
        for kind in rules:
            rules[kind] += [(rule, path) for rule in permissions.get(kind, [])]
    parts = list(command_parts(command))
    for kind in ("deny", "ask"):
        for rule, path in rules[kind]:
            if any(matches(rule, part) for part in parts):
                return Verdict(kind, f"your Claude Code rule {kind}: {rule} ({path})")
    if unreadable:
        return Verdict("ask", f"stockade could not read the Claude Code permission rules in {unreadable[0]}")
    return Verdict("")


def settings_files(cwd: str, env: Mapping[str, str]) -> list[str]:
    """Every settings file that could hold rules for this call, existing ones only: managed
    (and its drop-in folder), the user's, and the project's in the working directory and each
    folder above it (Claude Code uses the folder it started in, which is one of those)."""
    found = [path for path in MANAGED if os.path.isfile(path)]
    for base in MANAGED:
        folder = base.removesuffix(".json") + ".d"
        if os.path.isdir(folder):
            found += sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".json"))
    config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")
    found.append(os.path.join(config, "settings.json"))
    folder = os.path.abspath(cwd) if cwd else ""
    while folder:
        found += [os.path.join(folder, name) for name in PROJECT_FILES]
        parent = os.path.dirname(folder)
        folder = "" if parent == folder else parent
    return [path for path in dict.fromkeys(found) if os.path.isfile(path)]


def _permissions(path: str) -> dict[str, list[str]]:
    with open(path, "rb") as handle:
        data: Any = json.loads(handle.read(MAX_SETTINGS + 1)[:MAX_SETTINGS] or b"{}")
    permissions = data.get("permissions") if isinstance(data, dict) else None
    if not isinstance(permissions, dict):
        return {}
    return {kind: [rule for rule in permissions.get(kind) or [] if isinstance(rule, str)] for kind in ("deny", "ask")}


def matches(rule: str, command: str) -> bool:
    """Whether one rule (`Bash`, `Bash(*)`, `Bash(npm test)`, `Bash(git push:*)`, `Bash(git * main)`)
    covers one simple command."""
    found = _RULE.fullmatch(rule.strip())
    if found is None:
        return False  # another tool's rule
    spec = (found.group("spec") or "").strip()
    if spec in ("", "*"):
        return True
    if spec.endswith(":*"):
        prefix = spec[:-2]
        return command == prefix or command.startswith(prefix + " ")
    if "*" not in spec:
        return command == spec
    if spec.endswith(" *") and spec.count("*") == 1:  # `ls *` covers `ls` too
        prefix = spec[:-2]
        return command == prefix or command.startswith(prefix + " ")
    pattern = ".*".join(re.escape(piece) for piece in spec.split("*"))
    return re.fullmatch(pattern, command, re.DOTALL) is not None


def command_parts(command: str) -> Iterator[str]:
    """The whole command, each simple command in it, and each with its wrappers stripped."""
    seen: set[str] = set()
    for part in [command.strip(), *_split(command), *_substitutions(command)]:
        for form in (part, _unwrapped(part)):
            if form and form not in seen:
                seen.add(form)
                yield form


def _split(command: str) -> list[str]:
    """The command cut at every unquoted control operator and newline."""
    parts, current, quote, index = [], [], "", 0
    while index < len(command):
        char = command[index]
        if quote:
            current.append(char)
            if char == "\\" and quote == '"' and index + 1 < len(command):
                current.append(command[index + 1])
                index += 1
            elif char == quote:
                quote = ""
        elif char == "\\" and index + 1 < len(command):
            current += [char, command[index + 1]]
            index += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char in ";|&\n":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _substitutions(command: str) -> list[str]:
    """The text of each `$(...)` and backquoted command, split like the whole."""
    inner = re.findall(r"\$\(([^()]*)\)", command) + re.findall(r"`([^`]*)`", command)
    return [part for text in inner for part in _split(text)]


def _unwrapped(part: str) -> str:
    """`timeout 5 FOO=1 nice -n 2 git push` -> `git push`: what Claude Code matches rules against."""
    words = part.split()
    while words:
        head = words[0]
        if _ASSIGNMENT.fullmatch(head):
            words = words[1:]
        elif head in WRAPPERS:
            words = _drop_wrapper_options(words[1:], head)
        else:
            break
    return " ".join(words)


def _drop_wrapper_options(words: list[str], wrapper: str) -> list[str]:
    """A wrapper's own options and, for timeout, its duration."""
    rest = list(words)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in ("-n", "-s", "-k", "-c", "-i", "-o", "-e", "-u") and rest:
            rest.pop(0)
    if wrapper == "timeout" and rest:
        rest.pop(0)
    return rest
