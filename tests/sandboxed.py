"""Whether real sandboxes can run here, for the suites that need them: skip with the reason,
or fail under STOCKADE_MUST_SANDBOX=1 (CI), where a skipped sandbox test would prove nothing."""

from __future__ import annotations

import os
import subprocess

import pytest

MUST_SANDBOX = os.environ.get("STOCKADE_MUST_SANDBOX") == "1"


def sandbox_unavailable() -> str | None:
    """None when bwrap can create namespaces here, else why not."""
    for candidate in ("/usr/bin/bwrap", "/usr/local/bin/bwrap"):
        if os.access(candidate, os.X_OK):
            break
    else:
        return "bwrap is not installed"
    result = subprocess.run(
        [candidate, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "true"],
        capture_output=True,
        text=True,
    )
    return None if result.returncode == 0 else f"bwrap cannot create namespaces: {result.stderr.strip()}"


def require_sandbox() -> None:
    reason = sandbox_unavailable()
    if reason is None:
        return
    if MUST_SANDBOX:
        pytest.fail(f"STOCKADE_MUST_SANDBOX=1 but {reason}")
    pytest.skip(reason)
