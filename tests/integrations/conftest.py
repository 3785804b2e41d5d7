"""Fixtures for tests/integrations (helpers live in integration_support: tests do not import conftest)."""

from __future__ import annotations

from tests.integrations.integration_support import sandbox, world

__all__ = ["sandbox", "world"]
