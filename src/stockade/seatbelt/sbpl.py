"""SBPL text primitives: what may be written into a profile, and how.

Rule of this package: text from a policy or from the host (paths, names)
never becomes SBPL source. Paths travel as `sandbox-exec -D NAME=value`
parameters and the profile says `(param "NAME")` (ESCAPES case 16).

Globs are the one exception, because Seatbelt cannot use a parameter inside
`(regex ...)`. Their literal parts are *encoded*, never pasted:

- letters, digits, `/`, `_`, `-`, space and `,@%~=:` stand for themselves
  (no meaning in POSIX extended regexes nor in SBPL strings);
- the other printable ASCII punctuation is written as a one-character
  bracket expression (`.` becomes `[.]`), which every regex dialect reads
  as that literal character;
- what could end or escape an SBPL string or a bracket (`"`, `\\`, `^`,
  `[`, `]`) and control characters become `[^/]` (any one character but
  `/`), and a run of non-ASCII characters becomes `[^/]+`.

The last two widen the match a little. Globs only ever appear in deny
rules, so a wider match denies a little more, never less; in exchange the
regex is plain ASCII without quotes or backslashes, whatever the policy
says. A glob bracket such as `[ab]` matches both of its readings (one
character, or the literal text), because a project folder may really be
called `a[b]c`.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field

ANY_CHAR = "[^/]"
ANY_RUN = "[^/]+"
ANY_COMPONENTS = "(/[^/]+)*"  # "**": zero or more whole path components

_LITERAL = frozenset(string.ascii_letters + string.digits + "/_- ,@%~=:")
_BRACKETED = frozenset(".*+?(){}|$!#&';<>`")
_GLOB_CHARS = frozenset("*?[")

PARAM_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
TAG = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_CONSTANT = re.compile(r"^[A-Za-z0-9_./:-]+$")  # our own constants: nothing to escape

# macOS keeps these three behind symlinks into /private; Seatbelt matches the
# resolved path, so a rule must name both spellings (ESCAPES case 10).
PRIVATE_LINKS = ("/tmp", "/var", "/etc")


def private_aliases(path: str) -> tuple[str, ...]:
    """`path` and its other spelling across the /tmp, /var, /etc -> /private links."""
    for link in PRIVATE_LINKS:
        target = "/private" + link
        if path == link or path.startswith(link + "/"):
            return (path, "/private" + path)
        if path == target or path.startswith(target + "/"):
            return (path, path[len("/private") :])
    return (path,)


def is_glob(path: str) -> bool:
    return any(ch in _GLOB_CHARS for ch in path)


def quote_constant(text: str) -> str:
    """An SBPL string for text stockade itself wrote (never policy or host text)."""
    if not _CONSTANT.match(text):
        raise ValueError(f"{text!r} is not a plain constant; pass it as a parameter")
    return f'"{text}"'


def check_tag(tag: str) -> str:
    if not TAG.match(tag):
        raise ValueError(f"session tag {tag!r}: use letters, digits, '_' and '-' only")
    return tag


def encode_literal(text: str) -> str:
    """Regex source matching `text` literally (or slightly more, see module doc)."""
    out: list[str] = []
    in_non_ascii = False
    for ch in text:
        if ord(ch) > 127:
            if not in_non_ascii:
                out.append(ANY_RUN)
            in_non_ascii = True
            continue
        in_non_ascii = False
        if ch in _LITERAL:
            out.append(ch)
        elif ch in _BRACKETED:
            out.append(f"[{ch}]")
        else:
            out.append(ANY_CHAR)
    return "".join(out)


def _component(part: str) -> str:
    """One path component of a glob: `*`, `?` and `[...]` stay within the component."""
    out: list[str] = []
    literal = ""
    i = 0
    while i < len(part):
        ch = part[i]
        if ch in "*?":
            out.append(encode_literal(literal))
            literal = ""
            out.append(ANY_CHAR + "*" if ch == "*" else ANY_CHAR)
            i += 1
            continue
        if ch == "[":
            end = part.find("]", i + 2)  # like fnmatch: a ']' right after '[' is a member
            if end != -1:
                out.append(encode_literal(literal))
                literal = ""
                out.append(f"({ANY_CHAR}|{encode_literal(part[i : end + 1])})")
                i = end + 1
                continue
        literal += ch
        i += 1
    out.append(encode_literal(literal))
    return "".join(out)


def split_glob(pattern: str) -> tuple[str, str]:
    """(literal base directory, glob rest): "/p/**/.env" -> ("/p", "**/.env")."""
    parts = pattern.split("/")
    base: list[str] = []
    for index, part in enumerate(parts):
        if is_glob(part):
            return "/".join(base) or "/", "/".join(parts[index:])
        base.append(part)
    return pattern, ""


def glob_body(base: str, rest: str) -> str:
    """Unanchored regex body for `base` (literal) followed by the glob `rest`."""
    body = encode_literal(base.rstrip("/"))
    for part in rest.split("/") if rest else []:
        body += ANY_COMPONENTS if part == "**" else "/" + _component(part)
    return body


def glob_regexes(base: str, rest: str) -> tuple[str, str]:
    """The path itself and anything below it (two regexes: no `$` inside groups)."""
    body = glob_body(base, rest)
    return f"^{body}$", f"^{body}/"


def regex_filter(source: str) -> str:
    """`(regex #"...")` after checking the source is within the encoded alphabet."""
    if any(ch in source for ch in '"\\\n\r') or not source.isascii() or not source.isprintable():
        raise ValueError(f"regex {source!r} is not in the encoded alphabet")
    return f'(regex #"{source}")'


@dataclass
class Params:
    """The `-D` parameters of one profile, in the order they were named."""

    values: dict[str, str] = field(default_factory=dict)

    def ref(self, name: str, value: str) -> str:
        """Register NAME=value and return the SBPL expression that reads it."""
        if not PARAM_NAME.match(name):
            raise ValueError(f"bad parameter name {name!r}")
        if "\0" in value:
            raise ValueError(f"parameter {name}: a path cannot contain a NUL character")
        if self.values.get(name, value) != value:
            raise ValueError(f"parameter {name} given two values")
        self.values[name] = value
        return f'(param "{name}")'

    def items(self) -> tuple[tuple[str, str], ...]:
        return tuple(self.values.items())
