"""Small fake model servers on 127.0.0.1 that drive a real agent CLI through one shell tool call.

Each speaks just enough of one vendor's API for its CLI: Anthropic Messages
(Claude Code), OpenAI Responses (Codex) and Gemini generateContent (Gemini
CLI), streaming with server-sent events where the CLI asks for it. The first
request that offers the agent's shell tool is answered with a call to it
running `command`; a request that carries that call's result is recorded and
answered with plain text, which ends the agent's turn. Any other request (a
title, a token count, a classifier) gets a short harmless answer.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINAL_TEXT = "stockade-live-test: done"


@dataclass
class Script:
    """What the model asks the agent to run, and what came back."""

    command: str
    # an MCP tool to call instead of the shell: the tool's name as its server declares it, and its arguments;
    # each agent names it its own way (mcp__probe__read, probe__read, read), found by that suffix
    mcp_tool: str | None = None
    mcp_arguments: dict[str, Any] = field(default_factory=dict)
    tool_results: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # method and path of every request, in order
    asked: int = 0  # how many times the tool call was handed out

    def record(self, text: str) -> None:
        self.tool_results.append(text)


def _mcp_name(script: Script, offered: list[Any]) -> str | None:
    """The name the agent gave the MCP tool the script calls, among the tools it offers."""
    if script.mcp_tool is None:
        return None
    names = [str(name) for name in offered if isinstance(name, str)]
    return next((name for name in names if name == script.mcp_tool or (name.endswith(script.mcp_tool) and "probe" in name)), None)


def _codex_mcp(script: Script, tools: list[Any]) -> tuple[str | None, str] | None:
    """(namespace, name) of the MCP tool Codex offers: in a namespace of the server's (mcp__probe), or flat."""
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "namespace" and "probe" in str(tool.get("name")):
            names = [t.get("name") for t in tool.get("tools") or [] if isinstance(t, dict)]
            if script.mcp_tool in names:
                return str(tool["name"]), str(script.mcp_tool)
    flat = _mcp_name(script, [t.get("name") for t in tools if isinstance(t, dict)])
    return (None, flat) if flat is not None else None


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    lines = []
    for name, data in events:
        if name:
            lines.append(f"event: {name}")
        lines.append("data: " + json.dumps(data))
        lines.append("")
    return ("\n".join(lines) + "\n").encode()


