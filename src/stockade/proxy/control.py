"""What the daemon and its clients share: file locations, the session spec, the wire format.

Imported by `stockade run` (through `client`), so it stays standard-library only.

The control protocol is JSON lines over a Unix socket in a 0700 directory.
Each request is one object with an "op"; each reply is one object with
"ok" and either the result or an "error" sentence:

    {"op": "ping"}                          -> {"ok": true, "port": 41234, "pid": 999, "protocol": 2,
                                                "exiting": false, "sessions": 2, "clients": 5, "spliced": 17,
                                                "bodies": 3}
    {"op": "register", "spec": {...}}       -> {"ok": true, "port": ..., "token": "...", "session_id": "..."}
    {"op": "listen", "session_id": "..."}   -> {"ok": true}
        (sent with one listening TCP socket as SCM_RIGHTS, on the connection that registered the
        session: the daemon serves it as that session's door, see proxy/door.py)
    {"op": "end", "session_id": "..."}      -> {"ok": true, "denials": [{...}, ...]}

A session registered on a connection ends when that connection closes, so a
crashed `stockade run` never leaves a session (or a daemon) behind.

`protocol` in the ping reply is what a client checks before using a daemon:
one that answers an older protocol (a daemon left running by an older
stockade) is replaced by a new one, not used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

TYPE_CHECKING = False  # typing's own flag costs every run its import (see core/errors.py)
if TYPE_CHECKING:
    from typing import Any

MAX_LINE = 1 << 20  # a spec with thousands of rules still fits
PROTOCOL = 2  # 2: "listen" (the daemon serves the sandbox's listener itself)
PROXY_USER = "stockade"  # the Basic-auth user name; the password is the session token


@dataclass(frozen=True)
class DaemonFiles:
    """Where one user's daemon keeps its files."""

    runtime: Path  # 0700: control socket, port file, start lock
    state: Path  # daemon log and mitmproxy's private confdir

    @property
    def socket(self) -> Path:
        return self.runtime / "proxy.sock"

    @property
    def port_file(self) -> Path:
        return self.runtime / "proxy.port"

    @property
    def lock(self) -> Path:
        return self.runtime / "proxy.lock"

    @property
    def log(self) -> Path:
        return self.state / "proxy.log"

    @property
    def confdir(self) -> Path:
        return self.state / "mitmproxy"


@dataclass(frozen=True)
class SessionSpec:
    """What a backend tells the daemon about one sandboxed run."""

    session_id: str
    command: list[str]
    cwd: str
    allow: tuple[str, ...] = ()  # canonical rules from profiles.domains
    deny: tuple[str, ...] = ()
    audit_path: str = ""
    origin: str = ""  # the policy file a user edits; named in every hint
    mode: str = "allowlist"  # "allowlist" | "open" | "none"

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "command": list(self.command),
            "cwd": self.cwd,
            "allow": list(self.allow),
            "deny": list(self.deny),
            "audit_path": self.audit_path,
            "origin": self.origin,
            "mode": self.mode,
        }

    @classmethod
    def from_dict(cls, data: object) -> SessionSpec:
        """Validate a spec that came over the socket; ValueError says which field is wrong."""
        if not isinstance(data, dict):
            raise ValueError("spec must be an object")

        def text(name: str, required: bool = True) -> str:
            value = data.get(name, None if required else "")
            if not isinstance(value, str) or (required and not value):
                raise ValueError(f"spec.{name} must be a non-empty string")
            return value

        def strings(name: str) -> list[str]:
            value = data.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"spec.{name} must be a list of strings")
            return value

        return cls(
            session_id=text("session_id"),
            command=strings("command"),
            cwd=text("cwd", required=False),
            allow=tuple(strings("allow")),
            deny=tuple(strings("deny")),
            audit_path=text("audit_path"),
            origin=text("origin", required=False),
            mode=text("mode", required=False) or "allowlist",
        )


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line; ValueError if it is not a JSON object."""
    if len(line) > MAX_LINE:
        raise ValueError("control message too long")
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("control message must be a JSON object")
    return message
