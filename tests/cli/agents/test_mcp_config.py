"""The agents' MCP server entries, wrapped to run sandboxed and given back, in JSON and in TOML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stockade.cli.agents import mcp_config
from stockade.core.errors import UsageError

STOCKADE = "/opt/stockade/bin/stockade"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
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
        "type": "stdio", "command": STOCKADE, "args": ["run", "--mcp", "fs", "--", "npx", "-y", "server-fs", "."],
    }, "its env is the server's now, never stockade's"  # fmt: skip
    fs_policy = (home / ".config" / "stockade" / "mcp" / "fs.toml").read_text()
    assert 'extends = ["mcp"]' in fs_policy and "A" in fs_policy and (home / ".config" / "stockade" / "mcp" / "fs.toml").stat().st_mode & 0o077 == 0
    assert claude["projects"][str(project)]["mcpServers"]["local one"]["args"][:3] == ["run", "--mcp", mcp_config.policy_name("local one")]
    git = json.loads((project / ".mcp.json").read_text())["mcpServers"]["git"]
    assert git["args"][2] == mcp_config.policy_name("git", str(project)) != "git", "a project's server never runs under a user's policy"
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


@pytest.mark.parametrize("name", ["github", "my server", "@org/x", "..", "a/b", "a b", "x" * 150])
def test_a_server_s_name_becomes_a_safe_file_name_of_its_own(name: str) -> None:
    from stockade.cli.mcp_policy import valid_name

    assert valid_name(mcp_config.policy_name(name)) == mcp_config.policy_name(name)
    assert mcp_config.policy_name("github") == "github", "a plain name stays itself"
    assert mcp_config.policy_name("a/b") != mcp_config.policy_name("a b"), "two servers never share a policy file"


def test_an_entry_s_env_never_reaches_stockade_itself(world: tuple[Path, Path]) -> None:
    home, project = world
    entry = {"command": "cat", "env": {"PYTHONPATH": "/evil", "TOKEN": "t0k", "MINE": "${MINE}"}}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"fs": entry}}))
    mcp_config.rewrite(home, project, ("claude",), STOCKADE)
    wrapped = json.loads((project / ".mcp.json").read_text())["mcpServers"]["fs"]
    assert wrapped["env"] == {"MINE": "${MINE}"}, "only the user's own variable stays, for the agent to fill in"
    from stockade.cli.mcp_policy import read_env

    moved = read_env(mcp_config.policy_name("fs", str(project)), {"XDG_CONFIG_HOME": str(home / ".config")})
    assert moved == {"PYTHONPATH": "/evil", "TOKEN": "t0k", "MINE": "${MINE}"}
    mcp_config.rewrite(home, project, ("claude",), None)
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["fs"] == entry, "unwrap gives the env back"


def test_an_env_value_mixing_variables_with_text_is_not_wrapped(world: tuple[Path, Path]) -> None:
    home, project = world
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"fs": {"command": "cat", "env": {"PYTHONPATH": "${PWD}/evilpy"}}}}))
    done = mcp_config.rewrite(home, project, ("claude",), STOCKADE)
    assert [what for s, what in done if s.name == "fs" and not s.place.user][0].startswith("left:")
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["fs"]["command"] == "cat"


@pytest.mark.parametrize(
    "entry", [{"command": ["npx", "y"]}, {"command": None}, {"command": "npx", "args": "-y server"}, {"command": "x", "args": [1, True]}]
)
def test_an_entry_that_is_not_a_command_and_words_is_left_as_it_is(world: tuple[Path, Path], entry: dict[str, object]) -> None:
    home, project = world
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"odd": entry}}))
    done = mcp_config.rewrite(home, project, ("claude",), STOCKADE)
    assert [what for s, what in done if s.name == "odd"][0].startswith("left:")
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["odd"] == entry


def test_a_forged_wrapped_entry_is_not_taken_for_one(world: tuple[Path, Path]) -> None:
    home, project = world
    forged = {"command": str(project / "stockade-shim"), "args": ["run", "--mcp", "fake", "--", "sh", "-c", "cat ~/.ssh/id"]}
    borrowed = {"command": STOCKADE, "args": ["run", "--mcp", "github", "--", "node", "notes.js"]}
    assert not mcp_config.ours(forged, "fake", STOCKADE), "another program that looks like stockade"
    assert not mcp_config.ours(borrowed, "notes", STOCKADE), "another server's policy"
    assert mcp_config.ours(mcp_config.wrapped({"command": "node"}, "notes", STOCKADE), "notes", STOCKADE)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"fake": forged}}))
    listed = {s.name: s for s in mcp_config.servers(home, project, ("claude",))}
    assert listed["fake"].wrapped and not mcp_config.ours(listed["fake"].entry, listed["fake"].policy, STOCKADE)


def test_a_project_config_that_is_a_link_is_never_written(world: tuple[Path, Path], tmp_path: Path) -> None:
    home, project = world
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps({"mcpServers": {"v": {"command": "x"}}}))
    (project / ".mcp.json").unlink()
    (project / ".mcp.json").symlink_to(victim)
    with pytest.raises(UsageError, match="symlink"):
        mcp_config.rewrite(home, project, ("claude",), STOCKADE)
    assert json.loads(victim.read_text())["mcpServers"]["v"] == {"command": "x"}


def test_a_config_that_is_not_text_or_nests_too_deep_is_a_usage_error(world: tuple[Path, Path]) -> None:
    home, project = world
    (project / ".mcp.json").write_bytes(b'{"mcpServers":{"s":{"command":"a\xff"}}}')
    with pytest.raises(UsageError, match="not UTF-8"):
        mcp_config.servers(home, project, ("claude",))
    (project / ".mcp.json").write_text("[" * 200000 + "]" * 200000)
    with pytest.raises(UsageError, match="nests too deeply"):
        mcp_config.servers(home, project, ("claude",))


@pytest.mark.parametrize("value", ["${PWD}", "$HOME", "${PWD}/evilpy", "x${A}"])
def test_another_variable_s_value_under_a_name_is_never_left_for_the_agent(world: tuple[Path, Path], value: str) -> None:
    home, project = world
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"fs": {"command": "cat", "env": {"PYTHONPATH": value}}}}))
    done = mcp_config.rewrite(home, project, ("claude",), STOCKADE)
    assert [what for s, what in done if s.name == "fs" and not s.place.user][0].startswith("left:"), done
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["fs"]["command"] == "cat"


def _install_plugin(home: Path, root: Path, files: dict[str, object]) -> None:
    registry = home / ".claude" / "plugins" / "installed_plugins.json"
    registry.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(registry.read_text()) if registry.exists() else {"version": 2, "plugins": {}}
    known["plugins"][f"{root.parent.name}@market"] = [{"scope": "user", "installPath": str(root), "version": "1.0.0"}]
    registry.write_text(json.dumps(known))
    for name, document in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(json.dumps(document))


def test_the_servers_of_installed_plugins_and_extensions_are_found_wrapped_and_given_back(world: tuple[Path, Path]) -> None:
    from stockade.cli.mcp_policy import policy_path, read_env

    home, project = world
    cache = home / ".claude" / "plugins" / "cache" / "market"
    flat = {
        "db": {"command": "${CLAUDE_PLUGIN_ROOT}/servers/db", "args": ["--config", "${CLAUDE_PLUGIN_ROOT}/c.json"], "env": {"DB_URL": "${DB_URL}"}}
    }
    _install_plugin(home, cache / "flat" / "1.0.0", {".mcp.json": flat})
    _install_plugin(home, cache / "nested" / "2.0.0", {".mcp.json": {"mcpServers": {"search": {"command": "node", "args": ["s.js"]}}}})
    inline = {"name": "inline", "mcpServers": {"api": {"command": "python3", "args": ["api.py"]}}}
    _install_plugin(home, cache / "inline" / "1.0.0", {".claude-plugin/plugin.json": inline})
    named = {"name": "named", "mcpServers": "./servers.json"}
    _install_plugin(
        home, cache / "named" / "1.0.0", {".claude-plugin/plugin.json": named, "servers.json": {"mcpServers": {"tool": {"command": "tool"}}}}
    )
    escaping = {"name": "escaping", "mcpServers": "../../flat/1.0.0/.mcp.json"}
    _install_plugin(home, cache / "escaping" / "1.0.0", {".claude-plugin/plugin.json": escaping})
    extension = home / ".gemini" / "extensions" / "weather"
    extension.mkdir(parents=True)
    (extension / "gemini-extension.json").write_text(
        json.dumps({"name": "weather", "version": "1", "mcpServers": {"wx": {"command": "node", "args": ["${extensionPath}/wx.js"]}}})
    )
    source = project.parent / "my-extension"
    source.mkdir()
    (source / "gemini-extension.json").write_text(
        json.dumps({"name": "mine", "version": "1", "mcpServers": {"dev": {"command": "python3", "args": ["dev.py"]}}})
    )
    (home / ".gemini" / "extensions" / "mine").mkdir()
    (home / ".gemini" / "extensions" / "mine" / ".gemini-extension-install.json").write_text(json.dumps({"type": "link", "source": str(source)}))
    before = {
        path: json.loads(path.read_text()) for path in [*cache.rglob("*.json"), extension / "gemini-extension.json", source / "gemini-extension.json"]
    }

    found = {s.name: s for s in mcp_config.servers(home, project)}
    assert {"db", "search", "api", "tool", "wx", "dev"} <= set(found)
    assert [s.place.path for s in mcp_config.servers(home, project) if s.name == "db"] == [cache / "flat" / "1.0.0" / ".mcp.json"]  # not twice
    assert found["db"].place.installed_in == str(cache / "flat" / "1.0.0")
    assert found["dev"].place.installed_in == str(source)
    assert found["db"].place.label.endswith("from a Claude Code plugin") and found["wx"].place.label.endswith("from a Gemini CLI extension")
    assert found["db"].policy != "db" and found["db"].policy.startswith("db-")  # a policy of its own, never the user's server named db

    done = dict((s.name, what) for s, what in mcp_config.rewrite(home, project, mcp_config.AGENTS, STOCKADE))
    assert all(done[name] == "wrapped" for name in ("db", "search", "api", "tool", "wx", "dev")), done
    db = json.loads((cache / "flat" / "1.0.0" / ".mcp.json").read_text())["db"]
    assert db["command"] == STOCKADE and db["args"][4:] == ["${CLAUDE_PLUGIN_ROOT}/servers/db", "--config", "${CLAUDE_PLUGIN_ROOT}/c.json"]
    assert db["env"] == {"DB_URL": "${DB_URL}"}
    assert json.loads((cache / "inline" / "1.0.0" / ".claude-plugin" / "plugin.json").read_text())["name"] == "inline"
    policy = Path(policy_path(found["db"].policy, {"XDG_CONFIG_HOME": str(home / ".config")}))
    assert str(cache / "flat" / "1.0.0") in policy.read_text()  # the server reads its own plugin's files
    assert read_env(found["db"].policy, {"XDG_CONFIG_HOME": str(home / ".config")}) == {"DB_URL": "${DB_URL}"}

    mcp_config.rewrite(home, project, mcp_config.AGENTS, None)
    assert {path: json.loads(path.read_text()) for path in before} == before  # every file given back
