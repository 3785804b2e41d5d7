"""The MCP servers the agents start, found in their configs, and wrapped so each runs in its own sandbox.

Claude Code keeps servers in `~/.claude.json` (`mcpServers`, and per project
under `projects.PATH.mcpServers`) and a project's `.mcp.json`; Gemini CLI in
`settings.json` (`mcpServers`, the user's and the project's); Codex in
`config.toml` (`[mcp_servers.NAME]`, the user's and a project's). Servers
also come with what the user installs: a Claude Code plugin's `.mcp.json` (or
the `mcpServers` of its `.claude-plugin/plugin.json`), found through
`~/.claude/plugins/installed_plugins.json`, and a Gemini CLI extension's
`gemini-extension.json` under `~/.gemini/extensions` (or the folder a linked
extension names). An update replaces those files, and `doctor` then names the
server as unwrapped again. A stdio
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
import re
from collections.abc import Mapping
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
    user: bool = False  # the user's own file in the home (else a project's)
    scope: str = ""  # a project's file: the project, whose servers' policies are its own (never a user server's of the same name)

    @property
    def label(self) -> str:
        inner = ".".join(self.keys)
        where = f"{self.path} ({inner})" if len(self.keys) > 1 else str(self.path)
        kind = {"claude plugin": "a Claude Code plugin", "gemini extension": "a Gemini CLI extension"}.get(self.scope.split(" /", 1)[0])
        return f"{where}, from {kind}" if kind and self.installed_in else where

    @property
    def installed_in(self) -> str:
        """A plugin's or an extension's folder (its servers run from there), or ""."""
        kind, _, root = self.scope.partition(" /")
        return "/" + root if kind in ("claude plugin", "gemini extension") and root else ""


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
    def policy(self) -> str:
        """The name of its own policy (`--mcp NAME`, ~/.config/stockade/mcp/NAME.toml)."""
        return policy_name(self.name, self.place.scope)

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
        found += [Place("claude", claude, ("mcpServers",), user=True), Place("claude", claude, ("projects", str(project), "mcpServers"), user=True)]
        found.append(Place("claude", project / ".mcp.json", ("mcpServers",), scope=str(project)))
    if "gemini" in agents:
        found += [
            Place("gemini", gemini, ("mcpServers",), user=True),
            Place("gemini", project / ".gemini" / "settings.json", ("mcpServers",), scope=str(project)),
        ]
    if "codex" in agents:
        found += [Place("codex", codex, ("mcp_servers",), toml=True, user=True)]
        found.append(Place("codex", project / ".codex" / "config.toml", ("mcp_servers",), toml=True, scope=str(project)))
    if "claude" in agents:
        found += plugin_places(home)
    if "gemini" in agents:
        found += extension_places(home)
    return [place for i, place in enumerate(found) if place not in found[:i]]


def plugin_places(home: Path) -> list[Place]:
    """The MCP server files of every Claude Code plugin the user installed (any scope): a plugin
    declares its servers in `.mcp.json` at its root (flat, or under `mcpServers`), or in
    `.claude-plugin/plugin.json` as a table or the name of a file of its own."""
    registry = _json_quietly(home / ".claude" / "plugins" / "installed_plugins.json")
    plugins = registry.get("plugins") if isinstance(registry, dict) else None
    roots: list[Path] = []
    for installs in plugins.values() if isinstance(plugins, dict) else []:
        for install in installs if isinstance(installs, list) else [installs]:
            where = install.get("installPath") if isinstance(install, dict) else None
            if isinstance(where, str) and os.path.isabs(where):
                roots.append(Path(where))
    found: list[Place] = []
    for root in dict.fromkeys(roots):
        scope = f"claude plugin {root}"
        manifest = _json_quietly(root / ".claude-plugin" / "plugin.json")
        named = manifest.get("mcpServers") if isinstance(manifest, dict) else None
        files = [root / ".mcp.json"]
        if isinstance(named, dict):
            found.append(Place("claude", root / ".claude-plugin" / "plugin.json", ("mcpServers",), user=True, scope=scope))
        for extra in [named] if isinstance(named, str) else named if isinstance(named, list) else []:
            if isinstance(extra, str) and _inside(root, root / extra):
                files.append(root / extra)
        for path in files:
            document = _json_quietly(path)
            if isinstance(document, dict):
                keys = ("mcpServers",) if isinstance(document.get("mcpServers"), dict) else ()
                found.append(Place("claude", path, keys, user=True, scope=scope))
    return found


def extension_places(home: Path) -> list[Place]:
    """Every Gemini CLI extension's `gemini-extension.json` (`mcpServers`); a linked extension's is in
    the folder its install record names."""
    folder = home / ".gemini" / "extensions"
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
    except OSError:
        return []
    found: list[Place] = []
    for name in names:
        root = folder / name
        record = _json_quietly(root / ".gemini-extension-install.json")
        if isinstance(record, dict) and record.get("type") == "link" and isinstance(record.get("source"), str) and os.path.isabs(record["source"]):
            root = Path(record["source"])
        path = root / "gemini-extension.json"
        if path.is_file():
            found.append(Place("gemini", path, ("mcpServers",), user=True, scope=f"gemini extension {root}"))
    return found


def _inside(root: Path, path: Path) -> bool:
    return os.path.normpath(path).startswith(str(root).rstrip("/") + "/")


def _json_quietly(path: Path) -> Any:
    """A JSON file's contents, or None where it is missing or unreadable (an install record or a
    manifest that names no servers is nothing to wrap; the server files themselves are read by `_read`,
    which says what is wrong)."""
    import json

    try:
        with open(path, encoding="utf-8") as file:
            return json.loads(file.read(4 << 20))
    except (OSError, ValueError, RecursionError):
        return None


def servers(home: Path, project: Path, agents: tuple[str, ...] = AGENTS) -> list[Server]:
    """Every MCP server the agents' configs name, in config order."""
    out: list[Server] = []
    for place in places(home, project, agents):
        table = _table(_read(place), place.keys)
        if isinstance(table, dict):
            out += [Server(place, str(name), dict(entry)) for name, entry in table.items() if isinstance(entry, dict)]
    return out


