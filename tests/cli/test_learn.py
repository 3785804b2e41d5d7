"""stockade learn's layer for the next round: the learned entries as TOML the loader reads back as they are."""

from __future__ import annotations

from pathlib import Path

from stockade.cli.learn import additions_text
from stockade.profiles.editing import Entry
from stockade.profiles.loader import parse_layer


def test_the_next_rounds_layer_reads_back_whatever_characters_the_entries_hold() -> None:
    # A path past U+FFFF (JSON spells it as a surrogate pair, which TOML refuses), DEL, quotes, and a
    # table name that is a Python identifier but no TOML bare key: each made round 2 a policy error.
    path = '/home/u/Fotos 😀/a\x7fb "q" \\'
    entries = [
        Entry(("filesystem",), "allow_read", path),
        Entry(("network", "http", "héllo"), "allow", "GET /x"),
    ]
    layer = parse_layer(additions_text(entries, network_off=True), "learn", base=Path("/p"), home=Path("/home/u"))
    assert list(layer.values["filesystem"]["allow_read"]) == [path]
    assert layer.values["network"]["mode"] == "allowlist"
