"""What a policy leaves open, or fails to open, that its author may not have meant: said by `check` and `explain`.

A file with `extends = []` starts from nothing, on purpose; what that means is
easy to miss (no secret hidden, nothing writable, the project included).
Judged by effect on the effective policy, so a hand-built policy that does
hide and allow what it should says nothing.
"""

from __future__ import annotations

from stockade.profiles.model import Policy
from stockade.profiles.paths import is_within


def open_ends(policy: Policy, home: str) -> list[str]:
    notes: list[str] = []
    project = str(policy.project_dir)
    fs = policy.filesystem
    if not any(is_within(project, root) for root in fs.allow_write):
        notes.append(f'the project ({project}) is read-only: no allow_write entry covers it ("." would)')
    if not fs.deny_read:
        notes.append("deny_read is empty: the project's .env files and every secret outside your home are readable inside")
    if fs.home == "host" and not any(is_within(path.split("*", 1)[0].rstrip("/") or "/", home) for path in fs.deny_read):
        notes.append(f'home = "host" with nothing under {home} in deny_read: ~/.ssh, ~/.aws and every other secret there are readable inside')
    notes += _own_files(policy)
    notes += _network_off_with_hosts(policy)
    notes += _loopback(policy)
    notes += _http_without_allow(policy)
    notes += _credentials_going_nowhere(policy)
    notes += _denied_allows(policy)
    notes += _unknown_methods(policy)
    if not notes:
        return []
    if not _from_nothing(policy):
        return notes
    if len(policy.sources) > 1:  # its extends names files only, none of which builds on a built-in
        return [*notes, f'to build on your own policy instead, add "default" to the extends of {policy.sources[-1]}']
    return [*notes, 'to build on your own policy instead, remove `extends = []` (or write extends = ["default"])']


def _network_off_with_hosts(policy: Policy) -> list[str]:
    """`mode = "none"` with hosts under allow (the file `stockade init` writes, hosts added by hand):
    the network is off, and the hosts reach nothing."""
    from stockade.profiles.model import NetworkMode

    network = policy.network
    if network.mode is not NetworkMode.NONE or not network.allow:
        return []
    return [f'[network] mode = "none" turns the network off, so allow ({", ".join(network.allow[:3])}{", ..." if len(network.allow) > 3 else ""}) '
            'reaches nothing: set mode = "allowlist" (`stockade allow HOST` does)']  # fmt: skip


def _own_files(policy: Policy) -> list[str]:
    """An entry naming stockade's own files (its state, cache, runtime or config folder): never
    shown, written or reached inside, whatever the policy says (issue 33); named at its line."""
    import os

    from stockade.core.locations import locate

    locations = locate()
    own = [os.path.realpath(str(path)) for path in (*locations.private_dirs(), locations.config)]
    entries = [("allow_read", p) for p in policy.filesystem.allow_read] + [("allow_write", p) for p in policy.filesystem.allow_write]
    entries += [("unix_sockets", p) for p in policy.network.unix_sockets]
    said = []
    for key, path in entries:
        real = os.path.realpath(path)
        if any(is_within(real, folder) or is_within(folder, real) for folder in own) and not is_within(locations.home.as_posix(), real):
            what = "stockade's own files (its CA key, trust store, audit log, plans) are never shown inside"
            said.append(f"{_where(policy, path)}{key} {path}: {what}")
    return said


def _where(policy: Policy, value: str) -> str:
    """`FILE:LINE: ` of the first policy file that spells `value` (as written or with ~), or ""."""
    import os

    from stockade.profiles.toml_lines import where_written

    source, line = where_written(policy.sources, value, os.path.expanduser("~"))
    return f"{source}:{line}: " if source else ""


def _loopback(policy: Policy) -> list[str]:
    """An allowed loopback entry with a port is reached at the same address inside, from any client
    (bwrap/parts/forwards.py; macOS shares the host's loopback). One without a port, or a block, is the
    host's only through the proxy: tools send loopback names to the sandbox's own loopback (NO_PROXY)."""
    from stockade.profiles.domains import parse_rule

    said = []
    for text in policy.network.allow:
        rule = parse_rule(text)
        single = rule.host == "localhost" or (rule.network is not None and rule.network.num_addresses == 1)
        if (rule.host == "localhost" or (rule.network is not None and rule.network.is_loopback)) and (rule.port is None or not single):
            said.append(
                f'allow "{text}": the host\'s loopback is reached from any client only at a port the entry names '
                f'(write "{text.split("/")[0]}:PORT"); without one, only a client told to use the proxy '
                '(curl --proxy "$HTTP_PROXY" --noproxy "") reaches it, as NO_PROXY sends 127.0.0.1 and localhost '
                "to the sandbox's own loopback"
            )
    return said


