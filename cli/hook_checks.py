"""`stockade doctor`'s look at the agents' hooks: each must be able to start.

An agent reads a hook that cannot start (the stockade it names was moved or
uninstalled: exit 127) as a non-blocking error, and runs the command unwrapped
on the host. Nothing says so at the time; doctor does.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from stockade.bwrap.probe import Check
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
                    checks.append(Check(
                        f"{agent} hook", False, f"{path} runs {program}, which is not there: {agent} then runs commands unwrapped",
                        f"stockade install {agent} (again, from the stockade you use now)", required=False,
                    ))
    return checks
