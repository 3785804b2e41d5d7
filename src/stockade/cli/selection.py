"""The policy a non-run command talks about: the same choice `stockade run` makes."""

from __future__ import annotations

import os
from pathlib import Path

from stockade.core.locations import locate
from stockade.profiles.resolve import Resolution, resolve


def select(policy: Path | None = None, profile: str | None = None) -> Resolution:
    return resolve(Path(os.getcwd()), locate(), policy_file=policy, profile=profile)
