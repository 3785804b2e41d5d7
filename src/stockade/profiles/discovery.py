"""Find the project's `.stockade.toml` by walking up from the working directory."""

from __future__ import annotations

from pathlib import Path

PROJECT_FILE = ".stockade.toml"


def policy_to_edit(cwd: Path, policy: Path | None = None) -> Path:
    """The file `stockade allow`, `learn --write` and an "always" answer change: the one given
    (relative to `cwd`), else the project's nearest .stockade.toml, else a new one in `cwd`."""
    if policy is not None:
        return policy if policy.is_absolute() else cwd / policy
    return find_project_policy(cwd) or cwd / PROJECT_FILE


def find_project_policy(start: Path) -> Path | None:
    """The nearest non-empty `.stockade.toml` at or above `start`, up to the filesystem root.

    Empty files are skipped: an empty file holds no rule, and a run of stockade 0.1
    left empty placeholders at absent protected paths (placeholders.py clears
    the ones a killed run left).
    """
    for folder in (start, *start.parents):
        candidate = folder / PROJECT_FILE
        if candidate.is_file() and candidate.stat().st_size > 0:  # an empty one is a placeholder mount point
            return candidate
    return None
