"""`stockade install AGENT`: put `stockade hook AGENT` into the agent's settings, or take it out.

Idempotent: a second install changes nothing, `--remove` takes out every
stockade hook for that agent and nothing else, and every other key and hook
in the file is kept as it was. A file that is not valid JSON is never
overwritten. Writes go through a temporary file and a rename.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from stockade.cli.hook import DEFAULT_MAX_OUTPUT, quote, stockade_executable
from stockade.core.errors import UsageError

CODEX_MINIMUM = (0, 131, 0)  # first Codex that applies `updatedInput` (older ones run the original command)


@dataclass(frozen=True)
class AgentSettings:
    """Where and how one agent keeps its hooks."""

    name: str
    event: str
    matcher: str | None
    user_file: str  # relative to HOME
    project_file: str  # relative to the project
    local_file: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()  # keys a hook entry carries besides type and command

    def entry(self, command: str) -> dict[str, Any]:
        if self.name == "cursor":
            return {"command": command}
        return {"type": "command", "command": command, **dict(self.extra)}

    def group(self, command: str) -> dict[str, Any]:
        if self.matcher is None:
            return self.entry(command)
        return {"matcher": self.matcher, "hooks": [self.entry(command)]}


AGENT_SETTINGS: dict[str, AgentSettings] = {
    "claude": AgentSettings(
        "claude", "PreToolUse", "Bash", ".claude/settings.json", ".claude/settings.json", ".claude/settings.local.json", (("timeout", 30),)
    ),
    "codex": AgentSettings("codex", "PreToolUse", "Bash", ".codex/hooks.json", ".codex/hooks.json"),
    "gemini": AgentSettings(
        "gemini",
        "BeforeTool",
        "run_shell_command",
        ".gemini/settings.json",
        ".gemini/settings.json",
        extra=(("name", "stockade"), ("timeout", 30000), ("description", "Run every shell command inside stockade")),
    ),  # fmt: skip
    "cursor": AgentSettings("cursor", "beforeShellExecution", None, ".cursor/hooks.json", ".cursor/hooks.json"),
}


@dataclass
class Outcome:
    path: Path
    changed: bool
    action: str  # "added" | "updated" | "unchanged" | "removed" | "absent"
    notes: list[str]


# Agents that run a hook command through a shell (seen live: Claude Code with /bin/sh, Codex and
# Gemini CLI with bash) and block the tool call on exit 2 only. Any other status (127 when the
# stockade the hook names was moved or uninstalled, 1 on a crash) is a non-blocking error to
# them: the original command would run unwrapped. The guard turns every status but 0 and 2
# into 2, with one line saying why. Cursor is left without it: how it runs hooks is unverified.
GUARDED_AGENTS = frozenset({"claude", "codex", "gemini"})


def _fail_closed_guard(agent: str) -> str:
    return (
        '|| { s=$?; [ $s = 2 ] || echo "stockade: the stockade hook could not run (exit $s), so the command was blocked; '
        f'run: stockade doctor, then stockade install {agent}" >&2; exit 2; }}'
    )


def hook_command(agent: str, stockade: str, max_output: int | None) -> str:
    words = [stockade, "hook", agent]
    if max_output != DEFAULT_MAX_OUTPUT:
        words += ["--max-output", "none" if max_output is None else str(max_output)]
    command = " ".join(quote(word) for word in words)
    return f"{command} {_fail_closed_guard(agent)}" if agent in GUARDED_AGENTS else command


def is_ours(command: object, agent: str) -> bool:
    """A hook command that runs `stockade hook AGENT` (any install path, any options)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 3 and os.path.basename(words[0]).startswith("stockade") and words[1:3] == ["hook", agent]


def settings_path(agent: str, scope: str, home: Path, project: Path) -> Path:
    spec = AGENT_SETTINGS[agent]
    if scope == "user":
        return home / spec.user_file
    if scope == "local":
        if spec.local_file is None:
            raise UsageError(f"{agent} has no local (uncommitted) settings file; use --user or --project")
        return project / spec.local_file
    return project / spec.project_file


