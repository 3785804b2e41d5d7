"""The round-trip writer shared by stockade allow and stockade learn --write."""

from __future__ import annotations

import tomllib

import pytest

from stockade.core.errors import PolicyError
from stockade.profiles.editing import Entry, add_entries

HAND_WRITTEN = """# ours
extends = ["pypi"]

[network]
mode = "none"  # for now
allow = ["a.test"]

[limits]
pids = 100  # enough
"""


def test_entries_are_added_with_their_comments_and_the_rest_is_kept_byte_for_byte() -> None:
    entries = [
        Entry(("network",), "allow", "b.test", "learn: 2 requests refused"),
        Entry(("network", "http", "api.test"), "allow", "GET /v1/**", "learn: 1 request refused"),
        Entry(("filesystem",), "allow_write", "~/.cache/tool", "learn: create refused"),
        Entry(("network",), "allow", "a.test", "already there"),
    ]
    text, added = add_entries(HAND_WRITTEN, entries, file="p.toml")
    assert [entry.value for entry in added] == ["b.test", "GET /v1/**", "~/.cache/tool"]
    data = tomllib.loads(text)
    assert data["network"]["allow"] == ["a.test", "b.test"] and data["network"]["mode"] == "allowlist"
    assert data["network"]["http"]["api.test"]["allow"] == ["GET /v1/**"]
    assert data["filesystem"]["allow_write"] == ["~/.cache/tool"]
    assert "# ours\n" in text and "pids = 100  # enough" in text and "# learn: 2 requests refused" in text
    assert add_entries(text, entries, file="p.toml") == (text, [])  # a second time changes nothing


@pytest.mark.parametrize(("text", "says"), [("network = 1\n", "network is not a table"), ('[network]\nallow = "x"\n', "is not a list"),
                                            ("[network\n", "not valid TOML")])  # fmt: skip
def test_a_file_it_cannot_edit_is_a_policy_error(text: str, says: str) -> None:
    with pytest.raises(PolicyError, match=says):
        add_entries(text, [Entry(("network",), "allow", "x.test")], file="p.toml")


def test_a_comment_with_line_breaks_or_escapes_is_escaped_not_a_crash_or_injection() -> None:
    comment = 'learn: create /srv/x\nallow_read = ["/"]\r\x1b[2K refused'
    text, added = add_entries("", [Entry(("filesystem",), "allow_write", "/srv", comment)], file="p.toml")
    assert len(added) == 1 and tomllib.loads(text) == {"filesystem": {"allow_write": ["/srv"]}}
    assert "\x1b" not in text and "\r" not in text and text.count("\n") == 4, text
