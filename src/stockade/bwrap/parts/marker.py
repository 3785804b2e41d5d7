"""The sign that a process runs inside a stockade sandbox: a link in the sandbox's private /run.

bwrap makes it on its own tmpfs (never on the host), and no unprivileged process
can make /run/anything on the host, so unlike an environment variable it cannot
be faked from outside to make `stockade run` skip the sandbox (cli/nested.py).
"""

from __future__ import annotations

import os

MARKER_PATH = "/run/stockade-sandbox"
MARKER_TARGET = "stockade"


def inside_stockade() -> bool:
    try:
        return os.readlink(MARKER_PATH) == MARKER_TARGET
    except OSError:
        return False
