"""A `Policy` as a Seatbelt profile: SBPL text plus its `-D` parameters.

Pure: the text depends only on the `ProfileSpec` and on a `PathResolver`
(the backend passes one that looks at the disk; tests pass `LexicalPaths`).

Shape of every profile, top to bottom (in SBPL the last matching rule wins,
so every deny comes after the allows it narrows):

1. `(version 1)` and `(deny default)`, tagged so denials can be found in the log;
2. the static base rules (`base.sb`): processes, sysctls, terminals, devices;
3. `(allow file-read*)`: the whole filesystem is readable, like Codex's
   default and like the Linux backend's read-only `/`. A read allowlist of
   system folders breaks toolchains in ways that are hard to predict
   (Homebrew, Xcode, pyenv, nvm all live somewhere else), while the secrets
   worth hiding are few and named by `deny_read`;
4. writes: each `allow_write` root and the run's private temp dir;
5. network: nothing for mode "none"; otherwise only the proxy's loopback port
   and the policy's `unix_sockets`;
6. denies: `deny_write`, the mandatory floor (read-only files and stockade's
   hidden state), `deny_read` (read *and* write: a rename is a write,
   ESCAPES case 7), and guards that stop protected paths from being moved
   away or created by renaming a directory into place;
7. hardening that no policy can lift: Apple Events, Launch Services,
   keychain/pasteboard services, other processes' arguments.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

from stockade.profiles.floor import Floor
from stockade.profiles.model import NetworkMode, Policy
from stockade.profiles.paths import is_within
from stockade.seatbelt import sbpl

SUBPATH = "subpath"
LITERAL = "literal"

# Never reachable, whatever the policy says (ESCAPES 45, 79).
SENSITIVE_MACH_SERVICES: tuple[str, ...] = (
    "com.apple.coreservices.launchservicesd",
    "com.apple.CoreServices.coreservicesd",
    "com.apple.coreservices.appleevents",
    "com.apple.lsd.mapdb",
    "com.apple.lsd.modifydb",
    "com.apple.SecurityServer",
    "com.apple.securityd.xpc",
    "com.apple.secd",
    "com.apple.pasteboard.1",
    "com.apple.tccd",
    "com.apple.tccd.system",
    "com.apple.cfprefsd.agent",
    "com.apple.cfprefsd.daemon",
)
# Tools whose whole purpose is to act outside the sandbox or as another user.
NEVER_EXEC: tuple[str, ...] = (
    "/usr/bin/osascript",
    "/usr/bin/open",
    "/usr/bin/sudo",
    "/usr/bin/su",
    "/usr/bin/login",
    "/bin/launchctl",
)
# Needed only when traffic leaves through the proxy: TLS certificate checks by
# Security.framework clients (Go, Swift) and interface listing.
PROXY_MACH_SERVICES: tuple[str, ...] = ("com.apple.trustd.agent",)


class PathResolver(Protocol):
    """How policy paths become the spellings Seatbelt compares against."""

    def allow_spellings(self, path: str) -> tuple[str, ...]: ...

    def deny_spellings(self, path: str) -> tuple[str, ...]: ...

    def link_targets(self, path: str) -> tuple[str, ...]:
        """Where symlinks inside the folder `path` lead (Seatbelt sees only those targets)."""
        ...

    def exists(self, path: str) -> bool: ...


@dataclass(frozen=True)
class LexicalPaths:
    """Spellings from the /private links alone; `existing` stands in for the disk."""

    existing: frozenset[str] = frozenset()

    def allow_spellings(self, path: str) -> tuple[str, ...]:
        return sbpl.private_aliases(path)

    def deny_spellings(self, path: str) -> tuple[str, ...]:
        return sbpl.private_aliases(path)

    def link_targets(self, path: str) -> tuple[str, ...]:
        return ()

    def exists(self, path: str) -> bool:
        return path in self.existing


@dataclass(frozen=True)
class Entry:
    """One policy path as the profile encodes it; also used to explain a denial."""

    text: str  # the path (or glob) as the effective policy spells it
    param: str  # the first parameter's name, "" for a glob
    spellings: tuple[str, ...] = ()  # parameter values
    regexes: tuple[str, ...] = ()  # for globs
    kind: str = SUBPATH  # SUBPATH or LITERAL

    def matches(self, path: str) -> bool:
        for alias in sbpl.private_aliases(path):
            if self.kind == LITERAL and alias in self.spellings:
                return True
            if self.kind == SUBPATH and any(is_within(alias, s) for s in self.spellings):
                return True
            if any(re.search(r, alias) for r in self.regexes):
                return True
        return False


@dataclass(frozen=True)
class RuleIndex:
    """What the profile allows and denies, by policy entry: the key to violation hints."""

    origin: str
    home: str
    network_mode: NetworkMode
    proxy_port: int | None
    temp_dir: str
    writable: tuple[Entry, ...] = ()
    deny_write: tuple[Entry, ...] = ()
    read_only: tuple[Entry, ...] = ()
    deny_read: tuple[Entry, ...] = ()
    hidden: tuple[Entry, ...] = ()
    no_rename: tuple[Entry, ...] = ()
    no_create: tuple[Entry, ...] = ()
    unix_sockets: tuple[Entry, ...] = ()
    ignored_unix_sockets: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProfileSpec:
    """Everything the profile text depends on."""

    policy: Policy
    floor: Floor
    home: str
    temp_dir: str  # the run's private, writable temp dir (its TMPDIR)
    tag: str  # per-run tag in every denial message, to find them in the log
    proxy_port: int | None = None  # loopback port of the proxy; 0 is a dry-run placeholder
    ca_bundle: str | None = None  # hosts with HTTP rules: the CA bundle in stockade's (hidden) cache, readable alone
    ssh_files: tuple[str, ...] = ()  # raw-TCP allow rules: ssh's ProxyCommand, config and known hosts in that cache (proxy/client/sshroute.py)


@dataclass(frozen=True)
class Profile:
    text: str
    params: tuple[tuple[str, str], ...]
    index: RuleIndex

    def sandbox_exec_args(self) -> list[str]:
        """`-p TEXT -D NAME=value ...`, ready to follow `sandbox-exec`."""
        args = ["-p", self.text]
        for name, value in self.params:
            args += ["-D", f"{name}={value}"]
        return args


@cache
def base_rules() -> str:
    """The static rules, shipped next to this module as package data."""
    return (Path(__file__).parent / "base.sb").read_text(encoding="utf-8")


class _Writer:
    """Accumulates rules and parameters; every path goes through `Params`."""

    def __init__(self, tag: str, paths: PathResolver) -> None:
        self.tag = sbpl.check_tag(tag)
        self.paths = paths
        self.params = sbpl.Params()
        self.lines: list[str] = []

    def add(self, text: str) -> None:
        self.lines.append(text)

    def rule(self, action: str, ops: str, filters: list[str], *, logged: bool = False) -> None:
        body = [f"({action} {ops}"] + [f"  {f}" for f in filters]
        if logged:
            body.append(f"  (with message {sbpl.quote_constant(self.tag)})")
        self.add("\n".join(body) + ")")

    def entry(
        self,
        category: str,
        index: int,
        text: str,
        *,
        deny: bool,
        kind: str = SUBPATH,
        glob: bool = False,
    ) -> Entry:
        """Parameters (or, for a glob, encoded regexes) for one policy path."""
        spell = self.paths.deny_spellings if deny else self.paths.allow_spellings
        if glob and sbpl.is_glob(text):
            base, rest = sbpl.split_glob(text)
            regexes = dict.fromkeys(r for s in spell(base) for r in sbpl.glob_regexes(s, rest))
            return Entry(text=text, param="", regexes=tuple(regexes), kind=kind)
        found = list(spell(text))
        if deny and kind == SUBPATH:
            # ~/.ssh/id -> ~/dotfiles/id: deny the target too (ESCAPES 8).
            found += [alias for target in self.paths.link_targets(text) for alias in sbpl.private_aliases(target)]
        spellings = tuple(dict.fromkeys(found))
        name = f"{category}_{index}"
        for number, value in enumerate(spellings):
            self.params.ref(name if number == 0 else f"{name}_{number}", value)
        return Entry(text=text, param=name, spellings=spellings, kind=kind)

    def filters(self, entry: Entry, wrap: Callable[[str], str] | None = None) -> list[str]:
        """SBPL filters for an entry: one per spelling, or one per regex."""
        names = [entry.param] + [f"{entry.param}_{n}" for n in range(1, len(entry.spellings))]
        wrap = wrap or (lambda ref: f"({entry.kind} {ref})")
        refs = [wrap(f'(param "{n}")') for n in names] if entry.param else []
        return refs + [sbpl.regex_filter(r) for r in entry.regexes]

    def entries(
        self,
        title: str,
        category: str,
        texts: tuple[str, ...],
        action: str,
        ops: str,
        *,
        deny: bool,
        kind: str = SUBPATH,
        wrap: Callable[[str], str] | None = None,
        globs: bool = False,
    ) -> tuple[Entry, ...]:
        """All entries of one policy list as one rule; NAME_i indexes the list.

        `globs`: the list may hold glob patterns (deny_read, deny_write); every
        other list is literal paths, whatever characters they contain.
        """
        made = tuple(self.entry(category, i, text, deny=deny, kind=kind, glob=globs) for i, text in enumerate(texts))
        if not made:
            self.add(f";; {title}: none")
            return made
        encoded = sum(1 for e in made if not e.param)
        note = f", {encoded} as encoded regexes" if encoded else ""
        self.add(f";; {title}: {len(made)} entries ({category}_<index>{note})")
        self.rule(action, ops, [f for e in made for f in self.filters(e, wrap)], logged=deny)
        return made


def render(spec: ProfileSpec, paths: PathResolver = LexicalPaths()) -> Profile:
    """The profile for one run."""
    policy, floor = spec.policy, spec.floor
    fs = policy.filesystem
    w = _Writer(spec.tag, paths)
    w.add(";; stockade: Seatbelt profile generated from the effective policy.")
    w.add(";; Every path below is a (param ...): see the -D list passed to sandbox-exec.")
    w.add("(version 1)")
    w.rule("deny", "default", [], logged=True)
    w.add(base_rules().rstrip("\n"))

    w.add(";; ---- reads: everything, minus deny_read and stockade's state (denied below) ----")
    w.add("(allow file-read*)")

    w.add(";; ---- writes: allow_write roots and the private temp dir ----")
    writable = w.entries("allow_write", "WRITABLE", fs.allow_write, "allow", "file-write*", deny=False)
    temp = w.entries("temp_dir", "TEMP", (spec.temp_dir,), "allow", "file-write*", deny=False)

    sockets, ignored = _network(w, policy, spec.proxy_port)

    w.add(";; ---- denies: written after the allows, so they win ----")
    deny_write = w.entries("deny_write", "DENY_WRITE", fs.deny_write, "deny", "file-write*", deny=True, globs=True)
    read_only = w.entries("floor.read_only", "READ_ONLY", floor.read_only, "deny", "file-write*", deny=True)
    deny_read = w.entries("deny_read", "DENY_READ", fs.deny_read, "deny", "file-read* file-write*", deny=True, globs=True)
    hidden = w.entries("floor.hidden", "HIDDEN", _hidden(policy, floor), "deny", "file-read* file-write*", deny=True)
    _carve_outs(w, policy, floor)
    if spec.ca_bundle:
        w.add(";; ---- the CA bundle for hosts with HTTP rules: one file of the hidden cache, read only ----")
        w.entries("ca_bundle", "CA_BUNDLE", (spec.ca_bundle,), "allow", "file-read*", deny=False, kind=LITERAL)
    if spec.ssh_files:
        w.add(";; ---- ssh through the proxy: its ProxyCommand, config and known hosts, files of the hidden cache, read only ----")
        w.entries("ssh_files", "SSH_FILES", spec.ssh_files, "allow", "file-read*", deny=False, kind=LITERAL)

    roots = (*fs.allow_write, spec.temp_dir)
    w.add(";; ---- guards: protected paths cannot be moved away or renamed into place ----")
    policy_denies = (*fs.deny_write, *fs.deny_read)
    literal = (*_plain(policy_denies), *floor.read_only, *_hidden(policy, floor))
    renames = rename_guards(roots, literal, tuple(t for t in policy_denies if sbpl.is_glob(t)))
    no_rename = w.entries("no_rename", "NO_RENAME", renames, "deny", "file-write-unlink", deny=True, kind=LITERAL)
    creates = create_guards(roots, (*_plain(fs.deny_write), *floor.read_only), paths.exists)
    no_create = w.entries("no_create", "NO_CREATE", creates, "deny", "file-write-create", deny=True, kind=LITERAL)

    _hardening(w)
    index = RuleIndex(
        origin=policy.origin,
        home=spec.home,
        network_mode=policy.network.mode,
        proxy_port=spec.proxy_port,
        temp_dir=spec.temp_dir,
        writable=writable + temp,
        deny_write=deny_write,
        read_only=read_only,
        deny_read=deny_read,
        hidden=hidden,
        no_rename=no_rename,
        no_create=no_create,
        unix_sockets=sockets,
        ignored_unix_sockets=ignored,
    )
    return Profile(text="\n".join(w.lines) + "\n", params=w.params.items(), index=index)


def _network(w: _Writer, policy: Policy, proxy_port: int | None) -> tuple[tuple[Entry, ...], tuple[str, ...]]:
    """Nothing at all for "none"; otherwise the proxy port and listed Unix sockets."""
    mode = policy.network.mode
    # socketpair() and AF_UNIX socket creation: asyncio and multiprocessing
    # need them; connecting or binding a socket path is a separate operation.
    w.add(f';; ---- network: mode "{mode.value}" ----')
    if mode is NetworkMode.NONE:
        w.add(";; no network-outbound rule at all: no proxy, no DNS, no sockets to connect to")
        w.rule("allow", "system-socket", ["(socket-domain AF_UNIX)"])
        return (), policy.network.unix_sockets
    if proxy_port is None or not 0 <= proxy_port <= 65535:
        raise ValueError(f'network mode "{mode.value}" needs the proxy\'s port (0 as a dry-run placeholder)')
    w.add(f";; only the stockade proxy on 127.0.0.1:{proxy_port}; it applies the domain rules")
    w.rule("allow", "system-socket", ["(socket-domain AF_UNIX)", "(socket-domain AF_INET)", "(socket-domain AF_INET6)"])
    w.rule("allow", "network-outbound", [f"(remote tcp {sbpl.quote_constant(f'localhost:{int(proxy_port)}')})"])
    w.rule("allow", "mach-lookup", [f"(global-name {sbpl.quote_constant(n)})" for n in PROXY_MACH_SERVICES])
    w.rule("allow", "sysctl-read", ['(sysctl-name-prefix "net.routetable.")'])
    sockets = w.entries(
        "unix_sockets",
        "UNIX_SOCKET",
        policy.network.unix_sockets,
        "allow",
        "network-outbound",
        deny=False,
        kind=LITERAL,
        wrap=lambda ref: f"(remote unix-socket (path-literal {ref}))",
    )
    return sockets, ()


def _carve_outs(w: _Writer, policy: Policy, floor: Floor) -> None:
    """Writable places inside hidden folders (`deny_read = ["data"]`, `allow_write = ["data/out"]`):
    each seen and writable again after the denies (the last rule that matches wins), read-only
    where a deny_write covers it; after each, every deny that can reach inside it once more (the
    glob denies whatever their base, `**/.env` among them) and stockade's own state. Outer places
    first, so a place inside another's deny is seen again after it, as on Linux."""
    fs = policy.filesystem
    hidden = _plain(fs.deny_read)
    places = sorted((p for p in fs.allow_write if any(is_within(p, d) and p != d for d in hidden)), key=lambda p: p.count("/"))
    if not places:
        return
    w.add(";; ---- carve-outs: writable places inside hidden folders, seen again; the denies inside them once more ----")
    unwritable = _plain(fs.deny_write)
    for n, place in enumerate(places):

        def inside(texts: tuple[str, ...], place: str = place) -> tuple[str, ...]:
            return tuple(t for t in texts if sbpl.is_glob(t) or (is_within(t, place) and t != place))

        ops = "file-read*" if any(is_within(place, d) for d in unwritable) else "file-read* file-write*"
        w.entries(f"carve_out {n}", f"CARVE_OUT{n}", (place,), "allow", ops, deny=False)
        w.entries(f"deny_write inside {n}", f"DENY_WRITE_IN{n}", inside(fs.deny_write), "deny", "file-write*", deny=True, globs=True)
        w.entries(f"floor.read_only inside {n}", f"READ_ONLY_IN{n}", inside(floor.read_only), "deny", "file-write*", deny=True)
        w.entries(f"deny_read inside {n}", f"DENY_READ_IN{n}", inside(fs.deny_read), "deny", "file-read* file-write*", deny=True, globs=True)
    w.entries("floor.hidden_again", "HIDDEN_AGAIN", _hidden(policy, floor), "deny", "file-read* file-write*", deny=True)