def is_wrapped(entry: dict[str, Any]) -> bool:
    """Shaped as `wrapped` writes an entry (whichever program it names: `ours` says whether it is this stockade)."""
    args = entry.get("args")
    command = entry.get("command")
    return (
        isinstance(command, str) and os.path.basename(command).startswith("stockade") and isinstance(args, list)
        and len(args) >= 5 and tuple(args[:2]) == WRAP_WORDS and args[3] == "--" and all(isinstance(word, str) for word in args)
    )  # fmt: skip


def ours(entry: dict[str, Any], policy: str, stockade: str | None) -> bool:
    """A wrapped entry that runs this stockade (`stockade` None: any file named stockade that is a
    program) under the server's own policy name: one forged to look wrapped is not."""
    if not is_wrapped(entry):
        return False
    command = str(entry["command"])
    if entry["args"][2] != policy:
        return False
    if stockade is not None:
        return os.path.realpath(command) == os.path.realpath(stockade)
    return os.path.isabs(command) and os.path.isfile(command) and os.access(command, os.X_OK)


def runnable(entry: dict[str, Any]) -> str:
    """Why the entry cannot be wrapped as it is, or "": a command and a list of words, all strings."""
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not command:
        return "its command is not a string"
    if not isinstance(args, list) or not all(isinstance(word, str) for word in args):
        return "its args are not a list of strings"
    return ""


def wrapped(entry: dict[str, Any], policy: str, stockade: str) -> dict[str, Any]:
    """The entry run through stockade under the server's own policy; other keys (cwd, timeouts) kept.
    Its literal `env` values are not kept here (the agent would set them for stockade itself, on the
    host): `carry_env` moves them into the server's policy first."""
    original = unwrapped(entry) if is_wrapped(entry) else entry
    out = dict(original)
    out["command"] = stockade
    out["args"] = [*WRAP_WORDS, policy, "--", str(original["command"]), *(str(word) for word in original.get("args") or [])]
    env = original.get("env")
    if isinstance(env, dict):
        kept = {key: value for key, value in env.items() if _user_value(key, value)}
        if kept:
            out["env"] = kept
        else:
            out.pop("env", None)
    return out


