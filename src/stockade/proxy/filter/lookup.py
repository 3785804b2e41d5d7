"""Name lookups for the addons that check addresses (Decisions, Backstop), and the option that fakes them in tests."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mitmproxy import ctx, exceptions

from stockade.proxy.filter.resolver import Resolver, file_resolver, own_addresses, system_resolver

OWN_ADDRESSES_TTL = 30.0  # seconds between re-reading this host's interface addresses


class Lookup:
    def __init__(self) -> None:
        self.resolver: Resolver = system_resolver
        self._own: frozenset[Any] = frozenset()
        self._own_at = float("-inf")

    def load(self, loader: Any) -> None:
        loader.add_option(
            "stockade_test_resolver",
            str,
            "",
            "Path of a JSON file that answers every name lookup (names, test upstreams, query log), for tests only. Empty: use the system resolver.",
        )

    def configure(self, updated: set[str]) -> None:
        if "stockade_test_resolver" in updated:
            path = ctx.options.stockade_test_resolver
            if not path:
                self.resolver = system_resolver
                return
            try:
                table = json.loads(Path(path).read_text())
                if not isinstance(table, dict) or not isinstance(table.get("names", {}), dict):
                    raise ValueError("expected an object with a 'names' object")
            except (OSError, ValueError) as exc:
                raise exceptions.OptionsError(f"stockade_test_resolver: cannot use {path!r}: {exc}") from exc
            self.resolver = file_resolver(path)

    def own_addresses(self) -> frozenset[Any]:
        """This host's own addresses (refused as destinations), re-read every OWN_ADDRESSES_TTL seconds."""
        now = time.monotonic()
        if now - self._own_at > OWN_ADDRESSES_TTL:
            self._own, self._own_at = own_addresses(), now
        return self._own
