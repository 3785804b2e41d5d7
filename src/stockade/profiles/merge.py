"""Merge layers into one `Policy`: lists union, later scalars win, deny beats allow later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stockade.profiles import anywhere
from stockade.profiles.credentials import Credential
from stockade.profiles.loader import Layer
from stockade.profiles.model import (
    AuditRules,
    CheckpointRules,
    ContainerRules,
    DeviceRules,
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
            if table == "credentials":
                target.update(content)  # a later file's credential of the same name replaces the earlier one whole
                continue
            for key, value in content.items():
                kind = TABLES[table][key]
                if kind in LIST_KINDS:
                    target[key] = tuple(dict.fromkeys((*target.get(key, ()), *value)))
                elif kind is Kind.ENV_TABLE:
                    target[key] = {**target.get(key, {}), **value}
                elif kind is Kind.HTTP_TABLES:
                    target[key] = merge_http(target.get(key, {}), value)
                else:
                    target[key] = value
    return merged


def compose(layers: list[Layer], *, project_dir: Path, origin: str) -> Policy:
    """Build the effective policy from layers given in load order (extended first)."""
    values = merge_values(layers)
    fs = values.get("filesystem", {})
    _refuse_writable_inside_hidden(layers, fs.get("allow_write", ()), fs.get("deny_read", ()))
    writable, shown = _opened_by_user(layers, "allow_write"), _opened_by_user(layers, "allow_read")
    project = str(project_dir)
    net = values.get("network", {})
    env = values.get("env", {})
    limits = values.get("limits", {})
    audit = values.get("audit", {})
    credentials = tuple(credential for _name, credential in sorted(values.get("credentials", {}).items()))
    allow = net.get("allow", ())
    mode = net.get("mode", NetworkMode.ALLOWLIST if allow else NetworkMode.NONE)
    _refuse_credential_conflicts(layers, credentials, env)
    hidden_sources = tuple(c.where[0] for c in credentials if c.source == "file")  # a credential's file is never readable inside
    return Policy(
        filesystem=FilesystemRules(
            deny_read=anywhere.spread(tuple(dict.fromkeys((*fs.get("deny_read", ()), *hidden_sources))), project, (*writable, *shown)),
            allow_write=fs.get("allow_write", ()),
            deny_write=anywhere.spread(fs.get("deny_write", ()), project, writable),
            home=fs.get("home", "private"),
            allow_read=fs.get("allow_read", ()),
            tool_config=fs.get("tool_config", True),
        ),
        network=NetworkRules(
            mode=mode,
            allow=allow,
            deny=net.get("deny", ()),
            unix_sockets=net.get("unix_sockets", ()),
            unix_datagram=net.get("unix_datagram", False),
            http=tuple((host, allow_rules, deny_rules) for host, (allow_rules, deny_rules, _push) in sorted(net.get("http", {}).items())),
            push=tuple((host, push) for host, (_allow, _deny, push) in sorted(net.get("http", {}).items()) if push),
        ),
        env=EnvRules(
            deny=tuple(dict.fromkeys((*env.get("deny", ()), *(c.where[0] for c in credentials if c.source == "env")))),
            set=tuple(sorted(env.get("set", {}).items())),
            passthrough=env.get("pass", ()),
        ),
        limits=Limits(**limits),
        audit=AuditRules(log=audit.get("log"), otlp=audit.get("otlp")),
        checkpoints=CheckpointRules(**values.get("checkpoints", {})),
        devices=DeviceRules(**values.get("devices", {})),
        containers=ContainerRules(**values.get("containers", {})),
        credentials=credentials,
        project_dir=project_dir,
        origin=origin,
        sources=tuple(layer.source for layer in layers),
        protected_files=tuple(dict.fromkeys(layer.source for layer in layers if not layer.is_builtin)),
    )


HttpValues = dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]  # host: (allow, deny, push)


def merge_http(base: HttpValues, more: HttpValues) -> HttpValues:
    """Two layers' HTTP rules: per host, the union of each list (a later layer's deny still wins over any allow)."""
    merged = dict(base)
    for host, lists in more.items():
        known = merged.get(host, ((), (), ()))
        merged[host] = tuple(tuple(dict.fromkeys((*old, *new))) for old, new in zip(known, lists, strict=True))  # type: ignore[assignment]
    return merged


def _refuse_credential_conflicts(layers: list[Layer], credentials: tuple[Credential, ...], env: dict[str, Any]) -> None:
    """A credential's value must not reach the sandbox another way: not through `[env] pass` of the
    variable it comes from, and its own name is not also set by `[env] set`."""
    from stockade.core.errors import PolicyError

    passed = env.get("pass", ())
    for credential in credentials:
        if credential.source == "env" and credential.where[0] in passed:
            layer = next((one for one in reversed(layers) if credential.where[0] in one.values.get("env", {}).get("pass", ())), None)
            origin = layer.source if layer is not None else credential.origin
            raise PolicyError(
                f"[credentials.{credential.name}] comes from the variable {credential.where[0]}, which [env] pass lets into the sandbox: "
                "remove it from pass (the sandbox gets a placeholder in its place)",
                file=_file_of(layers, origin), line=_key_line_of(layers, origin, "env", "pass"),
            )  # fmt: skip
        if credential.name in env.get("set", {}):
            raise PolicyError(
                f"[credentials.{credential.name}] and [env] set both give the variable {credential.name}: keep one",
                file=_file_of(layers, credential.origin), line=_key_line_of(layers, credential.origin, f"credentials.{credential.name}", None),
            )  # fmt: skip


def _file_of(layers: list[Layer], source: str) -> str | None:
    return source if any(layer.source == source and not layer.is_builtin for layer in layers) else None


def _key_line_of(layers: list[Layer], source: str, table: str, key: str | None) -> int | None:
    from stockade.profiles.toml_lines import KeyLines

    layer = next((one for one in layers if one.source == source and not one.is_builtin), None)
    if layer is None:
        return None
    lines = KeyLines(layer.text)
    return (lines.key(table, key) if key else None) or lines.table(table)


def _opened_by_user(layers: list[Layer], key: str) -> list[str]:
    """The `key` places a file of the user's lists (not only a built-in profile): see anywhere.py."""
    return [place for layer in layers if not layer.is_builtin for place in layer.values.get("filesystem", {}).get(key, ())]


