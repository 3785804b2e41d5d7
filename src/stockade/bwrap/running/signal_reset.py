"""Keep bwrap alive through the signals meant for the command, and give the command them back.

bwrap's outer process (the one stockade waits for) dies of SIGINT, SIGTERM,
SIGHUP, SIGQUIT and the other signals in SIGNALS, their default action. When it does, `--die-with-parent`
kills the sandbox before a command that traps the signal can finish, and
bwrap never writes the command's exit to its status pipe: a Ctrl-C looked
like a sandbox that failed to start. So bwrap is started with those signals
ignored, by coreutils' `env --ignore-signal` on the host, and the command gets
them back at their default by `env --default-signal` inside (an ignored
signal stays ignored across exec; a caught one is reset, so nothing else
carries over). Only the signals that were not already ignored when stockade
started are reset: under `nohup`, the command keeps SIGHUP ignored as it
would without the sandbox.

A command whose first word holds `=` (which `env` would take for a variable)
is started through `/bin/sh -c 'exec "$0" "$@"'`, after the reset.

Both options need coreutils 8.31 or newer; whether this machine's `env` has
them is asked once per `env` binary and kept in the cache folder. Without
them, bwrap runs as before and a signal that kills it is reported as the
command's 128+N (bwrap/running/supervise.py).

On every run's path: imports only os and `_signal`.
"""

from __future__ import annotations

import _signal
import os

ENV = "/usr/bin/env"
# Every signal whose default ends a process and that a user, a parent or a timer sends a run
# (not SIGKILL, which nothing can ignore; not the crash signals, nor SIGPIPE and SIGXFSZ).
SIGNALS = {
    _signal.SIGINT: "INT", _signal.SIGQUIT: "QUIT", _signal.SIGHUP: "HUP", _signal.SIGTERM: "TERM",
    _signal.SIGUSR1: "USR1", _signal.SIGUSR2: "USR2", _signal.SIGALRM: "ALRM", _signal.SIGVTALRM: "VTALRM",
    _signal.SIGPROF: "PROF", _signal.SIGXCPU: "XCPU", _signal.SIGPWR: "PWR",
}  # fmt: skip


def wrappers(cache_dir: str, command: list[str], reset: list[int]) -> tuple[list[str], list[str]]:
    """(the words before bwrap on the host, the words before the command inside); `reset`: the
    signals the command gets back at their default (those not ignored when stockade started).
    Both empty when there is none to reset, or this machine's env cannot."""
    if not reset or not command or not supported(cache_dir):
        return [], []
    ignored = ",".join(SIGNALS.values())
    inner = [ENV, f"--default-signal={','.join(SIGNALS[number] for number in reset)}", "--"]
    if "=" in command[0]:
        inner += ["/bin/sh", "-c", 'exec "$0" "$@"']
    return [ENV, f"--ignore-signal={ignored}"], inner


def starting_marks(bwrap: str, inner: list[str]) -> tuple[bytes, ...]:
    """How a sandbox process's command line begins until the command runs with its signals reset:
    bwrap's own (pid 1 and the child it forks), then the inner env's; () without the wrappers."""
    if not inner:
        return ()
    return bwrap.encode() + b"\0", inner[0].encode() + b"\0" + inner[1].encode()


def supported(cache_dir: str) -> bool:
    """Whether ENV has --ignore-signal and --default-signal (asked once per binary, then cached)."""
    try:
        info = os.stat(ENV)
    except OSError:
        return False
    stamp = f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
    record = os.path.join(cache_dir, "env-signals")
    try:
        with open(record, encoding="ascii") as handle:
            known, _space, said = handle.read().partition(" ")
        if known == stamp:
            return said.strip() == "yes"
    except (OSError, ValueError):
        pass
    answer = _ask()
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        temporary = f"{record}.{os.getpid()}"
        with open(temporary, "w", encoding="ascii") as handle:
            handle.write(f"{stamp} {'yes' if answer else 'no'}\n")
        os.replace(temporary, record)
    except OSError:
        pass
    return answer


def _ask() -> bool:
    try:
        quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]  # an old env's usage text
        argv = [ENV, "--ignore-signal=INT", "--default-signal=INT", "--", "/bin/sh", "-c", ":"]
        pid = os.posix_spawn(ENV, argv, {"PATH": "/usr/bin:/bin"}, file_actions=quiet)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    except OSError:
        return False
