"""Which policy an MCP server runs under, and its env kept in that policy (cli/mcp_policy.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from stockade.cli import mcp_policy
from stockade.core.errors import UsageError


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "x" * 101, "sp ace"])
def test_a_name_that_is_no_file_name_is_a_usage_error(name: str) -> None:
    with pytest.raises(UsageError, match="an MCP server's name is"):
        mcp_policy.valid_name(name)


def test_the_user_s_own_file_else_the_built_in_profile(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert mcp_policy.server_policy("github", env) == (None, "mcp")
    path = Path(mcp_policy.policy_path("github", env))
    path.parent.mkdir(parents=True)
    path.write_text('extends = ["mcp"]\n')
    assert mcp_policy.server_policy("github", env) == (str(path), None)


def test_a_server_s_env_is_kept_private_and_read_back(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    mcp_policy.write_env("gh", {"TOKEN": "t0k"}, ["MINE"], env)
    path = Path(mcp_policy.policy_path("gh", env))
    assert path.stat().st_mode & 0o077 == 0, "the values are often tokens"
    data = tomllib.loads(path.read_text())
    assert data["extends"] == ["mcp"] and data["env"]["set"] == {"TOKEN": "t0k"} and data["env"]["pass"] == ["MINE"]
    mcp_policy.write_env("gh", {"MORE": "1"}, ["MINE"], env)
    assert mcp_policy.read_env("gh", env) == {"TOKEN": "t0k", "MORE": "1", "MINE": "${MINE}"}
    path.write_text("not [ toml")
    with pytest.raises(UsageError, match="not valid TOML"):
        mcp_policy.read_env("gh", env)
