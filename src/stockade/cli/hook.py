"""`stockade hook AGENT`: a coding agent's shell-tool hook that runs every command inside `stockade run`.

The agent hands the hook the command its shell tool is about to run (JSON on
stdin); the hook answers with that command rewritten so the whole string,
whatever it holds (pipes, `;`, `&&`, newlines, `$(...)`, heredocs, `&`), is
the single argument of one sandboxed shell:

    /abs/stockade run --no-approve --agent-session ID --max-output 1048576 -- /usr/bin/bash -c -- '<the original, quoted>'

Nothing in the hook input chooses the policy, the sandbox or the wrapper (the
agent's session id, made a safe file name, decides only which notices are not
said again: core/notices.py):
`stockade run` resolves the policy as it always does (the project's
`.stockade.toml` if trusted, else the user's default), and stockade and bash
are named by absolute path, so neither a PATH entry nor an alias can stand in.
A command that is already exactly such a wrapper passes unchanged (no nested
sandbox); anything else, including `stockade run --policy mine.toml ...`
written by the agent, is wrapped like any command. Whatever cannot be wrapped
is blocked, never let through.

Per agent (see README "A coding agent"):
- claude: PreToolUse for Bash; `updatedInput` with `permissionDecision: allow`.
- codex:  PreToolUse for Bash; the same answer (Codex requires the allow beside `updatedInput`).
- gemini: BeforeTool for run_shell_command; `hookSpecificOutput.tool_input` (merged by Gemini CLI).
- cursor: beforeShellExecution cannot rewrite, so a command that is not yet wrapped is denied
  with the wrapped command for the agent to run instead; the wrapped one is allowed.

This module is on the path of every agent command: it imports no Typer or Rich.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from stockade.core.notices import session_name
from stockade.profiles.text import say

AGENTS = ("claude", "codex", "gemini", "cursor")
DEFAULT_MAX_OUTPUT = 1 << 20
MAX_INPUT = 16 << 20  # bytes of hook JSON read from the agent
BLOCK = 2  # the exit status every supported agent reads as "do not run this tool call"
SHELLS = ("/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash", "/opt/homebrew/bin/bash")
BEFORE_TOOL_EVENTS = {"claude": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}
CODEX_SHELL_TOOLS = frozenset({"Bash", "shell", "shell_command", "exec_command", "local_shell", "container.exec"})
_BARE = re.compile(r"[A-Za-z0-9_./-]+")


class HookError(Exception):
    """Why a tool call was blocked rather than wrapped."""


def quote(word: str) -> str:
    """One shell word, the same in sh, dash, bash and zsh: bare only for [A-Za-z0-9_./-],
    else single quotes (shlex.quote leaves `=` and `%` bare, which zsh expands)."""
    if _BARE.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


@dataclass(frozen=True)
class Wrapper:
    """How a command string becomes one `stockade run`."""

    stockade: str  # absolute path of the stockade executable
    shell: str  # absolute path of the shell that runs the string inside the sandbox
    max_output: int | None = DEFAULT_MAX_OUTPUT
    agent_session: str | None = None  # the agent's session id (core/notices.py): its notices are said once
    tool_call: str | None = None  # the agent's id of this tool call: every audit record of the run names it

    def _lead(self) -> list[str]:
        words = [self.stockade, "run", "--no-approve"]  # an agent cannot answer a held request: it gets the 403 at once
        if self.agent_session is not None:
            words += ["--agent-session", self.agent_session]
        return words

    def prefix(self) -> list[str]:
        words = self._lead()
        if self.tool_call is not None:
            words += ["--tool-call", self.tool_call]
        if self.max_output is not None:
            words += ["--max-output", str(self.max_output)]
        return [*words, "--", self.shell, "-c", "--"]  # `--`: a string that starts with "-" is still the command

    def wrap(self, command: str) -> str:
        if "\x00" in command:
            raise HookError("the command contains a NUL byte, which no shell argument can carry")
        return " ".join(quote(word) for word in [*self.prefix(), command])

    def unwrap(self, command: str) -> str | None:
        """The inner string when `command` is byte for byte what `wrap` makes, for this tool call or any
        other (an agent that runs a wrapped command it was given makes a new call), else None."""
        from dataclasses import replace

        lead = " ".join(quote(word) for word in self._lead()) + " --tool-call "
        call = command[len(lead) :].partition(" ")[0] if command.startswith(lead) else None
        if call is not None and session_name(call) != call:
            return None
        return replace(self, tool_call=call)._unwrap_exactly(command)

    def _unwrap_exactly(self, command: str) -> str | None:
        head = " ".join(quote(word) for word in self.prefix()) + " "
        if not command.startswith(head):
            return None
        try:
            words = shlex.split(command[len(head) :], posix=True)
        except ValueError:
            return None
        if len(words) != 1 or "\x00" in words[0] or self.wrap(words[0]) != command:
            return None
        return words[0]

    def sandboxed(self, command: str) -> str:
        """The wrapped command; an exact wrapper is kept as it is (no sandbox inside a sandbox)."""
        return command if self.unwrap(command) is not None else self.wrap(command)


def stockade_executable() -> str:
    """This stockade, by absolute path: the script that started us, else the one beside our Python."""
    started = sys.argv[0] if sys.argv else ""
    candidates = []
    if os.path.basename(started).startswith("stockade"):
        candidates.append(os.path.abspath(started))
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "stockade"))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise HookError(f"cannot find the stockade executable (looked at {', '.join(candidates)})")


def sandbox_shell() -> str:
    """bash by absolute path (agents write bash), else /bin/sh."""
    for path in SHELLS:
        if os.access(path, os.X_OK):
            return path
    return "/bin/sh"


# -- agents ----------------------------------------------------------------------------------------


def answer(agent: str, payload: Any, wrapper: Wrapper) -> dict[str, Any] | None:
    """The JSON to print for one hook call; None means "no opinion" (not a shell tool)."""
    if not isinstance(payload, dict):
        raise HookError("the hook input is not a JSON object")
    if agent == "cursor":
        return _cursor(payload, wrapper)
    if agent not in BEFORE_TOOL_EVENTS:
        raise HookError(f"unknown agent {agent!r}; one of {', '.join(AGENTS)}")
    event = payload.get("hook_event_name", BEFORE_TOOL_EVENTS[agent])
    if not isinstance(event, str):
        raise HookError("the hook input's hook_event_name is not a string")
    if event != BEFORE_TOOL_EVENTS[agent]:
        return {} if agent == "gemini" else None  # after the tool ran, or another event: nothing to rewrite
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool, str):
        raise HookError("the hook input has no tool_name string")
    if agent == "claude":
        if tool != "Bash":
            return None
        tool_input, command = _shell_input(tool_input)
        rules = _agent_rules(agent, wrapper.unwrap(command) or command, tool_input, payload.get("cwd"))
        if rules.decision == "deny":
            return _pre_tool_use(None, wrapper, "deny", rules.reason)
        updated = {**tool_input, "command": wrapper.sandboxed(command)}  # run_in_background, timeout... kept
        return _pre_tool_use(updated, wrapper, rules.decision or "allow", rules.reason)
    if agent == "codex":
        if tool not in CODEX_SHELL_TOOLS:
            return None
        tool_input, command = _shell_input(tool_input)
        kind = tool_input.get("kind")
        if kind not in (None, "script", "argv"):
            raise HookError(f"stockade sandboxes POSIX shell commands; this one is {kind!r}")
        rules = _agent_rules(agent, wrapper.unwrap(command) or command, tool_input, payload.get("cwd"))
        if rules.decision == "deny":  # Codex has no "ask" for hooks: it reads one as a failed hook
            return _pre_tool_use(None, wrapper, "deny", rules.reason)
        return _pre_tool_use({"command": wrapper.sandboxed(command)}, wrapper)
    if agent == "gemini":
        if tool != "run_shell_command":
            return {}
        tool_input, command = _shell_input(tool_input)
        rules = _agent_rules(agent, wrapper.unwrap(command) or command, tool_input, payload.get("cwd"))
        if rules.decision == "deny":
            return {"decision": "deny", "reason": f"stockade: {rules.reason}"}
        # Gemini CLI merges this into the model's arguments: dir_path, is_background... stay.
        answer: dict[str, Any] = {"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"command": wrapper.sandboxed(command)}}}
        if rules.decision == "ask":  # Gemini then asks the user, showing the sandboxed command
            answer.update({"decision": "ask", "systemMessage": f"stockade: {rules.reason}"})
        return answer
    raise AssertionError(f"unhandled agent {agent!r}")


def _pre_tool_use(updated: dict[str, Any] | None, wrapper: Wrapper, decision: str = "allow", why: str = "") -> dict[str, Any]:
    """The answer: `decision` is allow (sandboxed), ask (the user sees the sandboxed command) or deny."""
    reason = f"stockade: runs inside the sandbox ({wrapper.stockade} run)"
    if why:
        reason = f"stockade: {why}" if decision == "deny" else f"{reason}; {why}"
    specific: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": decision, "permissionDecisionReason": reason}
    if updated is not None:
        specific["updatedInput"] = updated
    return {"hookSpecificOutput": specific}


def _agent_rules(agent: str, command: str, tool_input: dict[str, Any], cwd: Any) -> Any:
    """The agent's own deny and ask rules for the command as the model wrote it: the agents check
    their rules against the rewritten command, which no rule names (cli/agents/)."""
    where = cwd if isinstance(cwd, str) else os.getcwd()
    if agent == "codex":
        from stockade.cli.agents import codex

        return codex.verdict(command, where, os.environ)
    if agent == "gemini":
        from stockade.cli.agents import gemini

        return gemini.verdict(command, tool_input, where, os.environ)
    from stockade.cli.agents import claude

    return claude.verdict(command, where, os.environ)


def _cursor(payload: dict[str, Any], wrapper: Wrapper) -> dict[str, Any]:
    event = payload.get("hook_event_name", "beforeShellExecution")
    if not isinstance(event, str):
        raise HookError("the hook input's hook_event_name is not a string")
    if event != "beforeShellExecution":
        return {}
    _payload, command = _shell_input(payload)
    if wrapper.unwrap(command) is not None:
        return {"permission": "allow"}
    wrapped = wrapper.wrap(command)
    return {
        "permission": "deny",
        "user_message": "stockade: shell commands run only inside the sandbox; the agent was given the wrapped command",
        "agent_message": (
            "This workspace runs every shell command inside the stockade sandbox. Run exactly this command "
            f"instead, unchanged (it runs your command inside the sandbox with the same output):\n{wrapped}"
        ),
    }


def _shell_input(tool_input: Any) -> tuple[dict[str, Any], str]:
    """The tool's input object and its command string, or HookError saying which is missing."""
    if not isinstance(tool_input, dict):
        raise HookError("the hook input has no tool_input object")
    command = tool_input.get("command")
    if not isinstance(command, str) or not command.strip():
        raise HookError("the hook input has no command string")
    return tool_input, command


