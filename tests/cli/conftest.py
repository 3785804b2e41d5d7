"""Fixtures for the CLI tests that run stockade whole (helpers live in integration_support: tests do not import conftest)."""

from __future__ import annotations

from tests.cli.integration_support import sandbox, world

__all__ = ["sandbox", "world"]
