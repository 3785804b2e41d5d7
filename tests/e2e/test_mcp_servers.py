"""An agent's MCP server, wrapped: the same JSON-RPC stream, inside a sandbox of its own.

A small stdio server (tests/e2e/mcp/server.py) is started the way an agent
starts it, once as it is and once wrapped (`stockade run --mcp NAME -- ...`, the
command `stockade mcp wrap` writes). The stream must be byte-identical where
the tools do what the sandbox allows, and the tools that read ~/.ssh, write
outside the project or the project itself, or reach a host must be refused
wrapped while the unwrapped control succeeds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.e2e.boxes import Box

SERVER = Path(__file__).parent / "mcp" / "server.py"


def _messages(*calls: tuple[str, dict[str, str]]) -> bytes:
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    for number, (name, arguments) in enumerate(calls, start=3):
        lines.append({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _server(box: Box) -> Path:
    """The server where a sandbox can see it (not under /var/tmp or /tmp, each a sandbox's own)."""
    copy = box.root / "mcp-server.py"
    if not copy.exists():
        shutil.copyfile(SERVER, copy)
    return copy


def _serve(box: Box, wrapped: bool, stdin: bytes, name: str = "probe") -> subprocess.CompletedProcess[bytes]:
    command = ["/usr/bin/python3", str(_server(box))]  # stdlib only: the system's python, seen in every sandbox
    if wrapped:
        command = [sys.executable, "-m", "stockade.cli.main", "run", "--mcp", name, "--", *command]
    return subprocess.run(command, input=stdin, cwd=box.project, env=box.env, capture_output=True, timeout=120)


def _texts(stdout: bytes) -> dict[int, str]:
    out = {}
    for line in stdout.decode().splitlines():
        message = json.loads(line)  # every line of stdout is JSON-RPC: nothing of stockade's
        if "result" in message and "content" in message["result"]:
            out[message["id"]] = message["result"]["content"][0]["text"]
    return out


def test_the_stream_is_byte_identical_where_the_sandbox_allows(vbox: Box) -> None:
    (vbox.project / "notes.txt").write_text("project notes\n")
    stdin = _messages(("read", {"path": str(vbox.project / "notes.txt")}))
    plain = _serve(vbox, False, stdin)
    wrapped = _serve(vbox, True, stdin)
    assert plain.returncode == 0 and wrapped.returncode == 0, wrapped
    assert wrapped.stdout == plain.stdout, (wrapped.stdout, plain.stdout)
    assert _texts(wrapped.stdout)[3] == "read: project notes"


def test_a_wrapped_server_cannot_read_secrets_write_or_reach_the_network(vbox: Box) -> None:
    stdin = _messages(
        ("read", {"path": str(vbox.home / ".ssh" / "id_test")}),
        ("write", {"path": str(vbox.outside / "planted.txt")}),
        ("write", {"path": str(vbox.project / "planted.txt")}),
        ("fetch", {"url": "http://127.0.0.1:9/"}),
    )
    plain = _texts(_serve(vbox, False, stdin).stdout)
    assert plain[3] == "read: CANARY-SSH" and plain[4] == plain[5] == "wrote", plain  # the control: unwrapped, all of it works
    (vbox.outside / "planted.txt").unlink()
    (vbox.project / "planted.txt").unlink()
    wrapped = _serve(vbox, True, stdin)
    texts = _texts(wrapped.stdout)
    assert texts[3].startswith("refused:") and "CANARY" not in texts[3], texts
    assert texts[4].startswith("refused:") and texts[5].startswith("refused:"), texts
    assert texts[6].startswith("refused:"), texts
    assert not (vbox.outside / "planted.txt").exists() and not (vbox.project / "planted.txt").exists()


def test_a_server_s_own_policy_is_the_user_s_file(vbox: Box) -> None:
    config = vbox.home / ".config" / "stockade" / "mcp"
    config.mkdir(parents=True)
    (config / "writer.toml").write_text('extends = ["mcp"]\n[filesystem]\nallow_write = ["."]\n')
    stdin = _messages(("write", {"path": str(vbox.project / "out.txt")}))
    assert _texts(_serve(vbox, True, stdin, "writer").stdout)[3] == "wrote"
    assert _texts(_serve(vbox, True, stdin, "other").stdout)[3].startswith("refused:"), "another server keeps the default"
    (vbox.project / ".stockade.toml").write_text('[filesystem]\nallow_write = ["."]\n')
    assert _texts(_serve(vbox, True, _messages(("write", {"path": str(vbox.project / "o2.txt")})), "other").stdout)[3].startswith("refused:"), (
        "a project's own policy never loosens its servers"
    )


def test_a_bad_server_name_is_one_line_and_exit_2(vbox: Box) -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "run", "--mcp", "../x", "--", "true"],
        cwd=vbox.project,
        env=vbox.env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "an MCP server's name is" in bad.stderr and "Traceback" not in bad.stderr, bad


