"""The real agent CLIs, pinned, installed once from npm into a cache beside this file.

    python tests/agents/install.py [claude|codex|gemini ...]

Each agent gets its own npm prefix; an installed one is marked ready and kept
between runs. The cache is under the checkout, never under /tmp or a home
(both are private inside the sandbox), unless the checkout itself is under
/tmp or /var/tmp (the unprivileged test run's copy): then in the user's home.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Agent:
    name: str  # stockade's name for it: `stockade install NAME`
    package: str
    version: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


AGENTS = {
    "claude": Agent("claude", "@anthropic-ai/claude-code", "2.1.328"),
    "codex": Agent("codex", "@openai/codex", "0.169.0"),
    "gemini": Agent("gemini", "@google/gemini-cli", "0.61.0"),
}


class InstallError(Exception):
    """An agent could not be installed (no registry, no npm)."""


def _cache() -> Path:
    chosen = os.environ.get("STOCKADE_AGENTS_CACHE")
    if chosen:
        return Path(chosen)
    here = Path(__file__).resolve().parent
    if any(str(here).startswith(folder) for folder in ("/tmp/", "/var/tmp/")):
        return Path.home() / ".stockade-agents"
    return here / ".cache"


CACHE = _cache()


def prefix(agent: Agent) -> Path:
    return CACHE / agent.name


def ensure(agent: Agent) -> Path:
    """The agent's program, installed first unless ready."""
    folder = prefix(agent)
    ready = folder / ".ready"
    if not (ready.exists() and ready.read_text().strip() == agent.spec):
        if folder.exists() and not os.access(folder, os.W_OK):
            raise InstallError(f"{folder} is not ready and not writable here (another user's cache)")
        npm = shutil.which("npm")
        if npm is None:
            raise InstallError("npm is not installed")
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(folder), agent.spec],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise InstallError(f"npm install {agent.spec}: exit {done.returncode}: {(done.stderr or done.stdout)[-600:]}")
        ready.write_text(agent.spec + "\n")
    return program(agent)


def program(agent: Agent) -> Path:
    """The runnable program. Claude Code's npm package copies its native binary into place in a
    postinstall step that npm may not run (npm 11 asks before running install scripts): then the
    binary is taken from its platform package directly."""
    bin_path = prefix(agent) / "node_modules" / ".bin" / agent.name
    if agent.name == "claude":
        native = sorted(glob.glob(str(prefix(agent) / "node_modules" / "@anthropic-ai" / "claude-code-linux-*" / "claude")))
        if native:
            return Path(native[0])
    if not bin_path.exists():
        raise InstallError(f"{agent.spec} installed no {bin_path.name} program")
    return bin_path


if __name__ == "__main__":
    for name in sys.argv[1:] or list(AGENTS):
        print(ensure(AGENTS[name]))
