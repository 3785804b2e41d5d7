"""`stockade explain`: what the effective policy allows and denies, in plain words."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from stockade.cli.console import stdout
from stockade.cli.selection import select
from stockade.core.locations import locate
from stockade.profiles.envfilter import withheld
from stockade.profiles.floor import floor_for, floor_summary
from stockade.profiles.model import NetworkMode, Policy
from stockade.profiles.openings import open_ends
from stockade.profiles.paths import below_home
from stockade.profiles.resolve import baseline_note, untrusted_note
from stockade.profiles.serialize import policy_to_dict
from stockade.profiles.text import escaped_literal
from stockade.profiles.units import format_duration, format_size


def explanation(policy: Policy) -> dict[str, Any]:
    locations = locate()
    floor = floor_for(policy.filesystem.allow_write, locations, policy.protected_files)
    return {
        "policy": policy_to_dict(policy),
        "floor": {"rules": floor_summary(), "read_only": list(floor.read_only), "hidden": list(floor.hidden)},
        "env_withheld": withheld(os.environ, policy.env),
        "syscalls_refused": _syscalls(policy),
    }


def _syscalls(policy: Policy) -> list[str]:
    """The seccomp filter's refusals in words (Linux); plain data, no libseccomp needed."""
    if sys.platform != "linux":
        return []
    from stockade.bwrap.parts.seccomp import describe_rules

    return describe_rules(allow_unix=policy.network.unix_datagram)


def _short(path: str, policy: Policy, home: str) -> str:
    """Paths as a person writes them: ./ for the project, ~/ for home."""
    project = str(policy.project_dir).rstrip("/")
    if path == project:
        return ". (the project)"
    if path.startswith(project + "/"):
        return "./" + path[len(project) + 1 :]
    if path == home or path.startswith(home + "/"):
        return "~" + path[len(home) :]
    return path


def _listing(paths: list[str] | tuple[str, ...], policy: Policy, home: str) -> str:
    return ", ".join(_short(p, policy, home) for p in paths)


def _home_words(policy: Policy, home: str) -> str:
    """What the sandbox's home is (bwrap/parts/private_home.py)."""
    if policy.filesystem.home == "host":
        return "the real one, read-only outside writable places"
    shown = _listing(policy.filesystem.allow_read, policy, home)
    return (
        "its own, empty and writable, gone after the run; shows read-only the project, the PATH's folders"
        + (f" and {shown}" if shown else "")
        + (" (macOS: the real one, read-only)" if sys.platform == "darwin" else "")
    )


def _tool_config(policy: Policy, home: str) -> dict[str, Any]:
    """What a run shows of the user's tool configuration now (profiles/toolconfig.py): never a value."""
    if not policy.filesystem.tool_config or sys.platform == "darwin":
        return {"shown": [], "hidden": [], "enabled": False}
    from stockade.profiles.toolconfig import policy_files, read

    view = read(policy_files(policy, home))
    shown = [{"path": s.path, "tools": s.tools, "secrets": s.secrets, "withheld": s.withheld} for s in view.shown]
    return {"shown": shown, "hidden": [{"path": path, "why": why} for path, why in view.hidden], "enabled": True}


def _tool_config_words(tools: dict[str, Any], policy: Policy, home: str) -> str:
    if not tools["enabled"]:
        reason = "on macOS the deny list keeps them hidden" if sys.platform == "darwin" else "tool_config = false: hidden as the deny list says"
        return f"not shown ({reason})"
    parts = []
    for shown in tools["shown"]:
        secrets = f"; secrets replaced: {'; '.join(shown['secrets'])}" if shown["secrets"] else ""
        withheld = f"; withheld: {'; '.join(shown['withheld'])}" if shown["withheld"] else ""
        parts.append(f"{_short(shown['path'], policy, home)} ({shown['tools']}{secrets}{withheld})")
    parts += [f"{_short(hidden['path'], policy, home)} hidden: {hidden['why']}" for hidden in tools["hidden"]]
    return " | ".join(parts) or "none of the files stockade knows is in your home"


