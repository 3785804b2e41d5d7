"""Rich output for the non-hot commands. User data is never parsed as markup.

Consoles are made per call so they follow the current sys.stdout (tests swap it).
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.text import Text

from stockade.profiles.text import shown


class _Shown(Console):
    """Every string it prints, table cells included, goes through `shown` first: a policy
    file's paths and patterns are outside text too (a cloned repository's .stockade.toml)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(shown(text), **kwargs)


def stdout() -> Console:
    return _Shown(file=sys.stdout, markup=False, highlight=False, emoji=False)


def stderr() -> Console:
    return _Shown(file=sys.stderr, markup=False, highlight=False, emoji=False)
