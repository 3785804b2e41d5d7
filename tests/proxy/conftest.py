from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from stockade.core.locations import Locations
from stockade.proxy.control import SessionSpec
from tests.netkit import stop_daemon as stop_runtime_daemon
from tests.proxy.filterkit import FilterChain

ALLOW = ("allowed.test", "*.wild.test")
DENY = ("blocked.wild.test",)


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[..., SessionSpec]:
    counter = iter(range(1000))

    def make(**overrides: object) -> SessionSpec:
        values: dict[str, object] = dict(
            session_id=f"sess-{next(counter)}",
            command=["curl", "https://allowed.test/"],
            cwd=str(tmp_path),
            allow=ALLOW,
            deny=DENY,
            audit_path=str(tmp_path / "audit.jsonl"),
            origin=str(tmp_path / ".stockade.toml"),
        )
        values.update(overrides)
        return SessionSpec(**values)  # type: ignore[arg-type]

    return make


@pytest.fixture
def audit_lines(tmp_path: Path) -> Callable[[], list[dict[str, object]]]:
    def read(starts: bool = False) -> list[dict[str, object]]:
        """The final records; with `starts`, every line, allowed flows' start records included."""
        path = tmp_path / "audit.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return lines if starts else [line for line in lines if line.get("phase") != "start"]

    return read


def make_locations(root: Path) -> Locations:
    """A private XDG tree under `root`, so no test touches the real home or another test's daemon."""
    return Locations(home=root, config=root / "config", state=root / "state", cache=root / "cache", runtime=root / "run")


def stop_daemon(locations: Locations) -> None:
    """SIGTERM the daemon of `locations` if one runs, and wait for it to go."""
    stop_runtime_daemon(locations.runtime)


@pytest.fixture
def fresh_locations(tmp_path: Path) -> Iterator[Callable[[str], Locations]]:
    """Factory of private XDG trees; any daemon started in one is stopped after the test."""
    made: list[Locations] = []

    def make(name: str = "home") -> Locations:
        locations = make_locations(tmp_path / name)
        made.append(locations)
        return locations

    yield make
    for locations in made:
        stop_daemon(locations)


@pytest.fixture(scope="session")
def daemon_tools() -> SimpleNamespace:
    """`make_locations` and `stop_daemon` for module-scoped fixtures (tests do not import conftest)."""
    return SimpleNamespace(make_locations=make_locations, stop_daemon=stop_daemon)


@pytest.fixture
def chain() -> FilterChain:
    """The daemon's filter addons, each hook called on all of them in the daemon's order."""
    return FilterChain()