def _absent_write_places(policy: Policy, home: str) -> str:
    """What a run does with allow_write folders that do not exist (bwrap.plan.mounts.make_write_places)."""
    words = []
    for entry in policy.filesystem.allow_write:
        if not os.path.lexists(entry):
            made = below_home(entry, home)
            words.append(f"{_short(entry, policy, home)} ({'made, 0700, before the run' if made else 'outside your home: skipped'})")
    return ", ".join(words)


def _network_words(policy: Policy) -> str:
    net = policy.network
    if net.mode is NetworkMode.NONE:
        return "off: no connection can leave the sandbox"
    if net.mode is NetworkMode.OPEN:
        extra = f", except {', '.join(net.deny)}" if net.deny else ""
        return f"open to any public host through the audited proxy{extra}"
    if not net.allow:
        return "allowlist with nothing on it: every connection is refused"
    return f"only {', '.join(net.allow)} through the audited proxy" + (f"; never {', '.join(net.deny)}" if net.deny else "")


def _network_detail_rows(policy: Policy) -> list[tuple[str, str]]:
    """What the daemon does beyond host rules: requests judged, TLS it decrypts, credentials, ssh."""
    net = policy.network
    if net.mode is NetworkMode.NONE:
        return []
    rows = []
    if net.http:
        tables = []
        for host, allow, deny in net.http:
            allowed = f"allow {', '.join(allow)}" if allow else "allow nothing"
            tables.append(f"{host}: {allowed}" + (f"; deny {', '.join(deny)}" if deny else ""))
        rows.append(("HTTP requests judged", " | ".join(tables)))
    if policy.terminated_hosts:
        hosts = ", ".join(policy.terminated_hosts)
        rows.append(("TLS decrypted by the daemon", f"{hosts} (with your own CA; every other host's TLS passes untouched)"))
    for credential in policy.credentials:
        rows.append(
            (
                f"credential {credential.name}",
                f"read outside at each run ({credential.described()}); inside, a placeholder; the value is sent only to "
                f"{', '.join(credential.hosts)}, in {credential.places()}",
            )
        )
    ssh = _ssh_endpoints(policy)
    if ssh:
        rows.append(("ssh (raw TCP)", f"{', '.join(ssh)}: SSH only, checked on its first bytes; keys stay hidden unless an agent socket is listed"))
    return rows


def _ssh_endpoints(policy: Policy) -> list[str]:
    """The allow entries that let ssh through (sshroute.raw_tcp_rules), less hosts with HTTP rules or credentials."""
    from stockade.profiles.domains import overlaps, parse_rule
    from stockade.proxy.client.sshroute import raw_tcp_rules

    special = [parse_rule(host) for host in policy.terminated_hosts]
    return [str(rule) for rule in raw_tcp_rules(policy.network.allow) if not any(overlaps(rule, other) for other in special)]


def _limits_words(policy: Policy) -> str:
    limits = policy.limits
    parts = [
        f"memory {format_size(limits.memory)}" if limits.memory else "",
        f"{limits.pids} processes" if limits.pids else "",
        f"wall time {format_duration(limits.wall_time)}" if limits.wall_time else "",
        f"file size {format_size(limits.file_size)}" if limits.file_size else "",
        f"/tmp {format_size(limits.tmp_size)}" if limits.tmp_size else "",
    ]
    return ", ".join(p for p in parts if p) or "none set"


def _device_words(policy: Policy) -> str:
    rules = policy.devices
    if not rules.gpu:
        return "none of the host's: /dev holds only null, zero, random, tty and the like"
    which = f"GPUs {', '.join(rules.gpus)}" if rules.gpus else "every GPU"
    import sys

    if not sys.platform.startswith("linux"):
        return f"{which}: not built on macOS yet (no device is added)"
    from stockade.bwrap.parts.devices import gpu_nodes

    nodes = gpu_nodes(rules.gpus)
    return f"{which}: " + (", ".join(nodes) if nodes else "this machine has no GPU device nodes, so none")


