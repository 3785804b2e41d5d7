"""The end-of-run summary kept short: grouped file reports, and a bound on its length.

A run that installs packages can create hundreds of files the summary must
mention (every `node_modules/*/package.json`); one line naming each is noise
nobody reads. Files are grouped by their top folder and name, and the whole
summary stays within MAX_LINES, saying how much was left out.
"""

from __future__ import annotations

import os

MAX_LINES = 10
MAX_ITEMS = 6  # groups named in one line
EXAMPLES = 2  # paths shown for a group of several


def grouped_files(touched: list[tuple[str, str]], project: str) -> str:
    """`node_modules/: 68 package.json created (node_modules/a/package.json, ...)`, one item per
    (top folder, file name, created|changed), largest groups first."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for path, how in touched:
        relative = os.path.relpath(path, project)
        top = relative.split("/", 1)[0] + "/" if "/" in relative else ""
        groups.setdefault((top, os.path.basename(path), how), []).append(relative)
    items: list[str] = []
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[1][0]))
    for (top, name, how), paths in ordered[:MAX_ITEMS]:
        if len(paths) == 1:
            items.append(f"{paths[0]} ({how})")
        else:
            shown = ", ".join(sorted(paths)[:EXAMPLES])
            items.append(f"{top or './'}: {len(paths)} {name} {how} ({shown}, ...)")
    hidden = len(ordered) - MAX_ITEMS
    if hidden > 0:
        items.append(f"and {sum(len(p) for _k, p in ordered[MAX_ITEMS:])} more in {hidden} other groups")
    return ", ".join(items)


def grouped_moves(quarantined: list[tuple[str, str]]) -> list[str]:
    """One line per moved path while few; past a few, one line for all of them."""
    if len(quarantined) <= 3:
        return [
            f"{original} was created or changed inside the sandbox at a protected path (a file that could run code "
            f"outside it, one the policy's deny_write names, or one that could not be checked); renamed to {moved}"
            for original, moved in quarantined
        ]
    examples = ", ".join(original for original, _moved in quarantined[:EXAMPLES])
    suffix = quarantined[0][1][len(quarantined[0][0]) :]
    return [
        f"{len(quarantined)} files at protected paths (that could run code outside the sandbox, or deny_write names) "
        f"were created or changed inside it ({examples}, ...); each was renamed to NAME{suffix} in its own folder"
    ]


def bounded(lines: list[str], limit: int = MAX_LINES) -> list[str]:
    if len(lines) <= limit:
        return lines
    return [*lines[: limit - 1], f"... and {len(lines) - limit + 1} more lines (stockade run --quiet silences this summary)"]
