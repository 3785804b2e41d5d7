"""`stockade mcp list|wrap|unwrap` through the command line, in a home and project of the test's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stockade.cli.app import app


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"fs": {"command": "npx", "args": ["-y", "fs"]}, "web": {"url": "https://x.test"}}}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(project)
    return home


def test_list_wrap_list_unwrap(world: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["mcp", "list"])
    assert listed.exit_code == 0 and "NOT sandboxed" in listed.output and "remote" in listed.output, listed.output
    wrapped = runner.invoke(app, ["mcp", "wrap", "claude"])
    assert wrapped.exit_code == 0 and "MCP server fs now runs sandboxed" in wrapped.output, wrapped.output
    assert "remote MCP servers left alone" in wrapped.output
    assert "sandboxed" in runner.invoke(app, ["mcp", "list"]).output
    entry = json.loads((world / ".claude.json").read_text())["mcpServers"]["fs"]
    assert entry["args"][:4] == ["run", "--mcp", "fs", "--"]
    unwrapped = runner.invoke(app, ["mcp", "unwrap"])
    assert unwrapped.exit_code == 0 and "runs unsandboxed again" in unwrapped.output
    assert json.loads((world / ".claude.json").read_text())["mcpServers"]["fs"] == {"command": "npx", "args": ["-y", "fs"]}


def test_an_unknown_agent_is_a_usage_error(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stockade.cli.main import main

    assert main(["mcp", "wrap", "vim"]) == 2
    assert "unknown agent 'vim'" in capsys.readouterr().err


def test_no_servers_says_so(world: Path) -> None:
    (world / ".claude.json").write_text("{}")
    done = CliRunner().invoke(app, ["mcp", "list"])
    assert done.exit_code == 0 and "no MCP servers" in done.output
