"""The MCP servers the agents start, found in their configs, and wrapped so each runs in its own sandbox.

Claude Code keeps servers in `~/.claude.json` (`mcpServers`, and per project
under `projects.PATH.mcpServers`) and a project's `.mcp.json`; Gemini CLI in
`settings.json` (`mcpServers`, the user's and the project's); Codex in
`config.toml` (`[mcp_servers.NAME]`, the user's and a project's). A stdio
server is a command the agent runs on the host with the user's whole home and
network; wrapped, the same entry runs `stockade run --mcp NAME -- COMMAND
ARGS...`, so it gets its own policy (cli/mcp_policy.py) and nothing else
changes: the agent still speaks JSON-RPC over the server's stdin and stdout,
which stockade passes through untouched (its own lines go to stderr).
Unwrapping gives the command and its arguments back. Remote servers (a URL) are left alone
and listed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stockade.core.errors import UsageError

AGENTS = ("claude", "codex", "gemini")
WRAP_WORDS = ("run", "--mcp")  # args[0:2] of a wrapped entry; args[2] its name, args[3] "--"


@dataclass(frozen=True)
class Place:
    """One config file of one agent, and where in it the servers are."""

    agent: str
    path: Path
    keys: tuple[str, ...]  # the JSON keys (or TOML tables) down to the table of servers
    toml: bool = False

    @property
    def label(self) -> str:
        inner = ".".join(self.keys)
        return f"{self.path} ({inner})" if len(self.keys) > 1 else str(self.path)


@dataclass(frozen=True)
class Server:
    place: Place
    name: str
    entry: dict[str, Any]

    @property
    def remote(self) -> bool:
        return "command" not in self.entry and any(key in self.entry for key in ("url", "httpUrl", "serverUrl"))

    @property
    def wrapped(self) -> bool:
        return is_wrapped(self.entry)

    @property
    def shown(self) -> str:
        """The command as the agent would run it unwrapped, or the URL."""
        entry = unwrapped(self.entry) if self.wrapped else self.entry
        if self.remote:
            return str(entry.get("url") or entry.get("httpUrl") or entry.get("serverUrl"))
        import shlex

        words = [str(entry.get("command", "")), *(str(word) for word in entry.get("args") or [])]
        return shlex.join(words)


def places(home: Path, project: Path, agents: tuple[str, ...] = AGENTS) -> list[Place]:
    found: list[Place] = []
    claude, gemini, codex = home / ".claude.json", home / ".gemini" / "settings.json", home / ".codex" / "config.toml"
    if "claude" in agents:
        found += [Place("claude", claude, ("mcpServers",)), Place("claude", claude, ("projects", str(project), "mcpServers"))]
        found.append(Place("claude", project / ".mcp.json", ("mcpServers",)))
    if "gemini" in agents:
        found += [Place("gemini", gemini, ("mcpServers",)), Place("gemini", project / ".gemini" / "settings.json", ("mcpServers",))]
    if "codex" in agents:
        found += [Place("codex", codex, ("mcp_servers",), toml=True), Place("codex", project / ".codex" / "config.toml", ("mcp_servers",), toml=True)]
    return [place for i, place in enumerate(found) if place not in found[:i]]


def servers(home: Path, project: Path, agents: tuple[str, ...] = AGENTS) -> list[Server]:
    """Every MCP server the agents' configs name, in config order."""
    out: list[Server] = []
    for place in places(home, project, agents):
        table = _table(_read(place), place.keys)
        if isinstance(table, dict):
            out += [Server(place, str(name), dict(entry)) for name, entry in table.items() if isinstance(entry, dict)]
    return out


def is_wrapped(entry: dict[str, Any]) -> bool:
    args = entry.get("args")
    command = entry.get("command")
    return (
        isinstance(command, str) and os.path.basename(command).startswith("stockade") and isinstance(args, list)
        and len(args) >= 5 and tuple(args[:2]) == WRAP_WORDS and args[3] == "--"
    )  # fmt: skip


def wrapped(entry: dict[str, Any], name: str, stockade: str) -> dict[str, Any]:
    """The entry run through stockade under the server's own policy; other keys (env, cwd, timeouts) kept."""
    original = unwrapped(entry) if is_wrapped(entry) else entry
    words = [str(original["command"]), *(str(word) for word in original.get("args") or [])]
    out = dict(original)
    out["command"] = stockade
    out["args"] = [*WRAP_WORDS, policy_name(name), "--", *words]
    return out


