"""Where stockade keeps its own files for this user (XDG base directories).

The folder functions work on strings with `os` alone: a cached `stockade run`
needs the cache and state folders before anything else, and must not pay for
pathlib or dataclasses to get them. `Locations` is the same answer as Paths,
for the code that plans a run.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

_FIELDS = ("home", "config", "state", "cache", "runtime")


def home_folder(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def _xdg(env: Mapping[str, str], name: str, fallback: str) -> str:
    value = env.get(name, "")
    return value if os.path.isabs(value) else os.path.join(home_folder(env), fallback)


def config_folder(env: Mapping[str, str]) -> str:
    """User config and the trust store: read-only inside every sandbox."""
    return os.path.join(_xdg(env, "XDG_CONFIG_HOME", ".config"), "stockade")


def state_folder(env: Mapping[str, str]) -> str:
    """Audit logs and run journals: hidden inside every sandbox."""
    return os.path.join(_xdg(env, "XDG_STATE_HOME", os.path.join(".local", "state")), "stockade")


def cache_folder(env: Mapping[str, str]) -> str:
    """Compiled seccomp filters and stored plans: hidden inside every sandbox."""
    return os.path.join(_xdg(env, "XDG_CACHE_HOME", ".cache"), "stockade")


def runtime_folder(env: Mapping[str, str]) -> str:
    """The daemon's control socket: hidden inside every sandbox."""
    root = env.get("XDG_RUNTIME_DIR", "")
    return os.path.join(root, "stockade") if os.path.isabs(root) else os.path.join(state_folder(env), "run")


class Locations:
    """The five folders as Paths; immutable, compared by value."""

    __slots__ = _FIELDS
    home: Path
    config: Path
    state: Path
    cache: Path
    runtime: Path

    def __init__(self, *, home: Path, config: Path, state: Path, cache: Path, runtime: Path) -> None:
        for name, value in zip(_FIELDS, (home, config, state, cache, runtime), strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Locations is immutable: make a new one ({name})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Locations) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "Locations(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS) + ")"

    def _values(self) -> tuple[Path, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def with_home(self, home: Path) -> Locations:
        """The same folders, seen from another spelling of home (its real path)."""
        return Locations(home=home, config=self.config, state=self.state, cache=self.cache, runtime=self.runtime)

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
        from stockade.core.errors import SandboxSetupError

        for folder in (*self.private_dirs(), self.config):
            try:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            except (FileExistsError, NotADirectoryError):
                blocker = next((str(p) for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), str(folder))
                raise SandboxSetupError(
                    f"stockade keeps its files in {folder}, but {blocker} is a file, not a folder: move it aside "
                    f"(mv {blocker} {blocker}.old) and run again"
                ) from None
            except PermissionError:
                raise SandboxSetupError(
                    f"stockade cannot make its folder {folder} (permission denied): give your user write access to "
                    f"{folder.parent}, or point XDG_STATE_HOME / XDG_CACHE_HOME / XDG_RUNTIME_DIR elsewhere"
                ) from None


def locate(env: Mapping[str, str] | None = None) -> Locations:
    from pathlib import Path

    env = os.environ if env is None else env
    return Locations(
        home=Path(home_folder(env)),
        config=Path(config_folder(env)),
        state=Path(state_folder(env)),
        cache=Path(cache_folder(env)),
        runtime=Path(runtime_folder(env)),
    )