# -- entry point -----------------------------------------------------------------------------------

USAGE = f"usage: stockade hook {{{','.join(AGENTS)}}} [--max-output BYTES|none]"


def parse(argv: list[str]) -> tuple[str, int | None]:
    if not argv or argv[0] not in AGENTS:
        raise HookError(USAGE)
    agent, rest = argv[0], argv[1:]
    max_output: int | None = DEFAULT_MAX_OUTPUT
    while rest:
        word = rest.pop(0)
        flag, eq, value = word.partition("=")
        if flag != "--max-output":
            raise HookError(f"unknown option {word!r}; {USAGE}")
        if not eq:
            if not rest:
                raise HookError(f"--max-output needs a value; {USAGE}")
            value = rest.pop(0)
        max_output = _size(value)
    return agent, max_output


def _size(value: str) -> int | None:
    if value.lower() == "none":
        return None
    from stockade.profiles.units import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:  # the hook's own error: it must answer the agent, not exit 2 itself
        raise HookError(f"--max-output {value!r}: {exc}") from None


def main(argv: list[str]) -> int:
    """Read the agent's JSON, print the answer; block (never allow) whatever goes wrong."""
    agent = argv[0] if argv else ""
    try:
        agent, max_output = parse(argv)
        data = sys.stdin.buffer.read(MAX_INPUT + 1)
        if len(data) > MAX_INPUT:
            raise HookError(f"the hook input is larger than {MAX_INPUT} bytes")
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise HookError(f"the hook input is not JSON: {exc}") from None
        wrapper = Wrapper(stockade_executable(), sandbox_shell(), max_output, agent_session(payload), tool_call(payload))
        result = answer(agent, payload, wrapper)
        if result and _wraps(result):
            from stockade.profiles.baseline import problem

            why = problem(os.environ, payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd())
            if why:  # the administrator's baseline cannot be read: nothing runs, sandboxed or not
                raise HookError(why)
        text = "" if result is None else _encoded(result)
    except HookError as error:
        return _blocked(agent, str(error))
    except Exception as error:  # whatever arrives, the answer is a block, never a crash (exit 1 lets it run)
        return _blocked(agent, f"the hook could not read this call ({type(error).__name__})")
    sys.stdout.write(text)
    return 0