def unwrapped(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as it was before `wrapped` (its moved env comes back from the server's policy: `restore_env`)."""
    if not is_wrapped(entry):
        return dict(entry)
    out = dict(entry)
    args = list(entry["args"])
    out["command"] = args[4]
    if args[5:]:
        out["args"] = args[5:]
    else:
        out.pop("args", None)
    return out


def _user_value(key: object, value: object) -> bool:
    """An env value that is the user's own variable of the same name (`K = "${K}"`, which the agent
    fills from the user's environment as it stands), safe to leave for the agent: nothing of the
    config's own text, and no other variable's value under this name (`PYTHONPATH = "${PWD}"` would
    make stockade's own Python import the project's files, on the host)."""
    return isinstance(key, str) and isinstance(value, str) and value in ("${" + key + "}", "$" + key)


def carry_env(entry: dict[str, Any], policy: str, env: Mapping[str, str]) -> str:
    """Move the entry's literal env values into the server's own policy (`[env] set`, a file only the
    user writes, mode 0600), and pass the user's own variables it names (`[env] pass`); "" when done,
    else why the entry cannot be wrapped (a value that mixes the agent's variables with text)."""
    values = entry.get("env")
    if values is None:
        return ""
    if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        return "its env is not a table of strings"
    literal = {key: value for key, value in values.items() if not _user_value(key, value)}
    mixed = [key for key, value in literal.items() if "$" in value]
    if mixed:
        return f"its env values {', '.join(mixed)} mix the agent's variables with text, which the sandbox cannot fill in: wrap it by hand"
    bad = [key for key in values if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key)]
    if bad:
        return f"its env names {', '.join(bad)}, which is no variable name"
    passed = [key for key, value in values.items() if _user_value(key, value)]
    if literal or passed:
        from stockade.cli.mcp_policy import write_env

        write_env(policy, literal, passed, env)
    return ""


def restore_env(entry: dict[str, Any], policy: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The unwrapped entry with the env values `carry_env` moved into the server's policy back."""
    from stockade.cli.mcp_policy import read_env

    moved = read_env(policy, env)
    if not moved:
        return entry
    out = dict(entry)
    kept = entry.get("env")
    out["env"] = {**moved, **(kept if isinstance(kept, dict) else {})}
    return out


def policy_name(name: str, scope: str = "") -> str:
    """A server's policy name (letters, digits, '.', '_', '-'): the user's own servers' is their name;
    a project's server's, or a name that had to change, gets a short hash of (project, name), so that
    no two servers share a file, and a repository's server named like one of the user's (`github`)
    never runs under the user's policy for it (its hosts, its token)."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).lstrip(".")[:80]
    if cleaned == name and cleaned and not scope:
        return cleaned
    import hashlib

    key = f"{scope}\0{name}".encode("utf-8", "surrogateescape")
    return f"{cleaned or 'server'}-{hashlib.sha256(key).hexdigest()[:8]}"


def rewrite(home: Path, project: Path, agents: tuple[str, ...], stockade: str | None) -> list[tuple[Server, str]]:
    """Wrap (stockade given) or unwrap (None) every stdio server of these agents; (server, what happened)
    for each: "wrapped", "updated", "unwrapped", "already", "remote", "not wrapped", or "left: WHY"."""
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
                    _replace(table, name, restore_env(unwrapped(dict(entry)), server.policy, os.environ), place.toml)
                    changed = True
                done.append((server, "unwrapped" if server.wrapped else "not wrapped"))
                continue
            why = runnable(unwrapped(dict(entry)) if server.wrapped else dict(entry)) or carry_env(dict(entry), server.policy, os.environ)
            if why:
                done.append((server, f"left: {why}"))
                continue
            installed = place.installed_in
            if installed:
                from stockade.cli.mcp_policy import read_folder

                read_folder(server.policy, installed, os.environ)
            new = wrapped(dict(entry), server.policy, stockade)
            if new == dict(entry):
                done.append((server, "already"))
                continue
            _replace(table, name, new, place.toml)
            changed = True
            done.append((server, "updated" if server.wrapped else "wrapped"))
        if changed:
            _write(place, document, home)
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
    lines = [
        f"stockade: {s.place.agent} MCP server {s.name} {said.get(what) or 'was NOT wrapped: ' + what.removeprefix('left: ')} ({s.place.label})"
        for s, what in done
        if what != "remote"
    ]
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
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnicodeDecodeError:
        raise UsageError(f"{place.path} is not UTF-8 text; fix it by hand, stockade will not overwrite it") from None
    except OSError as exc:
        raise UsageError(f"cannot read {place.path}: {exc.strerror or exc}") from None
    if not text.strip():
        return None
    if place.toml:
        import tomlkit

        try:
            return tomlkit.parse(text)
        except RecursionError:
            raise UsageError(f"{place.path} nests too deeply to read; fix it by hand, stockade will not overwrite it") from None
        except Exception as exc:  # noqa: BLE001 - tomlkit raises its own error kinds for bad TOML
            raise UsageError(f"{place.path} is not valid TOML ({exc}); fix it by hand, stockade will not overwrite it") from None
    import json

    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{place.path} nests too deeply to read; fix it by hand, stockade will not overwrite it") from None
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


def _write(place: Place, document: Any, home: Path) -> None:
    # A project's file that is a link (or under a folder that is) could lead anywhere, another agent's
    # settings among them: refused. The user's own files in the home are often links a dotfile manager
    # keeps, and are followed.
    if not place.user and any(path.is_symlink() for path in (place.path, place.path.parent)):
        raise UsageError(f"{place.path} is a symlink; stockade edits a project's config only in a real file")
    if place.toml:
        import tomlkit

        _write_text(place.path, tomlkit.dumps(document))
        return
    import json

    _write_text(place.path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Through a temporary file and a rename (profiles/editing.py), into the file a user's dotfile link names."""
    from stockade.profiles.editing import replace_text

    replace_text(Path(os.path.realpath(path)), text)
