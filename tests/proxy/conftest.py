from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from stockade.proxy.control import SessionSpec

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
    def read() -> list[dict[str, object]]:
        path = tmp_path / "audit.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    return read
