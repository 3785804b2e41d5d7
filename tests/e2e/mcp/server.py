"""A small stdio MCP server for the tests: JSON-RPC over stdin and stdout, tools that read, write and fetch.

Each tool reports what happened as text (the error's name when refused), so a
test reads from the tool result whether the sandbox let it through.
"""

import json
import sys
import urllib.request


def result(request_id, value):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value}) + "\n")
    sys.stdout.flush()


def text(value):
    return {"content": [{"type": "text", "text": value}]}


def call(name, arguments):
    try:
        if name == "read":
            with open(arguments["path"], encoding="utf-8") as handle:
                return "read: " + handle.read().strip()
        if name == "write":
            with open(arguments["path"], "w", encoding="utf-8") as handle:
                handle.write(arguments.get("text", "written"))
            return "wrote"
        if name == "fetch":
            with urllib.request.urlopen(arguments["url"], timeout=5) as response:
                return "fetched: " + response.read().decode()[:200]
    except Exception as error:  # noqa: BLE001 - the tool result names whatever stopped it
        return f"refused: {type(error).__name__}: {error}"
    return "unknown tool"


TOOLS = [{"name": name, "description": name, "inputSchema": {"type": "object"}} for name in ("read", "write", "fetch")]

for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        result(request_id, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "probe", "version": "1"}})
    elif method == "tools/list":
        result(request_id, {"tools": TOOLS})
    elif method == "tools/call":
        params = message.get("params") or {}
        result(request_id, text(call(params.get("name"), params.get("arguments") or {})))
    elif request_id is not None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}}) + "\n")
        sys.stdout.flush()
