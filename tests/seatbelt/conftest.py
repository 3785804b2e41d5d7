"""Fixtures for the Seatbelt text and supervision tests (they run on any platform)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


@pytest.fixture
def update_golden() -> bool:
    """`STOCKADE_UPDATE_GOLDEN=1 pytest tests/seatbelt` rewrites the golden files."""
    return os.environ.get("STOCKADE_UPDATE_GOLDEN") == "1"


@pytest.fixture
def fake_sandbox_exec(tmp_path: Path) -> Path:
    """Stands in for /usr/bin/sandbox-exec: checks the option shape, then runs the command."""
    script = tmp_path / "fake-sandbox-exec"
    script.write_text(
        "#!/bin/sh\n"
        "while [ $# -gt 0 ]; do\n"
        '  case "$1" in\n'
        "    -p|-D) [ $# -ge 2 ] || exit 64; shift 2 ;;\n"
        '    --) shift; exec "$@" ;;\n'
        '    *) echo "fake sandbox-exec: unexpected $1" >&2; exit 64 ;;\n'
        "  esac\n"
        "done\n"
        'echo "fake sandbox-exec: no command" >&2; exit 64\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script
