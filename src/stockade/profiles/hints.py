"""The one way every denial says how to allow it: a `stockade allow` command to paste.

A hint used to be a TOML line (`allow = ["pypi.org"]`) "to add under [network]
in builtin:pypi": not a file anyone can edit, and, where an allow list already
existed, a second `allow =` that made the file invalid. `stockade allow`
(cli/allow.py) adds the host to the right list instead, so the hint is a
command that works as written: in the 403 body, the run's summary, the CI
summary and `stockade audit`.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex

_LINE = re.compile(r'^allow = \[(".*")\]$')


def rule_of(hint: str) -> str | None:
    """The host rule in a hint line (`allow = ["pypi.org:8443"]`), or None."""
    match = _LINE.match(hint.strip())
    if not match:
        return None
    try:
        rule = json.loads(match.group(1))
    except ValueError:
        return None
    return rule if isinstance(rule, str) else None


_HTTP_LINE = re.compile(r'^\[network\.http\.(".*")\] (allow|push) = \[(".*")\]$')


def http_entry(hint: str) -> tuple[str, str, str] | None:
    """An HTTP rule's hint (`[network.http."HOST"] allow = ["GET /x"]`, or `push = ["refs/heads/x"]`
    for a git push) as (host, key, rule); None for any other hint."""
    match = _HTTP_LINE.match(hint.strip())
    if not match:
        return None
    try:
        host, key, rule = json.loads(match.group(1)), match.group(2), json.loads(match.group(3))
    except ValueError:
        return None
    if not all(isinstance(part, str) for part in (host, rule)):
        return None
    return host, key, rule


def http_fix(hint: str, where: str) -> str | None:
    """For an HTTP rule's hint: the sentence saying which entry to add to which table; None for any other hint."""
    entry = http_entry(hint)
    if entry is None:
        return None
    host, key, rule = entry
    return f'to allow it, add "{rule}" to {key} under [network.http."{host}"] in {where}'


def after_allow(origin: str) -> str:
    """What a `--profile NAME` run must do after `stockade allow ... --profile NAME`: that writes the
    project's .stockade.toml extending NAME, which a `--profile` run does not read."""
    name = origin.removeprefix("builtin:") if origin.startswith("builtin:") else "default"
    if name == "default":
        return ""
    return f" (it writes .stockade.toml extending {name}; then run without --profile, which reads that file)"


def allow_command(hint: str, origin: str) -> str:
    """`stockade allow RULE` for the policy the run used: `--policy FILE` for a file,
    `--profile NAME` for a built-in other than the default; "" when the hint names no rule.
    When the file already lists the rule, it was refused because the file is not trusted (a
    project's file narrows your policy until then): `stockade trust FILE` is what allows it."""
    rule = rule_of(hint)
    if rule is None:
        return ""
    if origin and not origin.startswith("builtin:") and listed_in(origin, rule):
        return shlex.join(["stockade", "trust", origin])
    words = ["stockade", "allow", rule]
    if origin.startswith("builtin:"):
        name = origin.removeprefix("builtin:")
        if name != "default":
            words += ["--profile", name]
    elif origin and _mcp_server_of(origin):
        words += ["--mcp", _mcp_server_of(origin)]
    elif origin:
        words += ["--policy", origin]
    return shlex.join(words)


def _mcp_server_of(origin: str) -> str:
    """The MCP server whose own policy file `origin` is (~/.config/stockade/mcp/NAME.toml), or ""."""
    folder, name = os.path.split(origin)
    if os.path.basename(folder) == "mcp" and os.path.basename(os.path.dirname(folder)) == "stockade" and name.endswith(".toml"):
        return name[: -len(".toml")]
    return ""


def listed_in(path: str, rule: str) -> bool:
    """Whether the policy file at `path` lists `rule` in its own [network] allow (not its chain's)."""
    return rule in own_allow(path)


def own_mode(path: str) -> str | None:
    """The policy file's own [network] mode; None when it sets none or cannot be read."""
    mode = _own_network(path).get("mode")
    return mode if isinstance(mode, str) else None


def own_allow(path: str) -> tuple[str, ...]:
    """The policy file's own [network] allow entries; () when it has none or cannot be read."""
    allow = _own_network(path).get("allow")
    return tuple(entry for entry in allow if isinstance(entry, str)) if isinstance(allow, list) else ()


def _own_network(path: str) -> dict[str, object]:
    """The file's own [network] table; {} when it has none or cannot be read."""
    import os

    try:
        info = os.stat(path)
    except OSError:
        return {}
    return _network_table(path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=8)
def _network_table(path: str, _mtime: int, _size: int) -> dict[str, object]:
    """Read once per version of the file (size and time say which)."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            network = tomllib.load(handle).get("network")
    except (OSError, ValueError):
        return {}
    return network if isinstance(network, dict) else {}
