"""Collect this run's sandbox denials from macOS's unified log while the command runs.

`log stream` must be listening before the command starts (it shows only new
events), and the kernel hands denials to the log a little after they
happen, so stopping waits a moment before reading what arrived.
"""

from __future__ import annotations

import subprocess
import threading
import time

LOG_COMMAND = "/usr/bin/log"
READY_TIMEOUT = 0.5  # seconds to wait for `log stream` to start listening
SETTLE = 0.25  # seconds to wait after the command for late denials


def predicate(tag: str) -> str:
    """A `log` predicate for messages carrying the run's tag (tag: [A-Za-z0-9_-] only)."""
    return f'eventMessage CONTAINS "{tag}"'


class LogStream:
    """`log stream --style ndjson` for one tag; lines are parsed after the run."""

    def __init__(self, tag: str, command: str = LOG_COMMAND) -> None:
        self.tag = tag
        self.command = command
        self.lines: list[str] = []
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()

    def argv(self) -> list[str]:
        return [self.command, "stream", "--style", "ndjson", "--predicate", predicate(self.tag)]

    def start(self, ready_timeout: float = READY_TIMEOUT) -> bool:
        """Start listening; False when `log` cannot run (the report is then skipped)."""
        try:
            self._proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
                errors="replace",
                process_group=0,  # not hit by a Ctrl-C aimed at stockade's group
            )
        except OSError:
            return False
        self._reader = threading.Thread(target=self._read, name="stockade-log-stream", daemon=True)
        self._reader.start()
        self._ready.wait(ready_timeout)  # the first line is log's "Filtering the log data..." banner
        return True

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self.lines.append(line)
            self._ready.set()
        self._ready.set()

    def stop(self, settle: float = SETTLE) -> list[str]:
        """Stop listening and return every line received."""
        if self._proc is None:
            return []
        if self._proc.poll() is None:
            time.sleep(settle)
            self._proc.terminate()
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=2)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        return list(self.lines)
