"""Startup cost of `stockade run` against bare bwrap, measured side by side.

    python bench/startup.py [--runs 30]

Prints a Markdown table: median, min and max wall time of each command, and
what stockade adds to bare bwrap.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import interleaved, machine, stockade_command, table  # noqa: E402

BARE_BWRAP = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "true"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    project = tempfile.mkdtemp(prefix="stockade-bench-", dir=os.path.expanduser("~"))
    stockade = stockade_command()
    commands = {
        "bare bwrap": BARE_BWRAP,
        "python -c pass": [sys.executable, "-c", "pass"],
        "stockade run --profile offline -- true": [*stockade, "run", "--profile", "offline", "--", "true"],
    }
    timings = interleaved(commands, args.runs, cwd=project)
    print(f"# startup ({args.runs} runs each, interleaved) on {machine()}\n")
    print(table(timings, "bare bwrap"))
    os.rmdir(project)


if __name__ == "__main__":
    main()