def unwrapped(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as it was before `wrapped`."""
    if not is_wrapped(entry):
        return dict(entry)
    out = dict(entry)
    args = list(entry["args"])
    out["command"] = args[4]
    out["args"] = args[5:]
    return out


def policy_name(name: str) -> str:
    """A server's name as its policy file's (letters, digits, '.', '_', '-')."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).lstrip(".")[:100]
    return cleaned or "server"


def rewrite(home: Path, project: Path, agents: tuple[str, ...], stockade: str | None) -> list[tuple[Server, str]]:
    """Wrap (stockade given) or unwrap (None) every stdio server of these agents; (server, what happened)
    for each: "wrapped", "updated", "unwrapped", "already", "remote", "not wrapped"."""
    done: list[tuple[Server, str]] = []
    for place in places(home, project, agents):
        document = _read(place)
        table = _table(document, place.keys)
        if not isinstance(table, dict) or not table:
            continue
        changed = False
        for name in list(table):
            entry = table[name]
            if not isinstance(entry, dict):
                continue
            server = Server(place, str(name), dict(entry))
            if server.remote:
                done.append((server, "remote"))
                continue
            if "command" not in entry:
                continue
            if stockade is None:
                if server.wrapped:
                    _replace(table, name, unwrapped(dict(entry)), place.toml)
                    changed = True
                done.append((server, "unwrapped" if server.wrapped else "not wrapped"))
                continue
            new = wrapped(dict(entry), str(name), stockade)
            if new == dict(entry):
                done.append((server, "already"))
                continue
            _replace(table, name, new, place.toml)
            changed = True
            done.append((server, "updated" if server.wrapped else "wrapped"))
        if changed:
            _write(place, document)
    return done


def report_lines(done: list[tuple[Server, str]]) -> list[str]:
    """One line per server changed, one for those left alone."""
    said = {
        "wrapped": "now runs sandboxed",
        "updated": "runs sandboxed (the stockade it names updated)",
        "already": "already runs sandboxed",
        "unwrapped": "runs unsandboxed again",
        "not wrapped": "was not wrapped",
    }
    lines = [f"stockade: {s.place.agent} MCP server {s.name} {said[what]} ({s.place.label})" for s, what in done if what != "remote"]
    remote = [server for server, what in done if what == "remote"]
    if remote:
        names = ", ".join(f"{server.name} ({server.shown})" for server in remote)
        lines.append(f"stockade: remote MCP servers left alone (they run elsewhere; allow their hosts as usual): {names}")
    if any(what == "wrapped" for _server, what in done):
        lines.append("stockade: each runs with the project read-only, no home and no network; `stockade allow HOST --mcp NAME` opens a host")
    return lines


# -- reading and writing the files ----------------------------------------------------------------


def _read(place: Place) -> Any:
    try:
        text = place.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {place.path}: {exc.strerror or exc}") from None
    if not text.strip():
        return None
    if place.toml:
        import tomlkit

        try:
            return tomlkit.parse(text)
        except Exception as exc:  # noqa: BLE001 - tomlkit raises its own error kinds for bad TOML
            raise UsageError(f"{place.path} is not valid TOML ({exc}); fix it by hand, stockade will not overwrite it") from None
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{place.path} is not valid JSON ({exc}); fix it by hand, stockade will not overwrite it") from None


def _table(document: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def _replace(table: Any, name: str, entry: dict[str, Any], toml: bool) -> None:
    if not toml:
        table[name] = entry
        return
    existing = table[name]
    for key in list(existing):
        if key not in entry:
            del existing[key]
    for key, value in entry.items():
        existing[key] = value


def _write(place: Place, document: Any) -> None:
    if place.path.is_symlink() and not str(place.path).startswith(str(Path.home())):
        raise UsageError(f"{place.path} is a symlink; stockade edits a project's config only in a real file")
    if place.toml:
        import tomlkit

        _write_text(place.path, tomlkit.dumps(document))
        return
    import json

    _write_text(place.path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _write_text(path: Path, text: str) -> None:
    import tempfile

    target = Path(os.path.realpath(path))
    mode = target.stat().st_mode & 0o777
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
