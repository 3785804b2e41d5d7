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


def say(line: str) -> None:
    """Print one line of stockade's own to stderr, shown safely."""
    print(shown(line), file=sys.stderr)
