"""Make a project's `**/NAME` rules reach every place the user's own policy opens.

`deny_read = ["**/.env"]` is written relative to the project, but its author
means "no `.env` the sandbox can reach": that includes a folder elsewhere the
policy makes writable (`allow_write = ["~/src/shared"]`) or shows in a
private home (`allow_read = ["~/notes"]`). So each such rule gets one copy
per place, spelled under it (`~/src/shared/**/.env`), and from then on it is
an ordinary rule: `check` lists it, both backends enforce it.

Places only built-in profiles open are left out. They are the package caches
(`~/.npm`, `~/.cache/pip`, `~/.cargo/registry`) that hold what package
managers downloaded, never a user's secrets, and walking them on every plan
would cost more than the sandbox does. A user who does want a rule there
writes it with that place: `~/.npm/**/.env`.

Only writable places get `deny_write` copies: a shown place is read-only anyway.
"""

from __future__ import annotations

from collections.abc import Iterable

from stockade.profiles.paths import is_within

ANYWHERE = "**/"


def spread(rules: tuple[str, ...], project: str, places: Iterable[str]) -> tuple[str, ...]:
    """`rules` plus, for each rule `PROJECT/**/REST`, `PLACE/**/REST` for every place outside the project."""
    base = project.rstrip("/")
    tails = [rule[len(base) :] for rule in rules if rule.startswith(base + "/" + ANYWHERE)]  # "/**/REST"
    outside = [place for place in dict.fromkeys(places) if not is_within(place, project)]
    copies = [place.rstrip("/") + tail for place in outside for tail in tails]
    return tuple(dict.fromkeys((*rules, *copies)))
