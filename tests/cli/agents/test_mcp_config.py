"""The agents' MCP server entries, wrapped to run sandboxed and given back, in JSON and in TOML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stockade.cli.agents import mcp_config
from stockade.core.errors import UsageError

STOCKADE = "/opt/stockade/bin/stockade"


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".codex").mkdir(parents=True)
    (home / ".gemini").mkdir()
    project.mkdir()
    claude = {
        "numStartups": 7,
        "mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-fs", "."], "env": {"A": "1"}}},
        "projects": {str(project): {"mcpServers": {"local one": {"command": "uvx", "args": ["x"]}}}, "/elsewhere": {"mcpServers": {}}},
    }
    (home / ".claude.json").write_text(json.dumps(claude))
    (home / ".codex" / "config.toml").write_text(
        '# mine\nmodel = "o3"\n\n[mcp_servers.github]\ncommand = "docker"  # the official one\nargs = ["run", "-i", "gh"]\n\n'
        '[mcp_servers.docs]\nurl = "https://mcp.example.com/mcp"\n'
    )
    (home / ".gemini" / "settings.json").write_text(json.dumps({"theme": "x", "mcpServers": {"web": {"httpUrl": "https://x.test/mcp"}}}))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}))
    return home, project


def test_every_server_is_found_with_where_it_is(world: tuple[Path, Path]) -> None:
    home, project = world
    found = {(s.place.agent, s.name): s for s in mcp_config.servers(home, project)}
    assert set(found) == {("claude", "fs"), ("claude", "local one"), ("claude", "git"), ("codex", "github"), ("codex", "docs"), ("gemini", "web")}
    assert found[("codex", "docs")].remote and found[("gemini", "web")].remote and not found[("claude", "fs")].remote
    assert found[("claude", "fs")].shown == "npx -y server-fs ."


def test_wrap_then_unwrap_gives_every_file_back(world: tuple[Path, Path]) -> None:
    home, project = world
    files = [home / ".claude.json", home / ".codex" / "config.toml", home / ".gemini" / "settings.json", project / ".mcp.json"]
    before = {path: path.read_text() for path in files}
    done = {(s.place.agent, s.name): what for s, what in mcp_config.rewrite(home, project, mcp_config.AGENTS, STOCKADE)}
    assert done == {
        ("claude", "fs"): "wrapped", ("claude", "local one"): "wrapped", ("claude", "git"): "wrapped",
        ("codex", "github"): "wrapped", ("codex", "docs"): "remote", ("gemini", "web"): "remote",
    }  # fmt: skip
    claude = json.loads((home / ".claude.json").read_text())
    assert claude["numStartups"] == 7 and claude["mcpServers"]["fs"] == {
        "type": "stdio", "command": STOCKADE, "args": ["run", "--mcp", "fs", "--", "npx", "-y", "server-fs", "."], "env": {"A": "1"},
    }  # fmt: skip
    assert claude["projects"][str(project)]["mcpServers"]["local one"]["args"][:4] == ["run", "--mcp", "local-one", "--"]
    codex = (home / ".codex" / "config.toml").read_text()
    assert "# mine" in codex and "# the official one" in codex and f'command = "{STOCKADE}"' in codex, codex
    again = mcp_config.rewrite(home, project, mcp_config.AGENTS, STOCKADE)
    assert {what for _s, what in again} == {"already", "remote"}
    moved = mcp_config.rewrite(home, project, ("claude",), "/new/stockade")
    assert {what for _s, what in moved} == {"updated"}
    assert all(s.wrapped for s in mcp_config.servers(home, project) if not s.remote)
    mcp_config.rewrite(home, project, mcp_config.AGENTS, None)
    after = {path: path.read_text() for path in files}
    assert after[home / ".codex" / "config.toml"] == before[home / ".codex" / "config.toml"], "TOML given back byte for byte"
    for path in files:
        if path.suffix == ".json":
            assert json.loads(after[path]) == json.loads(before[path]), path


def test_a_broken_config_is_a_usage_error_and_left_alone(world: tuple[Path, Path]) -> None:
    home, project = world
    (project / ".mcp.json").write_text("{not json")
    with pytest.raises(UsageError, match="is not valid JSON"):
        mcp_config.rewrite(home, project, ("claude",), STOCKADE)
    assert (project / ".mcp.json").read_text() == "{not json"


@pytest.mark.parametrize(("name", "file_name"), [("github", "github"), ("my server", "my-server"), ("@org/x", "-org-x"), ("..", "server")])
def test_a_server_s_name_becomes_a_safe_file_name(name: str, file_name: str) -> None:
    assert mcp_config.policy_name(name) == file_name
    from stockade.cli.mcp_policy import valid_name

    assert valid_name(mcp_config.policy_name(name)) == file_name
