"""`stockade allow HOST`: add a host to the right policy file's [network] allow list.

Every denial's hint is this command, so what a user (or an agent) is told can
be pasted as it is. The edit itself (profiles/editing.py `allow_host`) is
shared with the "always" answer of an approval (proxy/client/asking.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from stockade.core.errors import UsageError
from stockade.core.locations import locate
from stockade.profiles.discovery import policy_to_edit
from stockade.profiles.domains import parse_rule
from stockade.profiles.editing import allow_host


def allow(
    host: Annotated[str, typer.Argument(help="Host to allow: pypi.org, *.example.com, host:port or an IP.")],
    policy: Annotated[Path | None, typer.Option("--policy", "-p", help="Policy file to change (default: this project's .stockade.toml).")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="When the file is new: the built-in it extends.")] = None,
    mcp: Annotated[
        str | None,
        typer.Option("--mcp", help="Allow it for the agent's MCP server NAME (its own file: ~/.config/stockade/mcp/NAME.toml).", metavar="NAME"),
    ] = None,
) -> None:
    try:
        rule = str(parse_rule(host))
    except ValueError as exc:
        raise UsageError(f"cannot allow {host!r}: {exc}") from None
    cwd = Path(os.getcwd())
    if mcp is not None:
        from stockade.cli.mcp_policy import PROFILE, policy_path

        if policy is not None or profile is not None:
            raise UsageError("--mcp names the server's own policy file; give it without --policy or --profile")
        path = Path(policy_path(mcp, os.environ))
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        print(allow_host(rule, path, locate(), PROFILE))
        _say_if_no_server(mcp)
        return
    print(allow_host(rule, policy_to_edit(cwd, policy), locate(), profile))


def _say_if_no_server(name: str) -> None:
    """A note when no MCP server the agents' configs name runs as `name` (a typo allows nothing)."""
    from stockade.cli.agents.mcp_config import servers
    from stockade.cli.install import project_root

    try:
        found = servers(Path(os.environ.get("HOME") or Path.home()), project_root(Path(os.getcwd())))
    except UsageError:
        return
    if not any(server.policy == name for server in found):
        print(f"stockade: note: no MCP server in the agents' configs here runs as {name}; `stockade mcp list` names each one's --mcp name")
