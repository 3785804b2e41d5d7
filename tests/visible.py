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


def visible_packages(root: Path, *names: str) -> Path:
    """A copy, under `root`, of pure-Python packages of the interpreter running the tests (pytest,
    pip), for Debian's /usr/bin/python3 to import through PYTHONPATH inside the sandbox: the test
    venv itself may live where the sandbox has a private folder (/var/tmp, for the unprivileged run)."""
    import importlib.util

    target = root / "pylib"
    target.mkdir(exist_ok=True)
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise LookupError(f"{name} is not installed in the test environment")
        source = Path(spec.origin)
        if source.name == "__init__.py":
            shutil.copytree(source.parent, target / name, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        else:
            shutil.copy2(source, target / source.name)
    return target
