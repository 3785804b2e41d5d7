"""The mandatory floor: what holds whatever a policy says, as data for every backend.

Files that run code later, outside the sandbox, stay read-only even inside a
writable place; stockade's own state stays out of sight.
"""

from __future__ import annotations

from dataclasses import dataclass

from stockade.core.locations import Locations
from stockade.profiles import runs_later
from stockade.profiles.paths import is_within

# The table of files that run code later, with each entry's source, is runs_later.py.
RUNS_LATER_IN_PROJECT: tuple[str, ...] = runs_later.paths(runs_later.P, runs_later.PROTECTED)
RUNS_LATER_IN_HOME: tuple[str, ...] = runs_later.paths(runs_later.H, runs_later.PROTECTED)
# Entries that are folders when they exist: what is inside one is watched after the run as well.
FOLDER_NAMES: frozenset[str] = runs_later.folders() | {"stockade", ".pip"}
# Ordinary work that runs code later: stays writable, named in the summary when created or changed.
REPORTED_WHEN_CHANGED: tuple[str, ...] = runs_later.paths(runs_later.P, runs_later.REPORTED)


def is_folder_entry(path: str) -> bool:
    """Whether a floor path names a folder (FOLDER_NAMES)."""
    return any(path == name or path.endswith("/" + name) for name in FOLDER_NAMES)


def reported_patterns(project: str) -> tuple[str, ...]:
    """Absolute globs for REPORTED_WHEN_CHANGED inside one project: a folder entry's files at the
    project's top, a path with a folder at the top, a bare name at any depth."""
    root = project.rstrip("/")
    return tuple(
        f"{root}/{name}/*" if name in FOLDER_NAMES else f"{root}/{name}" if "/" in name else f"{root}/**/{name}" for name in REPORTED_WHEN_CHANGED
    )


def swept_patterns(project: str) -> tuple[str, ...]:
    """Runs-later files anywhere in the project, as globs.

    The floor's mounts cover the places that exist at the start; a repository
    or folder made during the run (`git init sub`) cannot be covered, so any
    such file created or changed there is moved aside after the run.
    """
    root = project.rstrip("/")
    patterns = [f"{root}/**/{name}" for name in RUNS_LATER_IN_PROJECT]
    patterns += [f"{root}/**/{name}/*" for name in RUNS_LATER_IN_PROJECT if name in FOLDER_NAMES]
    patterns += [f"{root}/**/.git/modules/**/{name}" for name in ("hooks/*", "config", "commondir", "config.worktree")]
    patterns += [f"{root}/**/.git/worktrees/*/{name}" for name in ("commondir", "config.worktree")]
    # a git dir under any other name is found by what it holds (bwrap/after/gitcheck.py judges these)
    patterns += [f"{root}/**/HEAD", f"{root}/**/config", f"{root}/**/hooks/*"]
    # a git dir's hooks folder turned into a link (to hooks written elsewhere), or made a file
    patterns.append(f"{root}/**/hooks")
    # what else git reads as configuration in any git dir: judged with it (bwrap/after/gitcheck.py)
    patterns += [f"{root}/**/config.worktree", f"{root}/**/commondir", f"{root}/**/info/attributes"]
    # a `.git` file or link names a git dir elsewhere, whose hooks and config nothing here checks
    patterns.append(f"{root}/**/.git")
    # A real folder counts only through a `/*` pattern (what is inside `.vscode/`); matched by its
    # own name it is a file or a link to be moved aside (`.git/hooks` linked to hooks kept elsewhere).
    return tuple(patterns)


@dataclass(frozen=True)
class Floor:
    """Floor paths for one run: read-only inside, or hidden entirely."""

    read_only: tuple[str, ...]
    hidden: tuple[str, ...]


def floor_for(
    writable_roots: tuple[str, ...],
    locations: Locations,
    policy_files: tuple[str, ...] = (),
    anchors: tuple[str, ...] = (),
) -> Floor:
    """Protected paths that some writable root would otherwise expose to writes.

    Project files are protected at every writable root and at every anchor
    (the project, the working directory, each allow_write entry even when a
    broader one covers it). Every candidate is returned when it lies inside a
    writable root, whether or not it exists yet: a backend must stop its
    creation too.
    """
    home = str(locations.home)
    places = dict.fromkeys((*writable_roots, *anchors))
    candidates = [f"{place.rstrip('/')}/{name}" for place in places for name in RUNS_LATER_IN_PROJECT]
    candidates += [f"{home}/{name}" for name in RUNS_LATER_IN_HOME]
    candidates += [str(locations.config), *policy_files]
    read_only = tuple(dict.fromkeys(p for p in candidates if any(is_within(p, root) for root in writable_roots)))
    # stockade's own files, whatever a policy shows: state (CA key, audit logs, stages), cache (plans),
    # runtime (sockets) and config (the trust store, the user's config): issue 33
    hidden = tuple(str(p) for p in (*locations.private_dirs(), locations.config))
    return Floor(read_only=read_only, hidden=hidden)


def floor_summary() -> list[str]:
    """The floor in plain words, for `stockade explain`."""
    return [
        "writes are denied everywhere except allow_write and a private /tmp",
        "deny_* rules beat allow_* rules",
        "files that run code later stay read-only inside writable places: "
        + ", ".join(RUNS_LATER_IN_PROJECT[:8])
        + ", ... and shell rc files, ~/.ssh, ~/.config/stockade",
        "the sandbox cannot gain privileges: no new privileges, no setuid, no new user namespaces, no capabilities",
        "with no network rule at all, the network is off",
        "stockade's own state (audit logs, filter cache, control socket) is hidden from the sandbox",
    ]


def stage_marks(project: str, deny_write: tuple[str, ...], home: str | None = None) -> list[tuple[str, str]]:
    """What a stage's review marks, and no automatic accept applies (checkpoints/stage.py): each as
    (a regular expression over the absolute path, why). Files that run code later anywhere in the
    project, git's config and hooks in every repository it holds, and deny_write's matches."""
    from stockade.profiles.paths import glob_to_regex

    root = project.rstrip("/")
    marks: list[tuple[str, str]] = []
    for name in RUNS_LATER_IN_PROJECT:
        why = f"runs code later ({name})"
        marks.append((glob_to_regex(f"{root}/**/{name}"), why))
        if name in FOLDER_NAMES:
            marks.append((glob_to_regex(f"{root}/**/{name}/**"), why))
    if home is not None and (home == root or home.startswith(root + "/")):  # a project that holds the home: its files too
        for name in RUNS_LATER_IN_HOME:
            why = f"runs code later (~/{name})"
            marks.append((glob_to_regex(f"{home.rstrip('/')}/{name}"), why))
            marks.append((glob_to_regex(f"{home.rstrip('/')}/{name}/**"), why))
    git = "git runs it later"
    git_files = ("info/attributes", "hooks/**", "modules/**/config", "modules/**/hooks", "modules/**/hooks/**", "modules/**/commondir")
    for name in (*git_files, "modules/**/config.worktree", "modules/**/info/attributes"):
        marks.append((glob_to_regex(f"{root}/**/.git/{name}"), git))
    for name in ("commondir", "config.worktree"):
        marks.append((glob_to_regex(f"{root}/**/.git/worktrees/*/{name}"), git))
    marks.append((glob_to_regex(f"{root}/**/.git"), "a repository's git dir, or a link to one elsewhere"))
    for pattern in deny_write:
        marks.append((glob_to_regex(pattern), "deny_write"))
        marks.append((glob_to_regex(pattern.rstrip("/") + "/**"), "deny_write"))
    return marks
