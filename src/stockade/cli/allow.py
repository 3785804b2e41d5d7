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
        return
    print(allow_host(rule, policy_to_edit(cwd, policy), locate(), profile))