def _text_of(content: Any) -> str:
    """The text inside a tool result, however the vendor nests it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content", "response", "llmContent"):
            if key in content:
                return _text_of(content[key])
        return json.dumps(content)
    return "" if content is None else str(content)


class _Handler(BaseHTTPRequestHandler):
    server: ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data: Any, status: int = 200) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def do_GET(self) -> None:
        self.server.script.requests.append(f"GET {self.path}")
        if self.path.rstrip("/").endswith("/models"):
            self._json({"data": [], "models": [], "object": "list"})
            return
        self._json({"error": {"message": "not here"}}, 404)

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        script = self.server.script
        script.requests.append(f"POST {self.path}")
        body = self._body()
        path = self.path.split("?")[0]
        with self.server.lock:
            if path.endswith("/v1/messages"):
                self._anthropic(body)
            elif path.endswith("/count_tokens"):
                self._json({"input_tokens": 10})
            elif path.endswith("/responses"):
                self._openai(body)
            elif ":countTokens" in path:
                self._json({"totalTokens": 10})
            elif ":streamGenerateContent" in path or ":generateContent" in path:
                self._gemini(body, stream=":streamGenerateContent" in path)
            else:
                self._json({"error": {"message": "not here"}}, 404)

    # Anthropic Messages (Claude Code)
    def _anthropic(self, body: dict[str, Any]) -> None:
        script = self.server.script
        tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        results = [part for part in last.get("content") or [] if isinstance(part, dict) and part.get("type") == "tool_result"]
        if results:
            for part in results:
                script.record(_text_of(part.get("content")))
            block: dict[str, Any] = {"type": "text", "text": FINAL_TEXT}
            stop = "end_turn"
        elif script.mcp_tool is not None and script.asked == 0 and (mcp := _mcp_name(script, tools)):
            script.asked += 1
            block = {"type": "tool_use", "id": "toolu_stockade_1", "name": mcp, "input": dict(script.mcp_arguments)}
            stop = "tool_use"
        elif script.mcp_tool is None and "Bash" in tools and script.asked == 0:
            script.asked += 1
            block = {"type": "tool_use", "id": "toolu_stockade_1", "name": "Bash", "input": {"command": script.command, "description": "run it"}}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": "ok"}
            stop = "end_turn"
        message = {
            "id": "msg_stockade",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-test"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        if not body.get("stream"):
            self._json({**message, "content": [block], "stop_reason": stop})
            return
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        self._send(
            200,
            _sse(
                [
                    ("message_start", {"type": "message_start", "message": message}),
                    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}},
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
            ),
            "text/event-stream",
        )

    # OpenAI Responses (Codex)
    def _openai(self, body: dict[str, Any]) -> None:
        script = self.server.script
        items = body.get("input") or []
        outputs = [item for item in items if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output")]
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        shell = next((name for name in ("shell", "exec_command", "shell_command", "local_shell") if name in tools), None)
        if outputs and script.asked:
            for item in outputs:
                script.record(_text_of(item.get("output")))
            item_out: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}],
            }
        elif script.mcp_tool is not None and script.asked == 0 and (found := _codex_mcp(script, body.get("tools") or [])):
            script.asked += 1
            namespace, mcp = found
            item_out = {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_stockade_1",
                "name": mcp,
                "arguments": json.dumps(script.mcp_arguments),
            }
            if namespace:
                item_out["namespace"] = namespace
        elif script.mcp_tool is None and shell and script.asked == 0:
            script.asked += 1
            arguments = (
                {"command": ["bash", "-lc", script.command]}
                if shell in ("shell", "local_shell")
                else {"cmd": script.command}
                if shell == "exec_command"
                else {"command": script.command}
            )
            item_out = {"type": "function_call", "id": "fc_1", "call_id": "call_stockade_1", "name": shell, "arguments": json.dumps(arguments)}
        else:
            item_out = {"type": "message", "role": "assistant", "id": "msg_0", "content": [{"type": "output_text", "text": "ok", "annotations": []}]}
        response = {
            "id": "resp_stockade",
            "object": "response",
            "status": "completed",
            "model": body.get("model", "test"),
            "output": [item_out],
            "usage": {
                "input_tokens": 10,
                "output_tokens": 1,
                "total_tokens": 11,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        self._send(
            200,
            _sse(
                [
                    ("response.created", {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}}),
                    ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item_out}),
                    ("response.completed", {"type": "response.completed", "response": response}),
                ]
            ),
            "text/event-stream",
        )

    # Gemini generateContent (Gemini CLI)
    def _gemini(self, body: dict[str, Any], *, stream: bool) -> None:
        script = self.server.script
        contents = body.get("contents") or []
        last = contents[-1] if contents else {}
        responses = [part["functionResponse"] for part in last.get("parts") or [] if isinstance(part, dict) and "functionResponse" in part]
        declared = {
            d.get("name")
            for tool in body.get("tools") or []
            if isinstance(tool, dict)
            for d in tool.get("functionDeclarations") or []
            if isinstance(d, dict)
        }
        if responses and script.asked:
            for response in responses:
                script.record(_text_of(response.get("response")))
            parts: list[dict[str, Any]] = [{"text": FINAL_TEXT}]
        elif script.mcp_tool is not None and script.asked == 0 and (mcp := _mcp_name(script, list(declared))):
            script.asked += 1
            parts = [{"functionCall": {"name": mcp, "args": dict(script.mcp_arguments)}}]
        elif script.mcp_tool is None and "run_shell_command" in declared and script.asked == 0:
            script.asked += 1
            parts = [{"functionCall": {"name": "run_shell_command", "args": {"command": script.command, "description": "run it"}}}]
        else:
            wants_json = (body.get("generationConfig") or {}).get("responseMimeType") == "application/json"
            parts = [{"text": json.dumps({"reasoning": "done", "next_speaker": "user", "model_choice": "flash"}) if wants_json else "ok"}]
        chunk = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
            "modelVersion": "gemini-test",
        }
        if stream:
            self._send(200, _sse([(None, chunk)]), "text/event-stream")
        else:
            self._json(chunk)


class ModelServer(ThreadingHTTPServer):
    """A fake model API on 127.0.0.1 (an ephemeral port) for one scripted tool call."""

    daemon_threads = True

    def __init__(self, script: Script) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
