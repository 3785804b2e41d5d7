"""Showing text that came from outside stockade: one line, nothing a terminal obeys.

File names a sandboxed command created, hosts and paths it asked the proxy
for, audit log fields, error messages naming such paths: all of them reach a
user's terminal (or an agent's transcript) through stockade's own lines. A
name holding ESC sequences could clear the screen, rewrite earlier lines,
set the window title, or hide text with bidirectional overrides. Every line
stockade prints about a run goes through `shown`, so no caller has to
remember which of its parts a sandbox chose.
"""

from __future__ import annotations

import sys


def shown(text: str) -> str:
    """`text` with every character a terminal would not print as itself (C0 and C1 controls,
    DEL, line breaks, bidirectional and zero-width format characters, lone surrogates) as an
    escape such as \\x1b or \\u202e; printable text, non-ASCII letters included, is unchanged."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escaped_literal(text: str, *, toml: bool = False) -> str:
    """A JSON text (or a TOML basic string, `toml`) whose strings hold outside text, with every
    character `shown` would escape written as a \\u escape instead (line breaks between values
    aside): still the same value to a parser, and nothing a terminal obeys when printed.
    (json.dumps escapes C0 controls only: C1, DEL and bidirectional overrides pass raw.)"""
    if text.isprintable():
        return text
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if ch == "\n" or ch.isprintable():
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        elif toml:
            out.append(f"\\U{code:08x}")
        else:  # JSON spells a character past the BMP as its UTF-16 pair
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    return "".join(out)


def say(line: str) -> None:
    """Print one line of stockade's own to stderr, shown safely."""
    print(shown(line), file=sys.stderr)