def apply(settings: dict[str, Any], agent: str, command: str | None) -> tuple[dict[str, Any], str]:
    """`settings` with our hook put in (command) or taken out (None), and what happened."""
    spec = AGENT_SETTINGS[agent]
    result = json.loads(json.dumps(settings))  # a deep copy; the caller compares before and after
    hooks = result.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError('"hooks" is not a JSON object; fix the file by hand first')
    groups = hooks.get(spec.event, [])
    if not isinstance(groups, list):
        raise UsageError(f'"hooks.{spec.event}" is not a JSON list; fix the file by hand first')
    placed = False
    kept_groups: list[Any] = []
    found = False
    for group in groups:
        if spec.matcher is None:  # cursor: a flat list of {"command": ...}
            if isinstance(group, dict) and is_ours(group.get("command"), agent):
                found = True
                if command is not None and not placed:
                    kept_groups.append(spec.entry(command))
                    placed = True
                continue
            kept_groups.append(group)
            continue
        entries = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(entries, list):
            kept_groups.append(group)
            continue
        kept: list[Any] = []
        for entry in entries:
            if isinstance(entry, dict) and is_ours(entry.get("command"), agent):
                found = True
                if command is not None and not placed and group.get("matcher") == spec.matcher:
                    kept.append(spec.entry(command))
                    placed = True
                continue
            kept.append(entry)
        if kept:
            kept_groups.append({**group, "hooks": kept})
    if command is not None and not placed:
        kept_groups.append(spec.group(command))
    if kept_groups:
        hooks[spec.event] = kept_groups
    else:
        hooks.pop(spec.event, None)
    if not hooks:
        result.pop("hooks")
    if agent == "cursor" and command is not None and "version" not in result:
        result = {"version": 1, **result}
    if agent == "gemini" and command is not None:
        config = result.setdefault("hooksConfig", {})
        if isinstance(config, dict):
            config.setdefault("enabled", True)
    if command is None:
        action = "removed" if found else "absent"
    else:
        action = "updated" if found else "added"
    return result, action


def other_shell_hooks(settings: dict[str, Any], agent: str) -> list[str]:
    """Commands of other hooks on the same event and tool: some agents drop a rewrite when several answer."""
    return [command for command in _shell_hook_commands(settings, agent) if not is_ours(command, agent)]


def our_hook_commands(settings: dict[str, Any], agent: str) -> list[str]:
    """stockade's own hook commands on the agent's shell tool."""
    return [command for command in _shell_hook_commands(settings, agent) if is_ours(command, agent)]


def _shell_hook_commands(settings: dict[str, Any], agent: str) -> list[str]:
    spec = AGENT_SETTINGS[agent]
    hooks = settings.get("hooks")
    groups = hooks.get(spec.event, []) if isinstance(hooks, dict) else []
    found: list[str] = []
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            continue
        if spec.matcher is None:
            entries = [group]
        else:
            matcher = group.get("matcher")
            if not _matches(matcher, spec.matcher):
                continue
            hooks = group.get("hooks")
            entries = hooks if isinstance(hooks, list) else []
        found += [str(e.get("command")) for e in entries if isinstance(e, dict) and isinstance(e.get("command"), str)]
    return found


def _matches(matcher: object, tool: str) -> bool:
    if matcher in (None, "", "*"):
        return True
    try:
        return re.fullmatch(str(matcher), tool) is not None
    except re.error:
        return str(matcher) == tool


def read_settings(path: Path, scope: str) -> dict[str, Any]:
    if path.is_symlink() and scope != "user":
        raise UsageError(f"{path} is a symlink; stockade edits a project's settings only in a real file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it by hand, stockade will not overwrite it") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; fix it by hand, stockade will not overwrite it")
    return data


def write_settings(path: Path, data: dict[str, Any]) -> None:
    target = Path(os.path.realpath(path))  # a user's dotfile symlink keeps pointing at the edited file
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def install_hook(agent: str, scope: str, *, home: Path, project: Path, remove: bool, max_output: int | None, stockade: str) -> Outcome:
    """Add (or remove) the hook in one settings file; writes only when something changes."""
    if agent not in AGENT_SETTINGS:
        raise UsageError(f"unknown agent {agent!r}; one of {', '.join(AGENT_SETTINGS)}")
    path = settings_path(agent, scope, home, project)
    before = read_settings(path, scope)
    command = None if remove else hook_command(agent, stockade, max_output)
    after, action = apply(before, agent, command)
    if action == "updated" and after == before:
        action = "unchanged"
    changed = after != before
    if changed and not (remove and not path.exists()):
        write_settings(path, after)
    notes: list[str] = []
    if not remove:
        others = other_shell_hooks(after, agent)
        if others:
            notes.append(
                f"other {AGENT_SETTINGS[agent].event} hooks also answer for this tool ({'; '.join(others)}): "
                "some agent versions drop a rewrite when several hooks answer, so keep stockade's the only one"
            )
        if scope == "project":
            notes.append(
                f"{path} names this machine's stockade ({stockade}); where teammates install it elsewhere, "
                "their agent cannot start the hook, so prefer --user (or --local for Claude Code)"
            )
        if agent == "claude" and after.get("disableAllHooks") is True:
            notes.append(f"{path} sets disableAllHooks: the hook will not run until that is removed")
    return Outcome(path, changed, action, notes)


