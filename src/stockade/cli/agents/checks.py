"""`stockade doctor`'s look at the agents' hooks: each must be able to start.

An agent reads a hook that cannot start (the stockade it names was moved or
uninstalled: exit 127) as a non-blocking error, and runs the command unwrapped
on the host. Nothing says so at the time; doctor does. Codex also skips a
hook the user has not trusted (or that changed since), so doctor asks Codex
how it sees stockade's hooks.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

from stockade.bwrap.parts.probe import Check
from stockade.cli.install import AGENT_SETTINGS, our_hook_commands


def hook_checks(home: Path, project: Path) -> list[Check]:
    """One check per settings file holding a stockade hook whose program is missing."""
    checks: list[Check] = []
    for agent, spec in AGENT_SETTINGS.items():
        places = {home / spec.user_file, project / spec.project_file}
        if spec.local_file:
            places.add(project / spec.local_file)
        for path in sorted(places):
            try:
                settings = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(settings, dict):
                continue
            for command in our_hook_commands(settings, agent):
                program = shlex.split(command)[0]
                if os.path.isfile(program) and os.access(program, os.X_OK):
                    checks.append(Check(f"{agent} hook", True, f"{path}: {program}", required=False))
                else:
                    checks.append(
                        Check(
                            f"{agent} hook",
                            False,
                            f"{path} runs {program}, which is not there: {agent} then runs commands unwrapped",
                            f"stockade install {agent} (again, from the stockade you use now)",
                            required=False,
                        )
                    )
    return checks + codex_trust_checks(home, project) + mcp_checks(home, project)


def mcp_checks(home: Path, project: Path) -> list[Check]:
    """One check per stdio MCP server an agent would start unsandboxed (added after `stockade install`)."""
    from stockade.cli.agents.mcp_config import ours, servers
    from stockade.cli.hook import HookError, stockade_executable
    from stockade.core.errors import UsageError

    try:
        found = servers(home, project)
    except UsageError as error:
        return [Check("MCP servers", False, str(error), "fix the file it names", required=False)]
    try:
        stockade: str | None = stockade_executable()
    except HookError:
        stockade = None
    checks = []
    for server in found:
        if server.remote or "command" not in server.entry or ours(server.entry, server.policy, stockade):
            continue
        how = "looks wrapped but runs another program or policy" if server.wrapped else "starts it on the host with your whole home and network"
        checks.append(
            Check(
                f"{server.place.agent} MCP server {server.name}",
                False,
                f"{server.place.label} {how}: {server.shown}",
                f"stockade mcp wrap {server.place.agent}",
                required=False,
            )
        )
    return checks


def codex_trust_checks(home: Path, project: Path) -> list[Check]:
    """One check per stockade hook Codex lists, failing unless Codex trusts it; none without codex."""
    codex = shutil.which("codex")
    if codex is None or not any((folder / ".codex" / "hooks.json").is_file() for folder in (home, project)):
        return []
    from stockade.cli.agents.codex_trust import MANUAL_STEP, CodexTalkError, list_hooks
    from stockade.cli.install import is_ours

    try:
        hooks = [hook for hook in list_hooks(codex, home, project) if is_ours(hook.command, "codex")]
    except CodexTalkError as error:
        return [Check("codex hook trust", False, str(error), "stockade install codex", required=False)]
    checks = []
    for hook in hooks:
        if hook.trust in ("trusted", "managed"):
            checks.append(Check("codex hook trust", True, f"{hook.source_path}: {hook.trust}", required=False))
        else:
            checks.append(
                Check(
                    "codex hook trust",
                    False,
                    f"{hook.source_path}: Codex reports the hook {hook.trust}, so it skips it and runs commands unwrapped",
                    f"stockade install codex (it asks Codex to trust the hook), or {MANUAL_STEP}",
                    required=False,
                )
            )
    return checks
