"""What `stockade learn` proposes from one run's refusals: the smallest policy entries that allow them.

The input is what a run refused, as data (Invocation.findings: the proxy's
denials with their hints, and --trace's file denials with their kind of
wall). Every refusal either becomes one entry for one list of the policy, or
is withheld with the reason and what to do instead. The rules:

- a host exactly as the request named it (the denial's own hint: never a
  wildcard, so never `*` on a public suffix); an HTTP rule as the hint says;
- a read the private home refused: that path, if it exists in the real home;
- a write outside allow_write: the folder the run created something in, or the
  file it wrote; never `/`, the home itself or a folder above it;
- never a secret: a path the policy's deny_read or the built-in secrets list
  covers, whatever hid it, is withheld with the safer way (a credential the
  proxy adds, [credentials.NAME]); never what the floor protects, nor a
  deny_write entry of the policy's own (those are the user's to remove).

Paths are spelled `~/...` under the home, absolute elsewhere. Entries come
smallest first: hosts, HTTP rules, reads, writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stockade.profiles.editing import Entry
from stockade.profiles.hints import http_entry, rule_of
from stockade.profiles.paths import glob_to_regex, is_glob, is_within

CREDENTIAL_ADVICE = (
    "if a tool needs a token from it to reach a host, give the token as [credentials.NAME] with that host: "
    "the sandbox gets a placeholder and the proxy adds the value"
)
WRITE_OPERATIONS = {"write", "create", "remove", "rename", "change"}


@dataclass
class Proposal:
    entries: list[Entry] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)  # one line per refusal learn will not allow, with why


def propose(
    findings: Mapping[str, object],
    *,
    home: str,
    secrets: Iterable[str],
    exists: Callable[[str], bool] = os.path.lexists,
    realpath: Callable[[str], str] = os.path.realpath,
) -> Proposal:
    """The entries that would allow what this run was refused, and the refusals withheld."""
    proposal = Proposal()
    hosts: dict[str, int] = {}
    rules: dict[tuple[str, str, str], int] = {}
    for denial in _dicts(findings.get("network")):
        hint, count = str(denial.get("hint") or ""), _int(denial.get("count"), 1)
        where = f"{denial.get('host')}:{denial.get('port')}"
        host_rule = rule_of(hint) if hint else None
        http = http_entry(hint) if hint else None
        if host_rule is not None:
            hosts[host_rule] = hosts.get(host_rule, 0) + count
        elif http is not None:
            rules[http] = rules.get(http, 0) + count
        else:
            proposal.withheld.append(f"network {where}: {denial.get('rule')}; {_network_reason(str(denial.get('rule') or ''))}")
    for host_rule, count in hosts.items():
        proposal.entries.append(Entry(("network",), "allow", host_rule, f"learn: {_times(count, 'request')} refused"))
    for (host, key, rule), count in rules.items():
        what = "push" if key == "push" else "request"
        proposal.entries.append(Entry(("network", "http", host), key, rule, f"learn: {_times(count, what)} refused"))
    secret_patterns = [(pattern, _matcher(pattern)) for pattern in secrets]
    reads: dict[str, str] = {}
    writes: dict[str, str] = {}
    for denial in _dicts(findings.get("files")):
        path, operation, wall = str(denial.get("path") or ""), str(denial.get("operation") or ""), str(denial.get("wall") or "")
        if not path.startswith("/"):
            continue
        shown = spelled(path, home)
        # The real path too: a link in the real home to a secret is the secret (the run saw the link's name).
        real = realpath(path)
        covering = next((pattern for pattern, matches in secret_patterns if matches(path) or matches(real)), None)
        if covering is not None or wall == "deny_read":
            why = f"deny_read {spelled(covering, home)} covers it" if covering is not None else denial.get("rule")
            proposal.withheld.append(f"{operation} {shown}: a secret ({why}); never proposed; {CREDENTIAL_ADVICE}")
            continue
        if wall == "private_home":
            if not exists(path):
                continue  # a tool looking for an optional file: nothing to allow
            if operation in WRITE_OPERATIONS:
                writes.setdefault(*_write_place(path, operation, home, exists, proposal, shown))
            else:
                reads.setdefault(path, f"learn: {operation} refused by the private home")
        elif wall == "outside_write":
            writes.setdefault(*_write_place(path, operation, home, exists, proposal, shown))
        else:
            proposal.withheld.append(f"{operation} {shown}: {denial.get('rule')}; {_file_reason(wall)}")
    writes.pop("", None)
    for place in _outermost(reads):
        proposal.entries.append(Entry(("filesystem",), "allow_read", spelled(place, home), reads[place]))
    for place in _outermost(writes):
        proposal.entries.append(Entry(("filesystem",), "allow_write", spelled(place, home), writes[place]))
    proposal.withheld = list(dict.fromkeys(proposal.withheld))
    return proposal


def builtin_secrets(project: Path, home: Path) -> tuple[str, ...]:
    """The built-in default's deny_read: credential stores never proposed, whatever the policy hides."""
    from stockade.profiles.loader import load_builtin

    values = load_builtin("default", project_dir=project, home=home).values.get("filesystem", {})
    return tuple(values.get("deny_read", ()))