def _refuse_writable_inside_hidden(layers: list[Layer], allow_write: tuple[str, ...], deny_read: tuple[str, ...]) -> None:
    """A place both hidden and writable is a policy error naming the allow_write entry, never a
    setup failure. A deny_read place inside a writable one, and a writable place inside a hidden
    one (srt's carve-out: a hidden `data` whose `out` stays writable), are fine."""
    from stockade.core.errors import PolicyError
    from stockade.profiles.paths import is_glob

    hidden = [d for d in deny_read if not is_glob(d)]
    for place in allow_write:
        inside = next((d for d in hidden if d.rstrip("/") == place.rstrip("/")), None)  # one place both hidden and writable
        if inside is None:
            continue
        layer = next((one for one in reversed(layers) if place in one.values.get("filesystem", {}).get("allow_write", ())), None)
        mine = layer is not None and not layer.is_builtin
        where = layer.source if layer is not None and mine else None
        line = _key_line(layer, "filesystem", "allow_write") if layer is not None and mine else None
        raise PolicyError(
            f"allow_write {place} is also deny_read: a place cannot be both hidden and writable; "
            "remove one of the two (a writable place inside a hidden folder is fine)",
            file=where, line=line,
        )  # fmt: skip


def _key_line(layer: Layer, table: str, key: str) -> int | None:
    from stockade.profiles.toml_lines import KeyLines

    return KeyLines(layer.text).key(table, key)
