"""Find the project's `.stockade.toml` by walking up from the working directory."""

from __future__ import annotations

from pathlib import Path

PROJECT_FILE = ".stockade.toml"


def find_project_policy(start: Path) -> Path | None:
    """The nearest `.stockade.toml` at or above `start`, up to the filesystem root."""
    for folder in (start, *start.parents):
        candidate = folder / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None
