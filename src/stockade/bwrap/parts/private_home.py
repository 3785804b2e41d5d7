"""The sandbox's own home: an empty tmpfs at the real home's path, showing only what the policy names.

A deny list can only name the credential stores someone remembered; a home
that shows nothing but the places a run needs keeps every other one unreadable,
including stores nobody has listed yet. The same tmpfs makes home writable for
the tools that put scratch or first-run state there (nyc's spawn-wrap, caches,
history files): what they write is gone when the run ends, and never reaches
the real home. The sandbox's $HOME keeps its path, so tools find their
configuration where they look for it.

Shown read-only, when they exist: `allow_read` entries, the host PATH's folders
(and the virtualenv a `bin` folder belongs to), the project and the working
directory. Writable roots inside home are bound by mounts.py as before. A shown
entry that is a symlink (dotfiles kept in a repository) shows its target's
content at the entry's own path; mounts.py hides what is denied (and the host
sockets) inside the target at that path too. One whose target lies in a writable
place is a symlink of the sandbox's own instead: a bind from there would follow
whatever link a concurrent sandbox put in its place. A target that holds the home
itself (`~/.local/bin -> ~`, `-> /`) or a folder every sandbox gets privately
(/tmp, /run) is not shown: bound elsewhere, it would show them whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stockade.profiles.paths import is_within


@dataclass(frozen=True)
class Shown:
    """One place of the real home visible inside: `path` inside shows `source` (its real path)."""

    path: str
    source: str


def applies(mode: str, home: str, roots: Iterable[str], denied: Iterable[str]) -> bool:
    """A private home is made unless the policy asks for the real one, or the home is already
    writable or hidden whole (a project that is the home, `allow_write = ["~"]`)."""
    if mode != "private" or home in ("", "/") or not os.path.isdir(home):
        return False
    return not any(is_within(home, place) for place in (*roots, *denied))


def account_home() -> str:
    """The user's home from the password database (its real path), "" when there is none."""
    import pwd

    try:
        return os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, OSError):
        return ""


# stockade's own package folder, shown with the home's wanted places (mounts.py): installed editable from
# a checkout under the home (the README's setup), `stockade run` inside a sandbox could not import itself,
# where it should run the command as it is (cli/nested.py). Only this folder: the folders other .pth files
# name are not shown, since a virtualenv an earlier run could write may name any.
OWN_CODE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def wanted(allow_read: Iterable[str], path_dirs: Iterable[str], env: Mapping[str, str], anchors: Iterable[str]) -> list[str]:
    """Every path the run would like to see, before checking where each lies and what exists."""
    places = [*allow_read, *anchors]
    for folder in path_dirs:
        if not os.path.isabs(folder):
            continue
        places.append(folder)
        parent = os.path.dirname(folder.rstrip("/"))
        if os.path.basename(folder.rstrip("/")) == "bin" and os.path.isfile(os.path.join(parent, "pyvenv.cfg")):
            places.append(parent)  # an active virtualenv: its lib folder holds what its bin runs
    venv = env.get("VIRTUAL_ENV", "")
    if os.path.isabs(venv):
        places.append(venv)
    return list(dict.fromkeys(os.path.normpath(place) for place in places))


def top_level_links(home: str) -> list[tuple[str, str, str]]:
    """(path, link text, real target) of each symlink directly in `home`: a `~/work` that leads
    to `/data/work` is how many users reach their projects, and paths written through it
    (a venv's shebangs) must still resolve inside."""
    found: list[tuple[str, str, str]] = []
    try:
        with os.scandir(home) as entries:
            for entry in entries:
                if entry.is_symlink():
                    try:
                        found.append((entry.path, os.readlink(entry.path), os.path.realpath(entry.path)))
                    except OSError:
                        continue
    except OSError:
        return []
    return found


def shown_places(home: str, places: Iterable[str], roots: Iterable[str], denied: Iterable[str], private: Iterable[str] = ()) -> list[Shown]:
    """The places inside `home` to bind read-only; outer ones only (an inner one is shown already).

    A place inside a writable root is bound by that root; one that is, or resolves into, a
    denied place stays hidden; so does a symlinked one whose target holds the home or
    overlaps one of the `private` folders (the sandbox's own /tmp, /run)."""
    roots, denied, private = list(roots), list(denied), list(private)
    found: list[Shown] = []
    for place in places:
        if place == home or not is_within(place, home) or any(is_within(place, root) for root in roots):
            continue
        if not os.path.lexists(place):
            continue
        source = os.path.realpath(place)
        if not os.path.exists(source) or any(is_within(place, d) or is_within(source, d) for d in denied):
            continue
        if source != place and (is_within(home, source) or any(is_within(source, d) or is_within(d, source) for d in private)):
            continue  # bound at another path, no mask of the home or of /tmp, /run would cover it
        found.append(Shown(place, source))
    found.sort(key=lambda shown: len(shown.path))
    outer: list[Shown] = []
    for shown in found:
        if not any(is_within(shown.path, kept.path) for kept in outer):
            outer.append(shown)
    return outer
