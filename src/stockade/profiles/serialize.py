"""The effective policy as plain data (JSON) and as TOML text, for `check` and `explain`."""

from __future__ import annotations

import json
from typing import Any

from stockade.profiles.credentials import Credential
from stockade.profiles.model import Policy
from stockade.profiles.text import escaped_literal
from stockade.profiles.units import format_duration, format_size


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    limits = policy.limits
    return {
        "origin": policy.origin,
        "sources": list(policy.sources),
        "project_dir": str(policy.project_dir),
        "filesystem": {
            "deny_read": list(policy.filesystem.deny_read),
            "allow_write": list(policy.filesystem.allow_write),
            "deny_write": list(policy.filesystem.deny_write),
            "home": policy.filesystem.home,
            "allow_read": list(policy.filesystem.allow_read),
            "tool_config": policy.filesystem.tool_config,
        },
        "network": {
            "mode": policy.network.mode.value,
            "allow": list(policy.network.allow),
            "deny": list(policy.network.deny),
            "unix_sockets": list(policy.network.unix_sockets),
            "unix_datagram": policy.network.unix_datagram,
            "http": {
                host: {"allow": list(allow), "deny": list(deny), **({"push": list(push[host])} if host in push else {})}
                for host, allow, deny in policy.network.http
                for push in [dict(policy.network.push)]
            },
        },
        "env": {
            "deny": list(policy.env.deny),
            "set": dict(policy.env.set),
            "pass": list(policy.env.passthrough),
        },
        "limits": {
            "memory": limits.memory,
            "pids": limits.pids,
            "wall_time": limits.wall_time,
            "file_size": limits.file_size,
            "tmp_size": limits.tmp_size,
        },
        "audit": {"log": policy.audit.log, "otlp": policy.audit.otlp},
        "checkpoints": {
            "enabled": policy.checkpoints.enabled,
            "max_size": policy.checkpoints.max_size,
            "max_age": policy.checkpoints.max_age,
            "stage": policy.checkpoints.stage,
            "accept": policy.checkpoints.accept,
        },
        "devices": {"gpu": policy.devices.gpu, "gpus": list(policy.devices.gpus)},
        "containers": _containers(policy),
        "credentials": {c.name: _credential(c) for c in policy.credentials},
    }


def _containers(policy: Policy) -> dict[str, Any]:
    rules = policy.containers
    return {"engine": rules.engine, "images": list(rules.images), "keep": rules.keep, "socket": rules.socket}


def _credential(credential: Credential) -> dict[str, Any]:
    """Where a credential's value comes from and where it may go: never the value."""
    where: Any = list(credential.where) if credential.source == "command" else credential.where[0]
    shown: dict[str, Any] = {credential.source: where, "hosts": list(credential.hosts)}
    if credential.header:
        shown["header"] = credential.header
    if credential.query:
        shown["query"] = credential.query
    return shown


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string; what a terminal would obey is a \u escape.
        return escaped_literal(json.dumps(value, ensure_ascii=False), toml=True)
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        return "[\n" + "".join(f"    {_toml_value(v)},\n" for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def policy_to_toml(policy: Policy) -> str:
    """A standalone TOML document equivalent to the effective policy (no extends)."""
    data = policy_to_dict(policy)
    limits = policy.limits
    data["limits"] = {
        "memory": format_size(limits.memory) if limits.memory else None,
        "pids": limits.pids,
        "wall_time": format_duration(limits.wall_time) if limits.wall_time else None,
        "file_size": format_size(limits.file_size) if limits.file_size else None,
        "tmp_size": format_size(limits.tmp_size) if limits.tmp_size else None,
    }
    checkpoints = policy.checkpoints
    data["checkpoints"] = {
        "enabled": checkpoints.enabled,
        "max_size": format_size(checkpoints.max_size),
        "max_age": format_duration(checkpoints.max_age),
        "stage": checkpoints.stage,
        "accept": checkpoints.accept,
    }
    data["devices"] = {"gpu": policy.devices.gpu, "gpus": list(policy.devices.gpus)}
    data["containers"] = _containers(policy)
    out = [f"# effective policy from {policy.origin}", f"# built from: {', '.join(policy.sources)}"]
    http = data["network"].pop("http")
    credentials = data.pop("credentials")
    for table in ("filesystem", "network", "env", "limits", "audit", "checkpoints", "devices", "containers"):
        out.append(f"\n[{table}]")
        for key, value in data[table].items():
            if value is None or value == {} and key != "set":
                continue
            out.append(f"{key} = {_toml_value(value)}")
        if table == "network":
            for host, rules in http.items():
                out.append(f"\n[network.http.{_toml_value(host)}]")
                out += [f"{key} = {_toml_value(value)}" for key, value in rules.items() if value]
    for name, shown in credentials.items():
        out.append(f"\n[credentials.{name}]")
        out += [f"{key} = {_toml_value(value)}" for key, value in shown.items()]
    return "\n".join(out) + "\n"
