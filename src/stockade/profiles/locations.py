"""Where stockade keeps its own files for this user (XDG base directories)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Locations:
    home: Path
    config: Path  # user config, trust store: read-only inside every sandbox
    state: Path  # audit logs: hidden inside every sandbox
    cache: Path  # compiled seccomp filters: hidden inside every sandbox
    runtime: Path  # daemon control socket: hidden inside every sandbox

    @property
    def user_config_file(self) -> Path:
        return self.config / "config.toml"

    @property
    def trust_file(self) -> Path:
        return self.config / "trusted.json"

    @property
    def default_audit_log(self) -> Path:
        return self.state / "audit.jsonl"

    def private_dirs(self) -> tuple[Path, ...]:
        return (self.state, self.cache, self.runtime)

    def ensure(self) -> None:
        """Create stockade's folders (0700) before a sandbox is planned.

        A folder that does not exist at planning cannot be masked, and a
        sandbox with a writable home could then plant a filter cache, a
        placeholder record or a config of its own in it (ESCAPES 15, 63).
        """
        for folder in (*self.private_dirs(), self.config):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)


def locate(env: Mapping[str, str] | None = None) -> Locations:
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or os.path.expanduser("~"))

    def xdg(name: str, fallback: str) -> Path:
        value = env.get(name, "")
        return Path(value) if os.path.isabs(value) else home / fallback

    state = xdg("XDG_STATE_HOME", ".local/state") / "stockade"
    runtime_root = env.get("XDG_RUNTIME_DIR", "")
    runtime = Path(runtime_root) / "stockade" if os.path.isabs(runtime_root) else state / "run"
    return Locations(
        home=home,
        config=xdg("XDG_CONFIG_HOME", ".config") / "stockade",
        state=state,
        cache=xdg("XDG_CACHE_HOME", ".cache") / "stockade",
        runtime=runtime,
    )