def _http_without_allow(policy: Policy) -> list[str]:
    """HTTP rules only narrow: a table for a host that `allow` does not let through changes nothing."""
    from stockade.profiles.domains import overlaps, parse_rule
    from stockade.profiles.model import NetworkMode

    if policy.network.mode is NetworkMode.OPEN or not policy.network.http:
        return []
    allowed = [parse_rule(text) for text in policy.network.allow]
    said = []
    for host, _allow, _deny in policy.network.http:
        rule = parse_rule(host)
        if not any(overlaps(grant, rule) for grant in allowed):  # "api.test:8443" lets the table's "api.test" apply
            said.append(
                f'[network.http."{host}"] changes nothing: {host} is not in [network] allow, and HTTP rules only narrow '
                f'what an allowed host may be sent (add "{host}" to allow)'
            )
    return said


# Methods of HTTP (RFC 9110, PATCH) and WebDAV: a rule's method outside these is likely a typo.
KNOWN_METHODS = frozenset(
    "GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE PATCH PROPFIND PROPPATCH MKCOL COPY MOVE LOCK UNLOCK "
    "REPORT SEARCH MKCALENDAR ACL BIND UNBIND REBIND LINK UNLINK QUERY PURGE".split()
)


def _unknown_methods(policy: Policy) -> list[str]:
    """A rule naming a method no client sends (GTE) can never match: said, with the method it may mean."""
    import difflib

    said = []
    for host, allow, deny in policy.network.http:
        for rule in (*allow, *deny):
            methods = rule.split(" ", 1)[0]
            for method in methods.split(","):
                if method != "*" and method not in KNOWN_METHODS:
                    close = difflib.get_close_matches(method, sorted(KNOWN_METHODS), n=1, cutoff=0.5)
                    hint = f" (did you mean {close[0]}?)" if close else ""
                    why = f"{method} is not a standard HTTP method; if it is a typo, the rule never matches{hint}"
                    said.append(f'[network.http."{host}"] "{rule}": {why}')
    return said


def _denied_allows(policy: Policy) -> list[str]:
    """An allow entry that a deny entry covers whole changes nothing: deny wins."""
    from stockade.profiles.domains import parse_rule

    if not policy.network.deny:
        return []
    denies = [(text, parse_rule(text)) for text in policy.network.deny]
    said = []
    for text in policy.network.allow:
        rule = parse_rule(text)
        cover = next((deny for deny, parsed in denies if parsed.covers(rule)), None)
        if cover is not None:
            said.append(f'allow "{text}" changes nothing: deny "{cover}" covers it, and deny wins (remove one of them)')
    return said


def _credentials_going_nowhere(policy: Policy) -> list[str]:
    """A credential goes only to hosts the network rules let through: with the network off, or a
    host `allow` does not list, it is never sent (the placeholder is set all the same)."""
    from stockade.profiles.domains import overlaps, parse_rule
    from stockade.profiles.model import NetworkMode

    if not policy.credentials:
        return []
    if policy.network.mode is NetworkMode.NONE:
        names = ", ".join(c.name for c in policy.credentials)
        return [f"credentials {names}: the network is off, so they are never sent (give [network] allow their hosts)"]
    if policy.network.mode is NetworkMode.OPEN:
        return []
    allowed = [parse_rule(text) for text in policy.network.allow]
    return [
        f'[credentials.{credential.name}] goes to {host}, which [network] allow does not list: it is never sent there (add "{host}" to allow)'
        for credential in policy.credentials
        for host in credential.hosts
        if not any(overlaps(grant, parse_rule(host)) for grant in allowed)
    ]


def _from_nothing(policy: Policy) -> bool:
    return not any(source.startswith("builtin:") for source in policy.sources)
