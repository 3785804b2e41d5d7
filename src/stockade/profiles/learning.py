"""What `stockade learn` proposes from one run's refusals: the smallest policy entries that allow them.

The input is what a run refused, as data (Invocation.findings: the proxy's
denials with their hints, and --trace's file denials with their kind of
wall). Every refusal either becomes one entry for one list of the policy, or
is withheld with the reason and what to do instead. The rules:

- a host exactly as the request named it (the denial's own hint: never a
  wildcard, so never `*` on a public suffix); an HTTP rule as the hint says;
- a read the private home refused: that path, if it exists in the real home;
  never the home itself or a folder above it;
- a write outside allow_write: the folder the run created something in, or the
  file it wrote (or made anew: a create of a file that exists); never `/`, the
  home itself or a folder above it, and never a folder for a write or change
  of the folder itself (a touched folder does not need its contents writable);
- a host as the hint names it, unless it is an address no run reaches by
  default (loopback, private, link-local such as a cloud's metadata service):
  the next round would reach it unreviewed, so the user adds it by hand;
- never a secret: a path the policy's deny_read or the built-in secrets list
  covers, whatever hid it, is withheld with the safer way (a credential the
  proxy adds, [credentials.NAME]); never what the floor protects, nor a
  deny_write entry of the policy's own (those are the user's to remove). The
  floor's paths (`protected`) are withheld whatever wall refused them: a
  private-home refusal of ~/.bashrc names no floor, yet the floor protects it;
- a path no policy can spell (a `*`, a line break, a NUL) is withheld: the next
  round's layer could not hold it.

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
UNSPELLABLE = ("*", "\n", "\r", "\0")
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
    isdir: Callable[[str], bool] = os.path.isdir,
    protected: Iterable[str] = (),
    hidden: Iterable[str] = (),
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
        if host_rule is not None and _private_address(host_rule):
            proposal.withheld.append(
                f"network {where}: {host_rule} is not a public address (loopback, private or link-local, "
                "where a cloud keeps its metadata and credentials); learn never opens one; add it by hand if you mean it"
            )
        elif host_rule is not None:
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
    floor, hidden_floor = tuple(protected), tuple(hidden)
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
        walled = floor if operation in WRITE_OPERATIONS else hidden_floor
        floor_place = next((place for place in walled if is_within(path, place) or is_within(real, place)), None)
        if floor_place is not None:
            proposal.withheld.append(f"{operation} {shown}: {_file_reason('floor')} ({spelled(floor_place, home)})")
            continue
        if wall == "private_home":
            if not exists(path):
                continue  # a tool looking for an optional file: nothing to allow
            if operation in WRITE_OPERATIONS:
                writes.setdefault(*_write_place(path, operation, home, (exists, isdir, realpath), proposal, shown))
            elif is_within(home, path) or is_within(realpath(home), real):
                proposal.withheld.append(f"{operation} {shown}: allowing it would make your home readable, which learn never proposes")
            elif inside := next((p for p, _m in secret_patterns if not is_glob(p) and (is_within(p, path) or is_within(p, real))), None):
                proposal.withheld.append(
                    f"{operation} {shown}: it holds a secret ({spelled(inside, home)}), which learn never makes readable; "
                    "list the files inside it you need"
                )
            else:
                reads.setdefault(path, f"learn: {operation} refused by the private home")
        elif wall == "outside_write":
            writes.setdefault(*_write_place(path, operation, home, (exists, isdir, realpath), proposal, shown))
        else:
            proposal.withheld.append(f"{operation} {shown}: {denial.get('rule')}; {_file_reason(wall)}")
    writes.pop("", None)
    for places in (reads, writes):
        for place in [place for place in places if any(char in place for char in UNSPELLABLE)]:
            proposal.withheld.append(f"{shown_path(place, home)}: a policy cannot name this path (a '*', a line break or a NUL)")
            del places[place]
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


def fix_of(denial: Mapping[str, object], *, home: str, secrets: Iterable[str], hidden: Iterable[str] = ()) -> str:
    """What would allow one refused file access, as a report's line ends; "" when no entry would.
    A secret says so, with the safer way; `hidden`: what the floor hides (stockade's own files)."""
    hidden = tuple(hidden)
    proposal = propose({"files": [denial]}, home=home, secrets=secrets, protected=hidden, hidden=hidden)
    if proposal.entries:
        return f"to allow it, add {json.dumps(proposal.entries[0].value)} to {proposal.entries[0].where}"
    if proposal.withheld and ": a secret (" in proposal.withheld[0]:
        return "a secret, never allowed: give a token it holds as [credentials.NAME] for the host it is for"
    return ""


def _write_place(
    path: str,
    operation: str,
    home: str,
    host: tuple[Callable[[str], bool], Callable[[str], bool], Callable[[str], str]],
    proposal: Proposal,
    shown: str,
) -> tuple[str, str]:
    """The place to make writable for a refused write: the file itself when it exists and was
    written (or created anew), else the folder it was made in (one below the home is made by the
    run if absent). A write or change of a folder itself, or a create of one that exists, makes
    nothing writable: it needs no file inside it writable, and granting the folder would let the
    next round write every file there (a .pth file in ~/.local/lib, an editor's init file)."""
    exists, isdir, realpath = host
    rewrites = operation in ("write", "change", "create") and exists(path)
    if rewrites and isdir(path):
        proposal.withheld.append(
            f"{operation} {shown}: a {operation} of a folder itself, which exists; learn never makes a folder writable for it "
            "(allow_write it yourself if its files need writing)"
        )
        return "", ""
    place = path if rewrites else os.path.dirname(path)
    if place == "/" or is_within(home, place) or is_within(realpath(home), realpath(place)) or place.count("/") < 2:
        named = "your home" if place == home else spelled(place, home)
        proposal.withheld.append(
            f"{operation} {shown}: allowing it would make {named} writable, which learn never proposes; "
            "point the tool at a folder of its own (a cache or output option), then learn again"
        )
        return "", ""
    if not exists(place) and not is_within(place, home):
        proposal.withheld.append(f"{operation} {shown}: its folder {place} does not exist; make it, then learn again")
        return "", ""
    git_dir = _enclosing_git_dir(place, exists, isdir)
    if git_dir is not None:
        proposal.withheld.append(
            f"{operation} {shown}: it is inside the git dir {spelled(git_dir, home)}, whose hooks and config run on the host; "
            "learn never makes one writable (run git there outside the sandbox, or make its work tree the project)"
        )
        return "", ""
    return place, f"learn: {operation} {shown} refused (outside allow_write)"


def _enclosing_git_dir(place: str, exists: Callable[[str], bool], isdir: Callable[[str], bool]) -> str | None:
    """The git dir `place` is or lies in: a folder named .git, or one git takes for a git dir
    (HEAD, objects and refs), at `place` or above it."""
    current = place
    while current != "/":
        if os.path.basename(current) == ".git" or (
            exists(os.path.join(current, "HEAD")) and isdir(os.path.join(current, "objects")) and isdir(os.path.join(current, "refs"))
        ):
            return current
        current = os.path.dirname(current)
    return None


def _private_address(rule: str) -> bool:
    """Whether a host rule names an address no run reaches unless its policy lists it."""
    import ipaddress

    from stockade.profiles.addresses import address_kind

    text = rule[1:].partition("]")[0] if rule.startswith("[") else rule
    if text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address_kind(address) is not None


def _outermost(places: Mapping[str, str]) -> list[str]:
    """Each place once, without those inside another proposed place; files before folders, then by name."""
    kept = [place for place in places if not any(other != place and is_within(place, other) for other in places)]
    return sorted(kept, key=lambda place: (place.count("/"), place), reverse=False)


def spelled(path: str, home: str) -> str:
    """`~/x` under the home, the absolute path elsewhere: how a policy file names it for any user."""
    if is_within(path, home) and path != home:
        return "~/" + os.path.relpath(path, home)
    return path


def shown_path(path: str, home: str) -> str:
    """A path for a line of text: spelled, with what a terminal would act on escaped."""
    from stockade.profiles.text import shown

    return shown(spelled(path, home))


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
