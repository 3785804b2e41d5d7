"""An interactive bash on a real pseudo-terminal, driven key by key (pexpect).

The shell has job control, as a user's has: each command line is a job in
its own process group, the terminal's foreground while it runs. `PREFIXES`
names the two ways every scenario runs: bare, and under `stockade run`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pexpect

PROMPT = "PROMPT\\$ "
PREFIXES = {"bare": "", "stockade": "stockade run -- "}


@dataclass
class World:
    root: Path
    home: Path
    project: Path
    env: dict[str, str] = field(default_factory=dict)


class Shell:
    """`bash --norc -i` on a pty of 24x100; `text` is everything it printed since the last `mark`."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child

    @classmethod
    def start(cls, world: World, *, rows: int = 24, columns: int = 100) -> Shell:
        child = pexpect.spawn(
            "bash", ["--norc", "--noprofile", "-i"], cwd=str(world.project), env=world.env,
            encoding="utf-8", codec_errors="replace", timeout=15, dimensions=(rows, columns),
        )  # fmt: skip
        shell = cls(child)
        shell.child.expect(PROMPT)
        shell.run("bind 'set enable-bracketed-paste off' 2>/dev/null; stty -echoctl")
        return shell

    def run(self, line: str, timeout: float = 30) -> str:
        """Type `line`, wait for the next prompt; what it printed (the echoed line cut off)."""
        self.child.sendline(line)
        self.child.expect(PROMPT, timeout=timeout)
        return _clean(self.child.before).split("\n", 1)[-1]

    def start_line(self, line: str, ready: str | None = None, settle: float = 1.0) -> None:
        """Type `line` and return while it runs: once it printed `ready`, else after `settle` s."""
        self.child.sendline(line)
        if ready is not None:
            self.child.expect(ready)
        else:
            time.sleep(settle)

    def key(self, control: str) -> None:
        self.child.sendcontrol(control)

    def until_prompt(self, timeout: float = 30) -> str:
        """What the running line printed until the next prompt (its echo cut off)."""
        self.child.expect(PROMPT, timeout=timeout)
        return _clean(self.child.before).split("\n", 1)[-1]

    def status(self) -> int:
        return int(self.run("echo status=$?").split("status=")[1].split()[0])

    def close(self) -> None:
        try:
            self.child.sendline("kill -9 $(jobs -p) 2>/dev/null; exit 0")
            self.child.expect(pexpect.EOF, timeout=10)
        except (pexpect.TIMEOUT, pexpect.EOF, OSError):
            pass
        self.child.close(force=True)


def _clean(text: str) -> str:
    """Without terminal control sequences and carriage returns."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    return text.replace("\r", "")
