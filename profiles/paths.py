"""Path spelling rules of the policy language: `~`, relative paths, globs, no `..`."""

from __future__ import annotations

import os
from pathlib import Path

GLOB_CHARS = frozenset("*?[")


def is_glob(path: str) -> bool:
    return any(ch in GLOB_CHARS for ch in path)


def normalise_path(text: str, *, base: Path, home: Path, allow_glob: bool) -> str:
    """Absolute, `..`-free spelling of a policy path; ValueError says how to fix it.

    Symlinks are not resolved here: that happens at sandbox start, where the
    backend can check each component safely.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty path")
    if "\0" in text or "\n" in text:
        raise ValueError(f"path {text!r} contains a NUL or newline character")
    raw = text.strip()
    if raw == "~" or raw.startswith("~/"):
        raw = str(home) + raw[1:]
    elif raw.startswith("~"):
        raise ValueError(f"path {text!r}: only '~' and '~/...' are supported, not '~user'")
    parts = Path(raw).parts
    if ".." in parts:
        raise ValueError(f"path {text!r} climbs with '..': write the real path it means instead")
    if is_glob(raw) and not allow_glob:
        raise ValueError(f"path {text!r}: globs are only allowed in deny_read and deny_write")
    absolute = raw if os.path.isabs(raw) else str(base / raw)
    return os.path.normpath(absolute).replace("//", "/")


def is_within(path: str, root: str) -> bool:
    """True when `path` is `root` or lies below it (plain string logic, no symlinks)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"
