"""`stockade learn -- CMD`: run a command enforced, and propose the policy change that lets it work.

Each round runs the command in the sandbox under the policy a plain run would
use, plus what earlier rounds learned (a layer of the user's own on top:
profiles/resolve.py), with --trace's file tracing and the proxy's audit,
and turns every refusal into the smallest entry that allows it
(profiles/learning.py). A round that learns nothing new ends it; a pip
install needs two (the index names the file host only once it is reached).
So the command runs up to --rounds times: learn commands you would run twice.

A network-off policy is learned under an empty allowlist (every request
refused, each with its host), so the hosts a command needs are seen, never
reached. The proposal is printed as a diff of the policy file; `--write`
applies it with the file's comments and layout kept (profiles/editing.py,
as `stockade allow` does) and leaves it untrusted until `stockade trust`:
a command the user ran is not a reason to trust a file a repository shipped.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Annotated

import typer

from stockade.cli.run_options import host_platform
from stockade.core.errors import SandboxSetupError, UsageError
from stockade.core.invocation import Invocation
from stockade.core.locations import Locations, locate
from stockade.profiles.discovery import policy_to_edit
from stockade.profiles.editing import Entry, add_entries, read_text, write_checked
from stockade.profiles.learning import Proposal, builtin_secrets, propose
from stockade.profiles.model import NetworkMode
from stockade.profiles.paths import is_within
from stockade.profiles.resolve import resolve
from stockade.profiles.text import say, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.core.backend import Backend

MAX_ROUNDS = 10
MAX_NEW = 100  # entries one round may add; past it the rest are counted


def learn(
    ctx: typer.Context,
    policy: Annotated[Path | None, typer.Option("--policy", "-p", help="Policy file to learn for (default: this project's .stockade.toml).")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Start from this built-in; a new .stockade.toml extends it.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Apply the proposal to the policy file (comments kept; it stays untrusted).")] = False,
    rounds: Annotated[
        int, typer.Option("--rounds", help="Run the command at most this many times (each round does what the command does).", min=1, max=MAX_ROUNDS)
    ] = 4,
) -> None:
    command = list(ctx.args)
    if not command:
        raise UsageError("learn: give the command after --, for example: stockade learn -- pip download requests -d dl")
    if command[0].startswith("-"):  # Typer passes options it does not know on with the command
        raise UsageError(f"learn: unknown option {command[0]!r}; `stockade learn --help` lists the options (the command goes after --)")
    if policy is not None and profile is not None:
        raise UsageError("learn: give either --policy or --profile, not both")
    try:
        cwd = os.getcwd()
    except FileNotFoundError:
        raise SandboxSetupError("the working directory no longer exists: cd to a folder that does, then run it again") from None
    target = policy_to_edit(Path(cwd), policy)
    if target.is_symlink():
        raise UsageError(f"{target} is a symlink; stockade learn edits no file through a link: give the file itself with --policy")
    locations = locate()
    shown_before = _last_proposal(locations, target, command, policy, profile) if write else None
    if shown_before is not None:  # what a run without --write showed: written as shown, the command not run again
        entries, not_proposed, when = shown_before
        say(f"stockade learn: writing the proposal learn showed for this command at {when}, without running it again")
        _conclude(target, entries, not_proposed, write=True, extends=profile if profile and not target.exists() else None, locations=locations)
        _forget_proposal(locations, target, command, policy, profile)
        raise typer.Exit(0)
    start = resolve(Path(cwd), locations, policy_file=policy, profile=profile)
    secrets = (*start.policy.filesystem.deny_read, *builtin_secrets(Path(cwd), locations.home))
    protected, hidden = _floor(Path(cwd), locations)
    network_off = start.policy.network.mode is NetworkMode.NONE
    trace = host_platform() == "linux" and _can_trace()  # macOS's file refusals come from the sandbox's log
    if not trace and host_platform() == "linux":
        say("stockade learn: strace is not installed, so refused file accesses are not seen (apt-get install strace); learning the network only")
    learned: list[Entry] = []
    withheld: list[str] = []
    code = 0
    for number in range(1, rounds + 1):
        invocation = Invocation(
            command, cwd, os.environ, policy_file=str(policy) if policy is not None else None, profile=profile, quiet=True,
            reuse_plans=False, trace=trace, additions=additions_text(granted(learned), network_off) or None, want_findings=True,
        )  # fmt: skip
        result = _backend().run(invocation)
        code = result.status
        proposal: Proposal = propose(
            result.findings or {}, home=str(locations.home), secrets=secrets, protected=protected, hidden=hidden,
        )  # fmt: skip
        known = {_key(entry) for entry in learned}
        new = [entry for entry in proposal.entries if _key(entry) not in known]
        if len(new) > MAX_NEW:
            withheld.append(f"{len(new) - MAX_NEW} more entries of round {number}: too many places refused to propose each; narrow the command")
            new = new[:MAX_NEW]
        withheld += [line for line in proposal.withheld if line not in withheld]
        say(f"stockade learn: round {number}: the command exited {code}; {_count(len(new), 'new entry', 'new entries')}")
        if not new:
            break
        learned += new
    else:
        say(f"stockade learn: the last of {rounds} rounds still learned something: run learn again (or give --rounds) to see if it needs more")
    held_back = len(learned) - len(granted(learned))
    if held_back:
        say(
            f"stockade learn: {_count(held_back, 'entry', 'entries')} in your home {'was' if held_back == 1 else 'were'} proposed but not used "
            "by later rounds (a command must not read or plant files of your home before you have read the proposal); "
            "the command may need them to get further: apply them, trust the file, and learn again"
        )
    _conclude(target, learned, withheld, write=write, extends=profile if profile and not target.exists() else None, locations=locations)
    if not write and learned:
        _keep_proposal(locations, target, command, policy, profile, learned, withheld)
    raise typer.Exit(code)


# -- the proposal a run without --write showed, for the --write that follows it --------------------
#
# Running the command again to write what it learned would do what the command does once more (a
# package really installed the third time) and could learn nothing new. So a proposal is kept, for
# the same command, options and policy file content, until a --write applies it or a day passes.

PROPOSAL_DAYS = 1.0


def _proposal_file(locations: Locations, target: Path, command: list[str], policy: Path | None, profile: str | None) -> Path:
    import hashlib

    try:
        content = target.read_bytes()
    except OSError:
        content = b""
    key = json.dumps([str(target), command, str(policy) if policy else None, profile, hashlib.sha256(content).hexdigest()])
    return locations.state / "learn" / (hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32] + ".json")


def _keep_proposal(
    locations: Locations, target: Path, command: list[str], policy: Path | None, profile: str | None, entries: list[Entry], withheld: list[str]
) -> None:
    import datetime

    path = _proposal_file(locations, target, command, policy, profile)
    data = {
        "time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "entries": [[list(entry.table), entry.key, entry.value, entry.comment] for entry in entries],
        "withheld": withheld,
    }
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(data), encoding="utf-8", errors="surrogateescape")
        os.replace(temporary, path)
    except OSError:
        pass  # a --write later runs the command again, as before


def _last_proposal(
    locations: Locations, target: Path, command: list[str], policy: Path | None, profile: str | None
) -> tuple[list[Entry], list[str], str] | None:
    """(entries, what was not proposed, when) of the proposal kept for these inputs; None if none is."""
    import time

    path = _proposal_file(locations, target, command, policy, profile)
    try:
        if time.time() - path.stat().st_mtime > PROPOSAL_DAYS * 86400:
            return None
        data = json.loads(path.read_text(encoding="utf-8", errors="surrogateescape"))
        entries = [Entry(tuple(str(part) for part in table), str(key), str(value), str(comment)) for table, key, value, comment in data["entries"]]
        withheld = [str(line) for line in data.get("withheld", [])]
        return entries, withheld, str(data.get("time", "an earlier run"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _forget_proposal(locations: Locations, target: Path, command: list[str], policy: Path | None, profile: str | None) -> None:
    try:
        _proposal_file(locations, target, command, policy, profile).unlink()
    except OSError:
        pass


def granted(entries: list[Entry]) -> list[Entry]:
    """What the next round may use: hosts, HTTP rules and places outside the home. An entry in the
    home (a file to read, a place to write) is only proposed: a later round of a command that asked
    for it must not read a file of the home the user never looked at, or plant one that runs later."""
    return [entry for entry in entries if entry.table[0] != "filesystem" or not entry.value.startswith("~")]


def additions_text(entries: list[Entry], network_off: bool) -> str:
    """The learned entries as one policy layer (TOML) for the next round."""
    tables: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for entry in entries:
        tables.setdefault(entry.table, {}).setdefault(entry.key, []).append(entry.value)
    if network_off:
        tables.setdefault(("network",), {})
    lines: list[str] = []
    for table, keys in tables.items():
        lines.append("[" + ".".join(part if _BARE_KEY.fullmatch(part) else toml_string(part) for part in table) + "]")
        if table == ("network",) and network_off:
            lines.append('mode = "allowlist"')
        lines += [f"{key} = [{', '.join(toml_string(value) for value in values)}]" for key, values in keys.items()]
    return "\n".join(lines) + ("\n" if lines else "")


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(text: str) -> str:
    """A TOML basic string holding `text` exactly: JSON's escapes are TOML's, but JSON spells a
    character past U+FFFF as a surrogate pair, which TOML refuses, and leaves DEL bare."""
    body = json.dumps(text, ensure_ascii=False)[1:-1]
    return '"' + "".join(f"\\u{ord(ch):04x}" if ch == "\x7f" or "\ud800" <= ch <= "\udfff" else ch for ch in body) + '"'


def _conclude(target: Path, learned: list[Entry], withheld: list[str], *, write: bool, extends: str | None, locations: Locations) -> None:
    """Print the proposal as a diff with a line of why per entry; apply it with --write."""
    created = not target.exists()
    old_text = "" if created else read_text(target)
    new_text, added = add_entries(old_text, learned, file=str(target), extends=extends if learned else None)
    present = [entry for entry in learned if entry not in added]
    if added:
        name = str(target)
        for line in difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), name, name, lineterm=""):
            print(shown(line))  # a value may hold a character a terminal acts on (a bidi override)
        print(f"# stockade learn proposes {_count(len(added), 'entry', 'entries')} for {target}:")
        for entry in added:
            print(shown(f"#   {entry.where} += {json.dumps(entry.value)}: {entry.comment.removeprefix('learn: ')}"))
    else:
        print(f"# stockade learn proposes nothing new for {target}")
    if present:
        values = ", ".join(json.dumps(entry.value) for entry in present)
        print(shown(f"# already in {target} but not in effect ({values}): the file is not trusted; read it, then run: stockade trust {target}"))
    for line in withheld:
        print(shown(f"# not proposed: {line}"))
    if not write or not added:
        if added:
            print(f"# to apply it: the same learn with --write (it writes this proposal, the command not run again), or edit {target} yourself")
        return
    write_checked(target, new_text, None if created else old_text, locations)
    wrote = _count(len(added), "entry", "entries")
    say(f"stockade learn: wrote {wrote} to {target}; it is not trusted until you read it and run: stockade trust {target}")


def _floor(project: Path, locations: Locations) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the floor keeps read-only (files that run code later, PATH's folders, stockade's config)
    and hidden (stockade's state): learn proposes none of it, whichever wall refused the run. The
    floor of a run that could write everywhere (profiles/floor.py), at the project and the cwd."""
    from stockade.profiles.floor import floor_for

    top = policy_to_edit(project).parent
    floor = floor_for(("/",), locations, anchors=tuple(dict.fromkeys((str(top), str(project)))))
    hidden = (*floor.hidden, str(locations.config))
    path_dirs = [os.path.realpath(folder) for folder in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(folder)]
    in_path = (folder for folder in path_dirs if os.path.isdir(folder) and not is_within(folder, str(top)))
    return (*floor.read_only, *in_path, *hidden), hidden


def _can_trace() -> bool:
    from stockade.bwrap.running.trace import find_strace

    try:
        find_strace()
    except SandboxSetupError:
        return False
    return True


def _backend() -> Backend:
    from stockade.cli.run_command import backend_for

    return backend_for(host_platform())


def _key(entry: Entry) -> tuple[tuple[str, ...], str, str]:
    return entry.table, entry.key, entry.value


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"