def test_a_server_s_refused_requests_are_audited_with_its_name(vbox: Box) -> None:
    config = vbox.home / ".config" / "stockade" / "mcp"
    config.mkdir(parents=True, exist_ok=True)
    (config / "probe.toml").write_text('extends = ["mcp"]\n[network]\nallow = ["allowed.test"]\n')
    done = _serve(vbox, True, _messages(("fetch", {"url": "http://blocked.test/"})))
    assert _texts(done.stdout)[3].startswith("refused:"), done
    assert b"stockade allow blocked.test --mcp probe" in done.stderr, done.stderr
    audit = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "audit", "--mcp", "probe", "--json"],
        cwd=vbox.project,
        env=vbox.env,
        capture_output=True,
        text=True,
    )
    records = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
    assert any(r["host"] == "blocked.test" and r["decision"] == "deny" and r["mcp"] == "probe" for r in records), audit
    other = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "audit", "--mcp", "other", "--json"],
        cwd=vbox.project,
        env=vbox.env,
        capture_output=True,
        text=True,
    )
    assert other.stdout.strip() == "", "the control: another server's filter shows none of them"


def test_a_plugin_s_server_runs_wrapped_from_its_own_folder_and_no_further(vbox: Box) -> None:
    """A server a Claude Code plugin installs lives in the home the mcp profile hides: wrapped, it
    reads its own folder (and starts), and still nothing else of the home."""
    from stockade.cli.agents import mcp_config

    root = vbox.home / ".claude" / "plugins" / "cache" / "market" / "probe" / "1.0.0"
    root.mkdir(parents=True)
    shutil.copyfile(SERVER, root / "server.py")
    (root / "data.txt").write_text("plugin data\n")
    (root / ".mcp.json").write_text(json.dumps({"probe": {"command": "/usr/bin/python3", "args": [str(root / "server.py")]}}))
    registry = {"version": 2, "plugins": {"probe@market": [{"scope": "user", "installPath": str(root)}]}}
    (vbox.home / ".claude" / "plugins" / "installed_plugins.json").write_text(json.dumps(registry))
    wrap = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "mcp", "wrap", "claude"],
        cwd=vbox.project,
        env=vbox.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrap.returncode == 0 and "probe now runs sandboxed" in wrap.stdout, wrap
    entry = json.loads((root / ".mcp.json").read_text())["probe"]
    stdin = _messages(("read", {"path": str(root / "data.txt")}), ("read", {"path": str(vbox.home / ".ssh" / "id_test")}))
    ran = subprocess.run([entry["command"], *entry["args"]], input=stdin, cwd=vbox.project, env=vbox.env, capture_output=True, timeout=120)
    texts = _texts(ran.stdout)
    assert texts[3] == "read: plugin data", (texts, ran.stderr[-2000:])
    assert texts[4].startswith("refused:") and "CANARY" not in texts[4], texts
    assert mcp_config.servers(vbox.home, vbox.project, ("claude",))[-1].wrapped