def fix_of(denial: Mapping[str, object], *, home: str, secrets: Iterable[str]) -> str:
    """What would allow one refused file access, as a report's line ends; "" when no entry would.
    A secret says so, with the safer way."""
    proposal = propose({"files": [denial]}, home=home, secrets=secrets)
    if proposal.entries:
        return f"to allow it, add {json.dumps(proposal.entries[0].value)} to {proposal.entries[0].where}"
    if proposal.withheld and ": a secret (" in proposal.withheld[0]:
        return "a secret, never allowed: give a token it holds as [credentials.NAME] for the host it is for"
    return ""


def _write_place(path: str, operation: str, home: str, exists: Callable[[str], bool], proposal: Proposal, shown: str) -> tuple[str, str]:
    """The place to make writable for a refused write: the file itself when it exists and was
    written, else the folder it was made in (one below the home is made by the run if absent)."""
    place = path if operation in ("write", "change") and exists(path) else os.path.dirname(path)
    if place == "/" or is_within(home, place) or place.count("/") < 2:
        named = "your home" if place == home else spelled(place, home)
        proposal.withheld.append(
            f"{operation} {shown}: allowing it would make {named} writable, which learn never proposes; "
            "point the tool at a folder of its own (a cache or output option), then learn again"
        )
        return "", ""
    if not exists(place) and not is_within(place, home):
        proposal.withheld.append(f"{operation} {shown}: its folder {place} does not exist; make it, then learn again")
        return "", ""
    return place, f"learn: {operation} {shown} refused (outside allow_write)"


def _outermost(places: Mapping[str, str]) -> list[str]:
    """Each place once, without those inside another proposed place; files before folders, then by name."""
    kept = [place for place in places if not any(other != place and is_within(place, other) for other in places)]
    return sorted(kept, key=lambda place: (place.count("/"), place), reverse=False)


def spelled(path: str, home: str) -> str:
    """`~/x` under the home, the absolute path elsewhere: how a policy file names it for any user."""
    if is_within(path, home) and path != home:
        return "~/" + os.path.relpath(path, home)
    return path


def _matcher(pattern: str) -> Callable[[str], bool]:
    if is_glob(pattern):
        expression = re.compile(glob_to_regex(pattern))
        return lambda path: bool(expression.fullmatch(path))
    return lambda path: is_within(path, pattern)


def _network_reason(rule: str) -> str:
    if rule.startswith(('deny "', "http deny ")):
        return "a deny entry of your policy refused it; learn does not undo a deny"
    if rule.startswith("credential "):
        return "a credential's placeholder went where it may not; where it may go is its [credentials.NAME] hosts"
    return "no policy line allows this"


def _file_reason(wall: str) -> str:
    return {
        "floor": "the floor protects it whatever the policy says; do this outside the sandbox",
        "deny_write": "a deny_write entry of your policy; learn does not undo it (remove the entry if it is wrong)",
        "unreadable": "its owner may not read it outside the sandbox either",
        "seccomp": "the seccomp filter refuses setuid and setgid bits in every sandbox",
        "permissions": "the file's own permissions refused it, as they would outside the sandbox",
    }.get(wall, "no policy line allows this")


def _times(count: int, what: str) -> str:
    return f"{count} {what}{'s' if count != 1 else ''}"


def _dicts(value: object) -> list[Mapping[str, object]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
