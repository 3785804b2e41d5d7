"""Merge layers into one `Policy`: lists union, later scalars win, deny beats allow later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stockade.profiles.loader import Layer
from stockade.profiles.model import (
    AuditRules,
    EnvRules,
    FilesystemRules,
    Limits,
    NetworkMode,
    NetworkRules,
    Policy,
)
from stockade.profiles.schema import LIST_KINDS, TABLES, Kind


def merge_values(layers: list[Layer]) -> dict[str, dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for table, content in layer.values.items():
            target = merged.setdefault(table, {})
            for key, value in content.items():
                kind = TABLES[table][key]
                if kind in LIST_KINDS:
                    target[key] = tuple(dict.fromkeys((*target.get(key, ()), *value)))
                elif kind is Kind.ENV_TABLE:
                    target[key] = {**target.get(key, {}), **value}
                else:
                    target[key] = value
    return merged


def compose(layers: list[Layer], *, project_dir: Path, origin: str) -> Policy:
    """Build the effective policy from layers given in load order (extended first)."""
    values = merge_values(layers)
    fs = values.get("filesystem", {})
    net = values.get("network", {})
    env = values.get("env", {})
    limits = values.get("limits", {})
    audit = values.get("audit", {})
    allow = net.get("allow", ())
    mode = net.get("mode", NetworkMode.ALLOWLIST if allow else NetworkMode.NONE)
    return Policy(
        filesystem=FilesystemRules(
            deny_read=fs.get("deny_read", ()),
            allow_write=fs.get("allow_write", ()),
            deny_write=fs.get("deny_write", ()),
            home=fs.get("home", "private"),
            allow_read=fs.get("allow_read", ()),
        ),
        network=NetworkRules(
            mode=mode,
            allow=allow,
            deny=net.get("deny", ()),
            unix_sockets=net.get("unix_sockets", ()),
        ),
        env=EnvRules(
            deny=env.get("deny", ()),
            set=tuple(sorted(env.get("set", {}).items())),
            passthrough=env.get("pass", ()),
        ),
        limits=Limits(**limits),
        audit=AuditRules(log=audit.get("log")),
        project_dir=project_dir,
        origin=origin,
        sources=tuple(layer.source for layer in layers),
        protected_files=tuple(dict.fromkeys(l.source for l in layers if not l.is_builtin)),
    )
