"""How stockade's own process ends when its command was killed by a signal.

A shell decides what to do after a child by how it ended: `bash` stops a
script or a loop when the child was killed by SIGINT and it saw the Ctrl-C
too, and runs on when the child caught it and exited. So when the command was
killed by a signal that reached it through stockade (one stockade passed on,
or a Ctrl-C the user typed at the sandbox's terminal, bwrap/running/console.py),
stockade ends by that same signal, after its checks and summary, rather than
with exit(128+N).

Core dumps are switched off first: the command's SIGQUIT is not stockade's
crash.
"""

from __future__ import annotations

_ending: int | None = None


def end_by(number: int) -> None:
    """Have `finish` end this process by `number` (the first such request wins)."""
    global _ending
    if _ending is None:
        _ending = number


def pending() -> int | None:
    return _ending


def finish() -> None:
    """End by the requested signal, if any; returns only when there was none or it did not kill."""
    if _ending is None:
        return
    import _signal
    import os

    number = _ending
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, OSError, ValueError):
        pass
    try:
        _signal.signal(number, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
    except OSError:
        pass
