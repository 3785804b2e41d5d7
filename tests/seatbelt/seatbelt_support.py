"""Shared inputs for the Seatbelt text tests: a fixed fake Mac, so golden files are stable."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from stockade.core.locations import Locations
from stockade.profiles.floor import Floor, floor_for
from stockade.profiles.loader import builtin_names
from stockade.profiles.model import NetworkMode, Policy
from stockade.profiles.resolve import resolve
from stockade.seatbelt.profile import LexicalPaths, Profile, ProfileSpec, render

HOME = Path("/Users/test")
PROJECT = HOME / "proj"
TEMP_DIR = "/private/var/folders/zz/golden/T/stockade-golden"
TAG = "stockade-golden"
PROXY_PORT = 8899
HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
FIXTURES = HERE / "fixtures"

# Project folders whose names try to break out of an SBPL string (ESCAPES 16).
HOSTILE_NAMES: tuple[str, ...] = (
    'p") (allow default) ("',
    "line\nbreak",
    "back\\slash",
    'q"uote',
    "pa(r)en",
    '#"raw"',
    ";comment",
    'x" (param "WRITABLE_0',
    "tab\there",
    "a[b]c",
    "st*r?",
    "$dollar^caret|pipe{brace}",
    "\u00fcn\u00efc\u00f6de",
    "\u30d7\u30ed",
    "sp ace",
)


def locations(home: Path = HOME) -> Locations:
    return Locations(
        home=home,
        config=home / ".config/stockade",
        state=home / ".local/state/stockade",
        cache=home / ".cache/stockade",
        runtime=home / ".local/state/stockade/run",
    )


@dataclass(frozen=True)
class Case:
    """One golden case: a resolved policy and the profile made from it."""

    name: str
    policy: Policy
    floor: Floor
    profile: Profile


def make_case(name: str, policy: Policy, locs: Locations | None = None) -> Case:
    locs = locs or locations()
    floor = floor_for(policy.filesystem.allow_write, locs, policy.protected_files)
    port = None if policy.network.mode is NetworkMode.NONE else PROXY_PORT
    spec = ProfileSpec(policy=policy, floor=floor, home=str(locs.home), temp_dir=TEMP_DIR, tag=TAG, proxy_port=port)
    return Case(name=name, policy=policy, floor=floor, profile=render(spec, LexicalPaths()))


def builtin_case(name: str, project: Path = PROJECT) -> Case:
    return make_case(f"builtin-{name}", resolve(project, locations(), profile=name).policy)


def fixture_case(name: str) -> Case:
    policy_file = FIXTURES / f"{name}.toml"
    return make_case(f"fixture-{name}", resolve(PROJECT, locations(), policy_file=policy_file).policy)


def hostile_case(number: int) -> Case:
    """The default profile for a project folder named HOSTILE_NAMES[number]."""
    policy = resolve(HOME / HOSTILE_NAMES[number], locations(), profile="default").policy
    return make_case(f"hostile-{number}", policy)


def all_cases() -> list[Case]:
    cases = [builtin_case(name) for name in builtin_names()]
    cases += [fixture_case(path.stem) for path in sorted(FIXTURES.glob("*.toml"))]
    cases += [hostile_case(0), hostile_case(1)]
    return cases


def golden_text(profile: Profile) -> str:
    """The profile, then its -D list as SBPL comments (values JSON-escaped: one line each)."""
    lines = [profile.text.rstrip("\n"), ";; ---- parameters: sandbox-exec -D NAME=value (values JSON-escaped) ----"]
    lines += [f";; {name}={json.dumps(value)}" for name, value in profile.params]
    return "\n".join(lines) + "\n"


# ---- a small SBPL reader, enough to check structure ----

TOKEN = re.compile(r'\s+|;[^\n]*|#"[^"]*"|"(?:[^"\\]|\\.)*"|\(|\)|[^\s()";]+')


def tokens(text: str) -> list[str]:
    """Tokens of SBPL source; raises ValueError on anything it cannot read."""
    found: list[str] = []
    position = 0
    while position < len(text):
        match = TOKEN.match(text, position)
        if not match:
            raise ValueError(f"unreadable SBPL at {position}: {text[position : position + 40]!r}")
        token = match.group(0)
        if not token.isspace() and not token.startswith(";"):
            found.append(token)
        position = match.end()
    return found


def forms(text: str) -> list[list]:
    """Top-level forms as nested lists; raises ValueError when parentheses do not balance."""
    stack: list[list] = [[]]
    for token in tokens(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise ValueError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1:
        raise ValueError("unbalanced '('")
    return stack[0]


def strings(text: str) -> list[str]:
    """Contents of every string literal, raw (#"...") or plain."""
    found = []
    for token in tokens(text):
        if token.startswith('#"'):
            found.append(token[2:-1])
        elif token.startswith('"'):
            found.append(token[1:-1])
    return found


def without_regexes(text: str) -> str:
    return re.sub(r'#"[^"]*"', '#""', text)
