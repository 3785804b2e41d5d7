"""Find the project's `.stockade.toml` by walking up from the working directory."""

from __future__ import annotations

from pathlib import Path

PROJECT_FILE = ".stockade.toml"


def find_project_policy(start: Path) -> Path | None:
    """The nearest non-empty `.stockade.toml` at or above `start`, up to the filesystem root.

    Empty files are skipped: while a sandbox runs, stockade holds an absent
    `.stockade.toml` read-only with an empty placeholder, which a concurrent
    run must not take for the project's policy.
    """
    for folder in (start, *start.parents):
        candidate = folder / PROJECT_FILE
        if candidate.is_file() and candidate.stat().st_size > 0:  # an empty one is a placeholder mount point
            return candidate
    return None
