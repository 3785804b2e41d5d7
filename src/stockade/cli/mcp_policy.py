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
    from typing import Any

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


def _load(path: str) -> object:
    import tomlkit

    try:
        with open(path, encoding="utf-8") as handle:
            return tomlkit.parse(handle.read())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except Exception as exc:  # noqa: BLE001 - tomlkit's own parse errors
        raise UsageError(f"{path} is not valid TOML ({exc}); fix it by hand") from None


def write_env(name: str, literal: dict[str, str], passed: list[str], env: Mapping[str, str]) -> None:
    """The server's env, moved out of the agent's config into its own policy: `[env] set` for literal
    values, `[env] pass` for the user's own variables the agent fills in. The file is made 0600 (the
    values are often tokens), extending the built-in mcp profile when new."""
    import tomlkit

    path = policy_path(name, env)
    document = _policy_document(path, name, "its env moved here by stockade mcp wrap")
    table = document.setdefault("env", tomlkit.table())
    if literal:
        values = table.get("set")
        if not isinstance(values, dict):
            values = tomlkit.inline_table()
        for key, value in literal.items():
            values[key] = value
        table["set"] = values
    if passed:
        names = list(table.get("pass") or [])
        table["pass"] = [*names, *(key for key in passed if key not in names)]
    _write(path, document)


def read_folder(name: str, folder: str, env: Mapping[str, str]) -> None:
    """Let the server read the folder it is installed in (a plugin's or an extension's, in the home the
    built-in profile hides): `[filesystem] allow_read` of its own policy, made when new."""
    import tomlkit

    path = policy_path(name, env)
    document = _policy_document(path, name, "the folder it is installed in is readable")
    table = document.setdefault("filesystem", tomlkit.table())
    readable = list(table.get("allow_read") or [])
    if folder not in readable:
        table["allow_read"] = [*readable, folder]
        _write(path, document)


def _policy_document(path: str, name: str, why: str) -> dict[str, Any]:
    import tomlkit

    document = _load(path)
    if document is None:
        document = tomlkit.document()
        document.add(tomlkit.comment(f"the MCP server {name}'s own policy (stockade run --mcp {name}); {why}"))
        document["extends"] = [PROFILE]
    assert isinstance(document, dict)
    return document


def _write(path: str, document: dict[str, Any]) -> None:
    import tomlkit

    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, tomlkit.dumps(document).encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(temporary, path)


def read_env(name: str, env: Mapping[str, str]) -> dict[str, str]:
    """The env values `write_env` keeps for the server: literal ones, and `${NAME}` for each passed one."""
    document = _load(policy_path(name, env))
    table = document.get("env") if isinstance(document, dict) else None
    if not isinstance(table, dict):
        return {}
    values = table.get("set")
    out = {str(key): str(value) for key, value in values.items()} if isinstance(values, dict) else {}
    for key in table.get("pass") or []:
        out.setdefault(str(key), "${" + str(key) + "}")
    return out
