"""Path spelling rules of the policy language: `~`, relative paths, globs, no `..`."""

from __future__ import annotations

import os
import re
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
    if "*" in raw and not allow_glob:  # '?' and '[' are ordinary characters in such paths
        raise ValueError(f"path {text!r}: globs are only allowed in deny_read and deny_write")
    absolute = raw if os.path.isabs(raw) else str(base / raw)
    return os.path.normpath(absolute).replace("//", "/")


def is_within(path: str, root: str) -> bool:
    """True when `path` is `root` or lies below it (plain string logic, no symlinks)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


def below_home(path: str, home: str) -> bool:
    """Strictly inside the user's home, spelled through it or through its real path: where a
    run makes a missing allow_write folder before it starts (bwrap.plan.mounts.make_write_places)."""
    real_home = os.path.realpath(home)
    if os.path.realpath(path) == real_home:
        return False
    return is_within(path, home) or is_within(os.path.realpath(path), real_home)


_GLOB_TOKEN = re.compile(r"(\*\*/|\*\*|\*|\?|\[[^\]]+\])")


def glob_to_regex(pattern: str) -> str:
    """Regex for an absolute glob: `**/` spans folders, `*` and `?` stay within one name.

    Shared by the backends: bwrap expands globs at start, Seatbelt matches them.
    """
    out = ["^"]
    for index, token in enumerate(_GLOB_TOKEN.split(pattern)):
        if index % 2 == 0:
            out.append(re.escape(token))  # the literal text between glob tokens
        elif token == "**/":
            out.append("(?:[^/]*/)*")
        elif token == "**":
            out.append(".*")
        elif token == "*":
            out.append("[^/]*")
        elif token == "?":
            out.append("[^/]")
        else:  # [class]
            body = token[1:-1].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
    out.append("$")
    return "".join(out)


def glob_base(pattern: str) -> str:
    """The longest leading folder of a glob without glob characters."""
    parts = pattern.split("/")
    fixed: list[str] = []
    for part in parts[:-1]:
        if is_glob(part):
            break
        fixed.append(part)
    return "/".join(fixed) or "/"