def _container_words(policy: Policy) -> str:
    rules = policy.containers
    if rules.engine == "none":
        return "no engine: the host's engine socket is hidden ([containers] engine gives one through a gate)"
    import os
    import sys

    if not sys.platform.startswith("linux"):
        return f"{rules.engine}: not built on macOS yet (no engine socket inside)"
    from stockade.containers.engines import engine_socket

    socket = engine_socket(rules.engine, rules.socket, os.environ)
    state = "" if os.path.exists(socket) else " (nothing listens there now)"
    images = ", ".join(rules.images) or "none (every pull and create is refused)"
    network = "the sandbox's own network" if rules.engine == "podman" else "no network"
    kept = "kept after the run" if rules.keep else "removed when the run ends"
    return (
        f"{rules.engine} at {socket}{state}, through a gate at /run/docker.sock: no privileges, host folders or host namespaces; "
        f"{network}; images {images}; what the run makes is {kept}"
    )


def _checkpoint_words(policy: Policy) -> str:
    rules = policy.checkpoints
    if not rules.enabled:
        return "off: runs keep no checkpoint ([checkpoints] enabled = false)"
    words = (
        f"every run keeps what it changes, up to {format_size(rules.max_size)} for the project, for {format_duration(rules.max_age)}: "
        "`stockade undo` puts the last run's back"
    )
    if rules.stage:
        words += "; the project's changes are staged: `stockade review` shows them, `stockade accept` applies them" + (
            " (all but files that run code later are applied at once)" if rules.accept == "unmarked" else ""
        )
    return words


def explain(
    policy: Annotated[Path | None, typer.Option("--policy", "-p", help="Explain this policy file.")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Explain a built-in profile.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    resolution = select(policy, profile)
    data = explanation(resolution.policy)
    data["tool_config"] = _tool_config(resolution.policy, str(locate().home))
    if as_json:
        data["trusted"] = resolution.trusted
        data["ignored"] = list(resolution.dropped)
        data["baseline"] = {"files": list(resolution.baseline), "narrowed": list(resolution.bounded)}
        print(escaped_literal(json.dumps(data, indent=2, ensure_ascii=False)))
        return
    p = resolution.policy
    console = stdout()
    console.print(f"Policy: {p.origin}" + ("" if resolution.trusted else " (untrusted: narrowing only)"))
    if resolution.baseline:
        console.print(f"Within the system baseline: {', '.join(resolution.baseline)} (the administrator's; no policy widens it)", soft_wrap=True)
    for note in (untrusted_note(resolution), baseline_note(resolution)):
        if note:
            console.print(note, soft_wrap=True)  # one line: it ends with a command to paste
    home = str(locate().home)
    for line in open_ends(p, home):
        console.print(f"Note: {line}")
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("what", no_wrap=True)
    table.add_column("rule", overflow="fold")
    rows = [
        ("writable", _listing(p.filesystem.allow_write, p, home) or "nothing but a private /tmp"),
        ("writable, not there yet", _absent_write_places(p, home) or "-"),
        ("read-only inside writable places", _listing((*p.filesystem.deny_write, *data["floor"]["read_only"]), p, home) or "-"),
        ("unreadable", _listing((*p.filesystem.deny_read, *data["floor"]["hidden"]), p, home)),
        ("home", _home_words(p, home)),
        ("tools' own settings", _tool_config_words(data["tool_config"], p, home)),
        ("everything else", "readable, not writable"),
        ("network", _network_words(p)),
        *_network_detail_rows(p),
        ("unix sockets", _listing(p.network.unix_sockets, p, home) or "none of the host's (the sandbox may make stream sockets of its own)"),
        (
            "environment withheld",
            ", ".join(data["env_withheld"]) or "none of this shell's; names like *_TOKEN, *SECRET*, *PASSWORD*, AWS_* never pass",
        ),
        ("environment set", ", ".join(f"{k}={v}" for k, v in p.env.set) or "-"),
        ("limits", _limits_words(p)),
        ("undo", _checkpoint_words(p)),
        ("devices", _device_words(p)),
        ("containers", _container_words(p)),
    ]
    for what, rule in rows:
        table.add_row(what, rule)
    console.print(table)
    console.print("Always, whatever the policy says:")
    for line in data["floor"]["rules"]:
        console.print(f"  - {line}")
    if data["syscalls_refused"]:
        console.print("The kernel calls the sandbox's filter refuses:")
        for line in data["syscalls_refused"]:
            console.print(f"  - {line}")