def tool_call(payload: Any) -> str | None:
    """The agent's id of this tool call, as a safe name: Claude Code and Codex send `tool_use_id`,
    Cursor a `generation_id`; Gemini CLI sends none, and its call's `timestamp` stands in."""
    if not isinstance(payload, dict):
        return None
    for key in ("tool_use_id", "tool_call_id", "generation_id", "timestamp"):
        name = session_name(payload.get(key))
        if name:
            return name
    return None


def _wraps(result: dict[str, Any]) -> bool:
    """Whether the answer lets a sandboxed command run (rather than deny it, or leave the call alone)."""
    specific = result.get("hookSpecificOutput")
    if isinstance(specific, dict):
        return "updatedInput" in specific or "tool_input" in specific  # claude and codex; gemini
    return result.get("permission") == "allow"  # cursor


def agent_session(payload: Any) -> str | None:
    """The agent's session id: Claude Code, Codex and Gemini CLI send `session_id`, Cursor
    `conversation_id`; as a safe file name (core/notices.py), or None."""
    if not isinstance(payload, dict):
        return None
    return session_name(payload.get("session_id")) or session_name(payload.get("conversation_id"))


def _encoded(result: dict[str, Any]) -> str:
    """The answer as one JSON line; a lone surrogate (models emit them) is written escaped."""
    try:
        text = json.dumps(result, ensure_ascii=False) + "\n"
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(result, ensure_ascii=True) + "\n"


def _blocked(agent: str, reason: str) -> int:
    message = f"stockade hook: blocked: {reason}"
    if agent == "cursor":  # Cursor reads its answer from stdout
        sys.stdout.write(json.dumps({"permission": "deny", "user_message": message, "agent_message": message}) + "\n")
        return 0
    say(message)
    return BLOCK