def codex_version_note() -> str | None:
    """Refuse a Codex that would run the original command; None when fine or unknown."""
    try:
        out = subprocess.run(["codex", "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "codex was not found on PATH, so its version was not checked: Codex before 0.131 ignores hook rewrites"
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    if match and tuple(int(n) for n in match.groups()) < CODEX_MINIMUM:
        raise UsageError(
            f"this Codex ({match.group(0)}) does not apply hook rewrites and would run commands outside the sandbox; "
            f"upgrade to {'.'.join(map(str, CODEX_MINIMUM))} or later"
        )
    return None


def project_root(start: Path) -> Path:
    """The nearest folder up from `start` with .git or .stockade.toml, else `start`."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists() or (folder / ".stockade.toml").is_file():
            return folder
    return start


MCP_AGENTS = ("claude", "codex", "gemini")  # whose MCP servers `install` wraps (cli/agents/mcp_config.py)

AFTER_INSTALL = {
    "claude": "restart Claude Code (or run /hooks) so it loads the hook",
    "codex": "restart Codex; project hooks run only in projects Codex trusts",
    "gemini": "restart Gemini CLI; hooksConfig.enabled was set to true",
    "cursor": "restart Cursor; it runs the hook before every shell command and tells the agent the wrapped command to run",
}


def install(
    agent: Annotated[str, typer.Argument(help="claude, codex, gemini or cursor.", metavar="AGENT")],
    user: Annotated[bool, typer.Option("--user", help="Your own settings in your home folder (the default).")] = False,
    project: Annotated[bool, typer.Option("--project", help="The project's shared settings (committed).")] = False,
    local: Annotated[bool, typer.Option("--local", help="Claude Code only: .claude/settings.local.json (not committed).")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Take stockade's hook out instead.")] = False,
    max_output: Annotated[
        str | None,
        typer.Option("--max-output", help="Output a hooked command may print before it is cut (default 1M; 'none' for no limit).", metavar="BYTES"),
    ] = None,
) -> None:
    if sum((user, project, local)) > 1:
        raise UsageError("give at most one of --user, --project, --local")
    scope = "project" if project else "local" if local else "user"
    from stockade.cli.hook import HookError, _size

    try:
        limit = DEFAULT_MAX_OUTPUT if max_output is None else _size(max_output)
        stockade = "" if remove else stockade_executable()
    except HookError as error:
        raise UsageError(str(error)) from None
    notes: list[str] = []
    if agent == "codex" and not remove:
        note = codex_version_note()
        if note:
            notes.append(note)
    home = Path(os.environ.get("HOME") or Path.home())
    outcome = install_hook(agent, scope, home=home, project=project_root(Path(os.getcwd())), remove=remove, max_output=limit, stockade=stockade)
    said = {
        "added": f"added the {agent} hook to {outcome.path}",
        "updated": f"updated the {agent} hook in {outcome.path}",
        "unchanged": f"the {agent} hook is already in {outcome.path}",
        "removed": f"removed the {agent} hook from {outcome.path}",
        "absent": f"no stockade hook for {agent} in {outcome.path}",
    }[outcome.action]
    print(f"stockade: {said}")
    for note in [*notes, *outcome.notes]:
        print(f"stockade: note: {note}")
    if agent == "codex" and not remove:
        print(f"stockade: {_codex_trust(home, outcome, limit, stockade)}")
    if agent in MCP_AGENTS:  # the MCP servers the agent starts run sandboxed too (cli/mcp.py)
        from stockade.cli.agents import mcp_config

        done = mcp_config.rewrite(home, project_root(Path(os.getcwd())), (agent,), None if remove else stockade)
        for line in mcp_config.report_lines(done):
            print(line)
    if not remove and outcome.action in ("added", "updated"):
        print(f"stockade: {AFTER_INSTALL[agent]}")


def _codex_trust(home: Path, outcome: Outcome, max_output: int | None, stockade: str) -> str:
    """Have Codex trust the hook just written (it skips untrusted hooks silently); one line either way."""
    from stockade.cli.agents.codex_trust import MANUAL_STEP, CodexTalkError, trust_hooks

    codex = shutil.which("codex")
    if codex is None:
        return f"note: codex is not on PATH, so the hook is not yet trusted and Codex will skip it: {MANUAL_STEP}"
    ours = {hook_command("codex", stockade, max_output)}
    project = outcome.path.parent.parent
    try:
        hooks = trust_hooks(codex, home, project, ours, outcome.path)
    except CodexTalkError as error:
        return f"note: {error}; until the hook is trusted Codex skips it and runs commands unwrapped: {MANUAL_STEP}"
    if hooks and all(hook.trust == "trusted" for hook in hooks):
        return "Codex trusts the hook now (hooks.state in ~/.codex/config.toml; review it with /hooks in Codex)"
    states = ", ".join(sorted({hook.trust for hook in hooks})) or "not listed"
    return f"note: Codex reports the hook as {states}; until it is trusted Codex skips it: {MANUAL_STEP}"