def _hidden(policy: Policy, floor: Floor) -> tuple[str, ...]:
    """stockade's own state, plus an audit log the policy moved elsewhere (ESCAPES 82)."""
    log = policy.audit.log
    if log and not any(is_within(log, folder) for folder in floor.hidden):
        return (*floor.hidden, log)
    return floor.hidden


def _plain(texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t for t in texts if not sbpl.is_glob(t))


def _ancestors(path: str) -> list[str]:
    """Parents of `path`, nearest first, without "/"."""
    found: list[str] = []
    parent = os.path.dirname(path)
    while parent not in ("/", ""):
        found.append(parent)
        parent = os.path.dirname(parent)
    return found


def _movable(path: str, roots: tuple[str, ...]) -> bool:
    """True when the sandbox may add or remove `path` itself: its folder is writable."""
    return any(is_within(os.path.dirname(path), root) for root in roots)


def rename_guards(roots: tuple[str, ...], protected: tuple[str, ...], globs: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Movable ancestors of protected paths: renaming one would carry the path along.

    `mv ~/proj ~/proj2` would move `~/proj/.env` out from under a deny rule,
    `mv .git x` would move `.git/hooks` somewhere writable (ESCAPES 7, 58).
    """
    found: dict[str, None] = {}
    # A plain path is covered by its own deny rule; a glob's base folder is not.
    candidates = [a for path in protected for a in _ancestors(path)]
    for pattern in globs:
        base = sbpl.split_glob(pattern)[0]
        candidates += [base, *_ancestors(base)]
    for parent in candidates:
        if parent != "/" and _movable(parent, roots):
            found[parent] = None
    return tuple(found)


def create_guards(roots: tuple[str, ...], protected: tuple[str, ...], exists: Callable[[str], bool]) -> tuple[str, ...]:
    """Absent folders that would hold a protected path, where the sandbox could create them.

    Creating `.git` by renaming a prepared folder (with a `hooks/` inside)
    into place would plant hooks without ever writing below `.git/hooks`,
    so such a folder may not be created inside the sandbox at all.
    """
    found: dict[str, None] = {}
    protected_set = set(protected)
    for text in protected:
        for parent in _ancestors(text):
            if _movable(parent, roots) and parent not in protected_set and not exists(parent):
                found[parent] = None
    return tuple(found)


def _hardening(w: _Writer) -> None:
    w.add(";; ---- never, whatever the policy says ----")
    w.add(";; Apple Events and Launch Services run code outside the sandbox (ESCAPES 45).")
    w.rule("deny", "appleevent-send", [], logged=True)
    w.rule("deny", "lsopen", [], logged=True)
    w.add(";; launchd jobs and preference writes are carried out by daemons outside the sandbox.")
    w.rule("deny", "job-creation", [], logged=True)
    w.rule("deny", "user-preference-write", [], logged=True)
    w.add(";; Keychain, pasteboard, Launch Services, privacy and preference daemons (ESCAPES 45, 79).")
    w.rule("deny", "mach-lookup", [f"(global-name {sbpl.quote_constant(n)})" for n in SENSITIVE_MACH_SERVICES], logged=True)
    w.add(";; Other processes' arguments and environment (ESCAPES 77).")
    w.rule("deny", "sysctl-read", ['(sysctl-name-prefix "kern.procargs")'], logged=True)
    w.add(";; Host automation and privilege tools.")
    w.rule("deny", "process-exec", [f"(literal {sbpl.quote_constant(p)})" for p in NEVER_EXEC], logged=True)
