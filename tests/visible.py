"""Test folders the sandbox can see: sandboxed tests keep them out of the private /tmp.

Under pytest's tmp_path (in /tmp) a HOME or an outside folder is hidden inside
the sandbox, so a canary would be unreadable for the wrong reason and a write
would fail with ENOENT instead of meeting the real wall. The runner's own home
is on the read-only root for root and for the unprivileged test user alike.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

VISIBLE_BASE = Path(os.environ.get("STOCKADE_E2E_VISIBLE_ROOT") or Path.home() / ".stockade-e2e")


def visible_root(prefix: str) -> Path:
    """A new, short folder on the sandbox's read-only root."""
    VISIBLE_BASE.mkdir(mode=0o700, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=VISIBLE_BASE))


def force_rmtree(path: Path) -> None:
    """Remove a folder even where a test left subfolders without write or search permission."""
    for folder, subdirs, _files in os.walk(path):
        for name in subdirs:
            target = os.path.join(folder, name)
            if not os.path.islink(target):
                try:
                    os.chmod(target, 0o700)
                except OSError:
                    pass
    shutil.rmtree(path, ignore_errors=True)
