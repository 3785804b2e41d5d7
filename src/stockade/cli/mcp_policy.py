"""Which policy an agent's MCP server runs under (`stockade run --mcp NAME`): small, on the run's path.

Each server has a file of its own in the user's config folder,
`~/.config/stockade/mcp/NAME.toml` (written by `stockade allow HOST --mcp
NAME`, read-only inside every sandbox, the user's like config.toml); without
one, the built-in `mcp` profile: the project read-only, a private home, no
network. Never a file of the project's: a repository could loosen the server
it ships.
"""

from __future__ import annotations

import os

from stockade.core.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PROFILE = "mcp"
FOLDER = "mcp"


def valid_name(name: str) -> str:
    """The server's name as a file name; a usage error for one that cannot be."""
    if not name or len(name) > 100 or name.startswith(".") or not all(c.isalnum() or c in "._-" for c in name):
        raise UsageError(f"--mcp {name!r}: an MCP server's name is letters, digits, '.', '_' and '-' (as the agent's config names it)")
    return name


def policy_path(name: str, env: Mapping[str, str]) -> str:
    from stockade.core.locations import config_folder

    return os.path.join(config_folder(env), FOLDER, f"{valid_name(name)}.toml")


def server_policy(name: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(--policy, --profile) for the server's run: its own file where the user made one."""
    path = policy_path(name, env)
    return (path, None) if os.path.isfile(path) else (None, PROFILE)
