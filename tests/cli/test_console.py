"""Rich consoles for the non-hot commands: no markup, no colour codes, outside text shown escaped."""

from __future__ import annotations

import io
import sys

import pytest
from rich.table import Table

from stockade.cli import console


@pytest.mark.parametrize(("make", "stream"), [(console.stdout, "out"), (console.stderr, "err")])
def test_each_console_writes_to_the_current_stream(capsys: pytest.CaptureFixture[str], make: object, stream: str) -> None:
    make().print("hello")  # type: ignore[operator]
    captured = capsys.readouterr()
    assert getattr(captured, stream) == "hello\n"
    assert getattr(captured, "err" if stream == "out" else "out") == ""


def test_it_follows_a_swapped_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    swapped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", swapped)
    console.stdout().print("to the new one")
    assert swapped.getvalue() == "to the new one\n"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[bold red]not markup[/]", id="markup"),
        pytest.param(":smile: not an emoji", id="emoji"),
        pytest.param("/etc/passwd 127.0.0.1 True None", id="no-highlighting"),
    ],
)
def test_user_data_is_printed_literally(capsys: pytest.CaptureFixture[str], text: str) -> None:
    console.stdout().print(text)
    assert capsys.readouterr().out == text + "\n"


def test_strings_are_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    console.stdout().print("name \x1b]0;pwned\x07 \u202e end")
    assert capsys.readouterr().out == "name \\x1b]0;pwned\\x07 \\u202e end\n"


def test_table_cells_are_shown_escaped(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    table = Table("path", "[b]rule[/b]")
    table.add_row("/p/\x1b[2Jevil", "deny_read")
    console.stdout().print(table)
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "/p/\\x1b[2Jevil" in out and "[b]rule[/b]" in out
