"""Whatever reaches `stockade hook`, it exits 0 or 2, and every exit-0 answer to a shell call is sandboxed.

Exit 1 (or a traceback) is a non-blocking error to the agents: they run the
original command on the host. The generators cover each agent's payload shape
with right and wrong types in every field, text with lone surrogates, NUL and
control characters, deep nesting, and raw bytes that are not JSON at all.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stockade.cli import hook

SHELL_TOOLS = {"claude": {"Bash"}, "codex": set(hook.CODEX_SHELL_TOOLS), "gemini": {"run_shell_command"}}
EVENTS = ["PreToolUse", "PostToolUse", "BeforeTool", "AfterTool", "beforeShellExecution", "UserPromptSubmit"]

texts = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60) | st.sampled_from(
    ["ls", "echo hi && rm -rf /", "\ud800", "a\x00b", "-- x", "'", "$(id)", "", "   ", "\n"]
)
anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def payloads(draw: st.DrawFn, agent: str) -> Any:
    tools = sorted(SHELL_TOOLS.get(agent, {"Bash"})) + ["Read", "write_file", "apply_patch"]
    command = draw(texts | anything)
    tool_input = draw(
        st.fixed_dictionaries(
            {"command": st.just(command)}, optional={"kind": st.sampled_from(["script", "argv", "powershell", 3]), "timeout": anything}
        )
        | anything
    )
    body: dict[str, Any] = {}
    if draw(st.booleans()):
        body["hook_event_name"] = draw(st.sampled_from(EVENTS) | anything)
    if draw(st.integers(0, 9)) > 0:
        body["tool_name"] = draw(st.sampled_from(tools) | anything)
    if draw(st.integers(0, 9)) > 0:
        body["tool_input"] = tool_input
    if agent == "cursor" or draw(st.booleans()):
        body["command"] = command
    if draw(st.booleans()):
        body["cwd"] = draw(texts | anything)
    body.update(draw(st.dictionaries(texts, anything, max_size=2)))
    return draw(st.just(body) | anything)


def _call(agent: str, data: bytes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code = hook.main([agent])
    return code, capsys.readouterr().out


def _encode(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _is_shell_call(agent: str, payload: Any) -> bool:
    if not isinstance(payload, dict):
        return False
    if agent == "cursor":
        return payload.get("hook_event_name", "beforeShellExecution") == "beforeShellExecution" and isinstance(payload.get("command"), str)
    tool, event = payload.get("tool_name"), payload.get("hook_event_name", hook.BEFORE_TOOL_EVENTS[agent])
    return isinstance(tool, str) and tool in SHELL_TOOLS[agent] and event == hook.BEFORE_TOOL_EVENTS[agent]


def _sandboxed(agent: str, answer: dict[str, Any], stockade: str) -> bool:
    if agent == "cursor":
        if answer.get("permission") == "deny":
            return True
        return answer.get("permission") == "allow"  # only an exact wrapper is allowed (checked by the caller)
    specific = answer.get("hookSpecificOutput", {})
    if specific.get("permissionDecision") == "deny":
        return True
    command = (specific.get("updatedInput") or specific.get("tool_input") or {}).get("command", "")
    return isinstance(command, str) and command.startswith(stockade + " run ")


FUZZ = settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("agent", hook.AGENTS)
def test_any_payload_exits_0_or_2_and_shell_calls_are_sandboxed(
    agent: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stockade = hook.stockade_executable()

    @FUZZ
    @given(payload=payloads(agent))
    def check(payload: Any) -> None:
        code, out = _call(agent, _encode(payload), monkeypatch, capsys)
        assert code in (0, 2), (code, payload)
        if code == 0 and out.strip() and _is_shell_call(agent, payload):
            answer = json.loads(out)
            assert _sandboxed(agent, answer, stockade), (payload, answer)
            if agent == "cursor" and answer.get("permission") == "allow":
                assert hook.Wrapper(stockade, hook.sandbox_shell()).unwrap(payload["command"]) is not None
        if code == 0 and not out.strip():
            assert not _is_shell_call(agent, payload) or agent == "gemini", payload  # silence is "no change"

    check()


@pytest.mark.parametrize("agent", hook.AGENTS)
def test_bytes_that_are_not_a_payload_block(agent: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    @FUZZ
    @given(data=st.binary(max_size=200) | st.sampled_from([b"[" * 100000, b'{"a":' * 50000, b"1e99999", b"\xff\xfe", b"{}" * 3]))
    def check(data: bytes) -> None:
        code, _out = _call(agent, data, monkeypatch, capsys)
        assert code in (0, 2), (code, data[:60])

    check()
