"""`stockade doctor`: can this machine sandbox, and if not, how to fix it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from rich.table import Table

from stockade.cli.console import stdout
from stockade.core.errors import ExitCode


def _checks() -> list:
    if sys.platform == "darwin":
        from stockade.bwrap.parts.probe import Check, check_folders

        exists = os.access("/usr/bin/sandbox-exec", os.X_OK)
        return [
            Check(
                "sandbox-exec",
                exists,
                "/usr/bin/sandbox-exec" if exists else "not found",
                "" if exists else "sandbox-exec ships with macOS; check that /usr/bin is intact",
            ),
            check_folders(),
            *_baseline(),
            *_agent_hooks(),
        ]
    from stockade.bwrap.parts.probe import linux_checks

    return [*linux_checks(), *_baseline(), *_containers(), *_agent_hooks()]


def _baseline() -> list:
    """The administrator's baseline (profiles/baseline.py): whether there is one, and whether it reads."""
    from stockade.bwrap.parts.probe import Check
    from stockade.core.errors import PolicyError
    from stockade.core.locations import locate
    from stockade.profiles import baseline

    locations = locate()
    try:
        found = baseline.load(os.environ, locations.state, Path.cwd(), locations.home)
    except PolicyError as exc:
        return [Check("system baseline", False, str(exc), "ask your administrator: no run starts until it reads")]
    if found is None:
        return [Check("system baseline", True, f"none ({baseline.SYSTEM_FILE} is not there): your own policies are the widest", required=False)]
    required = "; required" if found.required else ""
    return [Check("system baseline", True, f"{', '.join(found.files)}{required}: every policy is narrowed by it")]


def _containers() -> list:
    """The engine this folder's policy names ([containers]), when it names one: whether it answers there."""
    from stockade.bwrap.parts.probe import Check
    from stockade.cli.selection import select
    from stockade.containers.engines import engine_socket
    from stockade.core.errors import StockadeError

    try:
        rules = select().policy.containers
    except StockadeError:
        return []  # the policy's own trouble is said by `stockade check`
    if rules.engine == "none":
        return []
    socket = engine_socket(rules.engine, rules.socket, os.environ)
    answers = _engine_answers(socket)
    fix = "" if answers else "start it (systemctl start docker, or podman system service), or set [containers] socket"
    return [Check("container engine", answers, f"{rules.engine} at {socket}" + ("" if answers else ": not answering"), fix, required=False)]


def _engine_answers(path: str) -> bool:
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as engine:
            engine.settimeout(3)
            engine.connect(path)
            engine.sendall(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n")
            return engine.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _agent_hooks() -> list:
    from stockade.cli.agents.checks import hook_checks
    from stockade.core.locations import locate

    return hook_checks(Path(locate().home), Path.cwd())


def doctor() -> None:
    checks = _checks()
    table = Table(show_header=True, header_style="bold")
    for column in ("check", "status", "detail", "how to fix"):
        table.add_column(column)
    for check in checks:
        status = "ok" if check.ok else ("FAIL" if check.required else "warn")
        table.add_row(check.name, status, check.detail, check.fix if not check.ok or not check.required else "")
    stdout().print(table)
    failed = [c for c in checks if c.required and not c.ok]
    if failed:
        print(f"stockade: {len(failed)} check(s) failed: sandboxing will not work until fixed", file=sys.stderr)
        raise typer.Exit(ExitCode.SETUP)
    print("stockade: this machine can sandbox")
