"""Rich output for the non-hot commands. User data is never parsed as markup.

Consoles are made per call so they follow the current sys.stdout (tests swap it).
"""

from __future__ import annotations

import sys

from rich.console import Console

from stockade.profiles.text import say


def stdout() -> Console:
    return Console(file=sys.stdout, markup=False, highlight=False, emoji=False)


def stderr() -> Console:
    return Console(file=sys.stderr, markup=False, highlight=False, emoji=False)


def error_line(message: str) -> None:
    """The one line every stockade failure prints."""
    say(f"stockade: error: {message}")
