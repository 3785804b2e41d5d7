"""`stockade check`: validate a policy and print the effective result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from stockade.cli.selection import select
from stockade.core.errors import UsageError
from stockade.core.locations import locate
from stockade.profiles.openings import open_ends
from stockade.profiles.resolve import baseline_note, untrusted_note
from stockade.profiles.serialize import policy_to_dict, policy_to_toml
from stockade.profiles.text import escaped_literal, say


def check(
    file: Annotated[Path | None, typer.Argument(help="Policy file (default: what `stockade run` would use here).")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Check a built-in profile instead.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    policy: Annotated[Path | None, typer.Option("--policy", "-p", help="Policy file, as `stockade run --policy` takes it.")] = None,
) -> None:
    if file is not None and policy is not None and file != policy:
        raise UsageError("give the policy file once: as an argument or with --policy")
    resolution = select(file or policy, profile)
    if as_json:
        data = policy_to_dict(resolution.policy)
        data["trusted"] = resolution.trusted
        data["ignored"] = list(resolution.dropped)
        data["open"] = open_ends(resolution.policy, str(locate().home))
        data["digest"] = _digest(file or policy)  # what a CI workflow pins (STOCKADE_POLICY_SHA256, profiles/citrust.py)
        data["baseline"] = {"files": list(resolution.baseline), "narrowed": list(resolution.bounded)}
        print(escaped_literal(json.dumps(data, indent=2, ensure_ascii=False)))
        return
    note = untrusted_note(resolution)
    if note:
        say(note)
    bound = baseline_note(resolution)
    if bound or resolution.baseline:
        say(bound or f"stockade: bounded by the system baseline ({', '.join(resolution.baseline)}), which takes nothing from this policy")
    for line in open_ends(resolution.policy, str(locate().home)):
        say(f"stockade: note: {_trust_hint(line, resolution.project_file) if note else line}")
    print(policy_to_toml(resolution.policy), end="")


def _digest(file: Path | None) -> str | None:
    """content_digest of the file and what it extends, or None for a built-in or no file."""
    from stockade.core.locations import locate
    from stockade.profiles.citrust import content_digest
    from stockade.profiles.discovery import find_project_policy
    from stockade.profiles.resolve import layers_of

    path = file or find_project_policy(Path.cwd())
    if path is None:
        return None
    return content_digest(layers_of(path.resolve(), locate()))


def _trust_hint(line: str, project_file: Path | None) -> str:
    """An `(add "HOST" to allow)` for a host the untrusted file already lists: what it needs is trust."""
    import re

    from stockade.profiles.hints import listed_in

    match = re.search(r'\(add "([^"]+)" to allow\)', line)
    if match is None or project_file is None or not listed_in(str(project_file), match.group(1)):
        return line
    return line.replace(match.group(0), f"(it is in {project_file}, which is not trusted: run `stockade trust {project_file}`)")
