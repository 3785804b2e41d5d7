"""KeyLines: the 1-based line of each table, key and list item of a policy file."""

from __future__ import annotations

import pytest

from stockade.profiles.toml_lines import KeyLines

POLICY = """\
# a policy
extends = ["default"]

[filesystem]  # files
allow_write = [
  ".",
  "./build",   # a comment with "quotes" and = signs
]
deny_read = ['**/.env']

[ network ]
mode = "allowlist"
allow = ["a.test", "b.test"]
"unix_sockets" = []

[env]
set = { A = "x = [", B = "y" }
pass = ["HOME"]
"""


@pytest.mark.parametrize(
    ("table", "key", "line"),
    [
        ("", "extends", 2),
        ("filesystem", "allow_write", 5),
        ("filesystem", "deny_read", 9),
        ("network", "mode", 12),
        ("network", "allow", 13),
        ("network", "unix_sockets", 14),
        ("env", "set", 17),
        ("env", "pass", 18),
    ],
)
def test_key_lines(table: str, key: str, line: int) -> None:
    assert KeyLines(POLICY).key(table, key) == line


@pytest.mark.parametrize(("table", "line"), [("filesystem", 4), ("network", 11), ("env", 16), ("limits", None), ("", None)])
def test_table_lines(table: str, line: int | None) -> None:
    assert KeyLines(POLICY).table(table) == line


def test_unknown_keys_have_no_line() -> None:
    lines = KeyLines(POLICY)
    assert lines.key("network", "deny") is None
    assert lines.key("filesystem", "mode") is None  # mode is in [network]


def test_lines_inside_a_multiline_array_are_not_keys() -> None:
    lines = KeyLines('[network]\nallow = [\n  "x.test",\n]\n[env]\nset = {\n}\n')
    assert lines.key("network", "allow") == 2
    assert lines.table("env") == 5


def test_a_list_item_in_a_later_line_of_an_array_is_not_a_key() -> None:
    lines = KeyLines('allow = [\n  "a",\n  b = 1\n]\nc = 2\n')
    assert lines.key("", "b") is None
    assert lines.key("", "c") == 5


@pytest.mark.parametrize(
    ("value", "line"),
    [
        pytest.param(".", 6, id="first-item"),
        pytest.param("./build", 7, id="second-item"),
        pytest.param("missing", 5, id="falls-back-to-the-key"),
    ],
)
def test_item_lines(value: str, line: int) -> None:
    assert KeyLines(POLICY).item("filesystem", "allow_write", value) == line


def test_item_in_single_quotes_and_of_an_unknown_key() -> None:
    lines = KeyLines(POLICY)
    assert lines.item("filesystem", "deny_read", "**/.env") == 9
    assert lines.item("network", "deny", "x") is None


def test_dotted_keys_name_their_table() -> None:
    lines = KeyLines('network.allow = ["a.test"]\n[limits]\n"a" . b = 1\n')
    assert lines.key("network", "allow") == 1
    assert lines.table("network") == 1
    assert lines.key("limits.a", "b") == 3


def test_the_first_occurrence_wins() -> None:
    lines = KeyLines("[network]\nmode = 'none'\n[network]\nmode = 'open'\n")
    assert lines.key("network", "mode") == 2
    assert lines.table("network") == 1


def test_arrays_of_tables_are_not_tables() -> None:
    lines = KeyLines("[[network]]\nmode = 1\n")
    assert lines.table("network") is None
    assert lines.key("", "mode") == 2


def test_a_hash_inside_a_string_is_not_a_comment() -> None:
    lines = KeyLines('[env]\nset = { A = "#[" }\npass = ["B"]\n')
    assert lines.key("env", "pass") == 3


def test_empty_text() -> None:
    lines = KeyLines("")
    assert lines.key("", "extends") is None and lines.table("") is None


def test_an_escaped_quote_does_not_hide_later_keys() -> None:
    lines = KeyLines('[env]\nset = { A = "say \\"[hi" }\npass = ["B"]\n')
    assert lines.key("env", "set") == 2
    assert lines.key("env", "pass") == 3
