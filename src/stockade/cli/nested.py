"""`stockade run` inside a stockade sandbox: run the command in the sandbox it is already in.

A sandbox cannot make another (it has no user namespaces, and the seccomp
filter refuses the calls bwrap needs), and an agent's hook may wrap a command
that is itself `stockade run ...`. The outer sandbox's walls already hold
everything the inner run would ask, or more; so the command runs as it is,
with one line saying so. Being inside is told by a link in the sandbox's
private /run (bwrap/parts/marker.py), not by an environment variable anyone can set.
"""

from __future__ import annotations

import os
import sys

from stockade.bwrap.parts.marker import inside_stockade

__all__ = ["inside_stockade", "run_as_is"]


def run_as_is(command: list[str], quiet: bool, dry_run: bool) -> int:
    """Exec the command in this sandbox (its own exit status is the run's); 127/126 as usual."""
    from stockade.bwrap.running.execute import resolve_command

    env = dict(os.environ)
    program = resolve_command(command, env)
    if dry_run:
        print(f"# stockade plan: already inside a stockade sandbox; would run {command[0]} in it as is")
        return 0
    if not quiet:
        print("stockade: already inside a stockade sandbox: running the command in it as is (the outer policy applies)", file=sys.stderr)
        sys.stderr.flush()
    sys.stdout.flush()
    os.execve(program, command, env)
    return 127  # not reached
