"""Ref patterns of `push = [...]` in `[network.http."HOST"]`: which refs a git push may update.

    [network.http."github.com"]
    push = ["refs/heads/agent/*", "refs/tags/v*"]

A pattern is a full ref name (`refs/...`): `*` matches within one
component, and `**` as a whole component matches any number of components
(`refs/heads/agent/**` covers `refs/heads/agent/a/b`). A push is allowed
only when every ref it updates, creates or deletes matches some pattern.

Used by the policy loader (validation, canonical spelling) and by the daemon
(matching the ref names read from a `git-receive-pack` request); nothing
here is on a run's cached path.
"""

from __future__ import annotations

import re

# What git's check-ref-format refuses anywhere in a ref name (besides the rules on components below).
MAX_REF_BYTES = 1024  # longer than any ref a filesystem holds as a loose ref (a component is at most 255 bytes)
_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?\[\\]|\.\.|@\{|//")


def parse_ref_pattern(text: str) -> str:
    """The canonical spelling of a push pattern; ValueError saying what is wrong and how it should look."""
    pattern = text.strip()
    if not pattern.startswith("refs/"):
        raise ValueError(f'{text!r} is not a full ref name: write it as "refs/heads/NAME" (a branch) or "refs/tags/NAME"')
    if _BAD_REF.search(pattern.replace("*", "x")):
        raise ValueError(f"{text!r} holds what no ref name can (a space, ~ ^ : ? [ \\, .., @{{ or //)")
    components = pattern.split("/")
    for component in components:
        if not component:
            raise ValueError(f"{text!r} has an empty component (a trailing /?): end it with /* or /**")
        if "**" in component and component != "**":
            raise ValueError(f"** in {text!r} must be a whole component (/**), not part of {component!r}")
        if component.startswith(".") or component.endswith(".lock"):
            raise ValueError(f"{text!r} has a component no ref name can have ({component!r})")
    if len(components) < 3 and "**" not in components:
        raise ValueError(f'{text!r} names no ref: add a name below it, e.g. "{pattern.rstrip("/")}/*"')
    return pattern


def ref_name_problem(ref: str) -> str | None:
    """Why a ref name read from a push is not one git would send (so the push is refused), or None."""
    if not ref.startswith("refs/") or _BAD_REF.search(ref) or "*" in ref:
        return f"{shown_ref(ref)} is not a valid ref name"
    if len(ref.encode("utf-8")) > MAX_REF_BYTES:
        return f"{shown_ref(ref)} is longer than {MAX_REF_BYTES} bytes"
    components = ref.split("/")
    if any(not part or part.startswith(".") or part.endswith(".lock") for part in components) or ref.endswith("."):
        return f"{shown_ref(ref)} is not a valid ref name"
    return None


def ref_matches(pattern: str, ref: str) -> bool:
    """Whether a (valid) ref name is covered by a canonical pattern.

    In time linear in the pattern's components times the ref's: the ref comes from the sandbox,
    and a backtracking match of a pattern with `**` against a ref of thousands of components
    would hold the shared daemon for minutes (every session of the user waits on it)."""
    from stockade.profiles.httprules import _segment_matches

    segments = ref.split("/")
    positions = {0}  # how many of the ref's components the pattern's components so far can cover
    for part in pattern.split("/"):
        if part == "**":
            positions = set(range(min(positions), len(segments) + 1))
        else:
            positions = {at + 1 for at in positions if at < len(segments) and _segment_matches(part, segments[at])}
        if not positions:
            return False
    return len(segments) in positions


def first_match(patterns: tuple[str, ...], ref: str) -> str | None:
    return next((pattern for pattern in patterns if ref_matches(pattern, ref)), None)


def shown_ref(ref: str, limit: int = 200) -> str:
    """A ref name as records and messages show it: printable, and cut."""
    text = ref.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."
