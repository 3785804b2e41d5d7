"""doctor warns when an installed agent hook names a stockade that is not there (the agent would run commands unwrapped)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stockade.cli.agents.checks import hook_checks


def _settings(path: Path, program: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    hook = {"type": "command", "command": f"{program} hook claude"}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}}))


def test_a_hook_whose_program_is_gone_is_a_warning(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    _settings(home / ".claude" / "settings.json", str(tmp_path / "moved" / "stockade"))
    (found,) = hook_checks(home, project)
    assert not found.ok and not found.required and "runs commands unwrapped" in found.detail
    assert found.fix.startswith("stockade install claude")


def test_a_hook_that_can_start_is_ok(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    program = tmp_path / "bin" / "stockade"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    os.chmod(program, 0o755)
    _settings(project / ".claude" / "settings.local.json", str(program))
    (found,) = hook_checks(home, project)
    assert found.ok


def test_no_settings_no_checks(tmp_path: Path) -> None:
    assert hook_checks(tmp_path / "home", tmp_path / "project") == []
