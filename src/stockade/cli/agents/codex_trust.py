"""Codex runs a hook only once the user has trusted it, by its hash: ask Codex itself.

Codex (0.16x) keeps `[hooks.state."KEY"] trusted_hash = "sha256:..."` in the
user's config.toml, where KEY names the hooks file and the entry's place in it
and the hash covers the entry. An untrusted or changed hook is skipped without
a word, so a freshly installed stockade hook would leave every command
unwrapped. Rather than copy Codex's key and hash rules (which change between
releases), stockade talks to `codex app-server` (JSON-RPC over stdio): it lists
the hooks as Codex sees them and, for `install`, asks Codex to record trust for
exactly the stockade entries it just wrote. Codex edits its own config file
(comments and order kept); stockade never writes config.toml itself.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT = 20.0  # seconds for the whole conversation; app-server answers in well under one
MANUAL_STEP = "start codex, type /hooks and trust the stockade hook"


class CodexTalkError(Exception):
    """Codex could not be asked (not installed, too old for hooks/list, a bad config.toml)."""


@dataclass(frozen=True)
class CodexHook:
    key: str
    command: str
    source_path: str
    current_hash: str
    trust: str  # "trusted" | "untrusted" | "modified" | "managed"


class _AppServer:
    """One `codex app-server` child, spoken to one request at a time."""

    def __init__(self, codex: str, env: dict[str, str], cwd: Path) -> None:
        try:
            self.process = subprocess.Popen(
                [codex, "app-server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as error:
            raise CodexTalkError(f"cannot start {codex} app-server: {error.strerror or error}") from None
        self.deadline = time.monotonic() + TIMEOUT
        self.next_id = 0
        self.pending = b""

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            raise CodexTalkError("codex app-server ended early") from None
        while True:
            message = self._read_message()
            if message.get("id") != self.next_id:
                continue  # a notification
            if "error" in message:
                error = message["error"]
                text = error.get("message") if isinstance(error, dict) else error
                raise CodexTalkError(f"codex app-server refused {method}: {text}")
            return message.get("result")

    def _read_message(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([descriptor], [], [], left)[0]:
                raise CodexTalkError(f"codex app-server did not answer within {TIMEOUT:.0f} s")
            chunk = os.read(descriptor, 65536)
            if not chunk:
                raise CodexTalkError("codex app-server ended early (is ~/.codex/config.toml valid?)")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    def close(self) -> None:
        try:
            if self.process.stdin:
                self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home)}


def _hooks(server: _AppServer, project: Path) -> list[CodexHook]:
    result = server.call("hooks/list", {"cwds": [str(project)]})
    found: list[CodexHook] = []
    for entry in (result or {}).get("data") or []:
        for error in entry.get("errors") or []:
            if isinstance(error, dict):
                raise CodexTalkError(f"codex cannot read {error.get('path')}: {error.get('message')}")
        for hook in entry.get("hooks") or []:
            if isinstance(hook, dict) and hook.get("handlerType") == "command":
                found.append(
                    CodexHook(
                        str(hook.get("key")),
                        str(hook.get("command")),
                        str(hook.get("sourcePath")),
                        str(hook.get("currentHash")),
                        str(hook.get("trustStatus")),
                    )
                )
    return found


def _start(codex: str, home: Path, project: Path) -> _AppServer:
    server = _AppServer(codex, _env(home), project)
    try:
        server.call("initialize", {"clientInfo": {"name": "stockade", "version": "1"}})
    except CodexTalkError:
        server.close()
        raise
    return server


def list_hooks(codex: str, home: Path, project: Path) -> list[CodexHook]:
    """Every command hook Codex sees for `project`, with its trust."""
    server = _start(codex, home, project)
    try:
        return _hooks(server, project)
    finally:
        server.close()


def trust_hooks(codex: str, home: Path, project: Path, ours: set[str], settings_file: Path) -> list[CodexHook]:
    """Record trust for stockade's own entries in `settings_file` (commands in `ours`); returns them as Codex sees them after.

    Only the entries stockade wrote are trusted: another hook in the same file
    keeps whatever trust the user gave it.
    """
    server = _start(codex, home, project)
    try:
        target = os.path.realpath(settings_file)
        mine = [h for h in _hooks(server, project) if h.command in ours and os.path.realpath(h.source_path) == target]
        if not mine:
            raise CodexTalkError(f"codex does not list the hook in {settings_file}")
        untrusted = {h.key: {"trusted_hash": h.current_hash} for h in mine if h.trust != "trusted"}
        if untrusted:
            server.call("config/value/write", {"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": untrusted})
        return [h for h in _hooks(server, project) if h.command in ours and os.path.realpath(h.source_path) == target]
    finally:
        server.close()
