"""Outside text shown on one line with nothing a terminal obeys, and JSON/TOML literals escaped alike."""

from __future__ import annotations

import json
import tomllib
import unicodedata

import pytest

from stockade.profiles.text import escaped_literal, say, shown

HOSTILE = "".join(chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]) + "\x1b[2J\x1b]0;pwned\x07\u202e\u200b\ud800"


def raw(text: str) -> list[str]:
    return [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Cs")]


def test_shown_escapes_every_control_and_keeps_letters() -> None:
    out = shown(f"ü{HOSTILE}日本")
    assert raw(out) == [] and "\n" not in out
    assert out.startswith("ü\\x00\\x01") and out.endswith("\\u202e\\u200b\\ud800日本")
    assert "\\x1b[2J" in out and "\\x9f" in out
    assert shown("plain text, ü and 日本") == "plain text, ü and 日本"  # the control: nothing to escape


@pytest.mark.parametrize(
    ("text", "out"),
    [
        pytest.param("", "", id="empty"),
        pytest.param("a\nb", "a\\x0ab", id="newline"),
        pytest.param("a\tb\r", "a\\x09b\\x0d", id="tab-cr"),
        pytest.param("\x7f", "\\x7f", id="del"),
        pytest.param("\x85", "\\x85", id="c1-next-line"),
        pytest.param("\xa0", "\\xa0", id="no-break-space"),
        pytest.param("\u2028", "\\u2028", id="line-separator"),
        pytest.param("\ufeff", "\\ufeff", id="bom"),
        pytest.param("\U000e0001", "\\U000e0001", id="astral-tag"),
        pytest.param("😀 ok", "😀 ok", id="printable-astral"),
        pytest.param("back\\slash", "back\\slash", id="backslash-kept"),
    ],
)
def test_shown(text: str, out: str) -> None:
    assert shown(text) == out


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("plain ü 日本 😀", id="printable"),
        pytest.param(HOSTILE.replace("\ud800", ""), id="controls"),
        pytest.param("tag \U000e0001 and \u202e", id="astral-and-bidi"),
    ],
)
def test_escaped_literal_json_parses_back_and_prints_nothing_raw(value: str) -> None:
    text = escaped_literal(json.dumps({"v": value, "w": [value]}, ensure_ascii=False))
    assert raw(text) == [] and "\n" not in text
    assert json.loads(text) == {"v": value, "w": [value]}


def test_escaped_literal_json_spells_astral_characters_as_a_surrogate_pair() -> None:
    assert escaped_literal('"\U000e0001"') == '"\\udb40\\udc01"'
    assert json.loads(escaped_literal('"\U000e0001"')) == "\U000e0001"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("esc \x1b[2J del \x7f c1 \x9b", id="controls"),
        pytest.param("tag \U000e0001 rtl \u202e zw \u200b", id="format"),
        pytest.param("plain ü", id="printable"),
    ],
)
def test_escaped_literal_toml_parses_back(value: str) -> None:
    text = escaped_literal(f"v = {json.dumps(value, ensure_ascii=False)}\n", toml=True)
    assert raw(text) == []
    assert tomllib.loads(text) == {"v": value}


def test_escaped_literal_toml_uses_the_long_escape_past_the_bmp() -> None:
    assert escaped_literal("\U000e0001", toml=True) == "\\U000e0001"


def test_escaped_literal_keeps_line_breaks_between_values() -> None:
    text = json.dumps({"a": "\x1b"}, indent=1)
    assert escaped_literal(text) == '{\n "a": "\\u001b"\n}'  # json.dumps already escaped C0
    assert escaped_literal("a\nb") == "a\nb"


def test_say_prints_one_escaped_line_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    say("stockade: denied \x1b]0;x\x07 host\nnext")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "stockade: denied \\x1b]0;x\\x07 host\\x0anext\n"
