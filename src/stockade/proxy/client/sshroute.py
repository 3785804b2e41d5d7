"""ssh (and git over ssh) inside a sandbox, through the proxy: a ProxyCommand, an ssh config, the host keys.

The daemon lets SSH through a CONNECT tunnel only to a `host:port` an
allow rule names (decide.raw_tcp_allowed, tunnels.py); ssh itself knows no HTTP proxy.
So when a policy has such a rule, the sandbox gets three read-only files,
made here in stockade's cache under names taken from their content:

- `ssh-proxy`, a bash script ssh runs as its ProxyCommand: one CONNECT to
  the proxy named by HTTPS_PROXY (with its credential on macOS), then the
  bytes both ways. Bash, because stockade's Python is not visible inside;
  its `read` takes a socket byte by byte, so nothing past the answer's head
  is swallowed, and `/dev/tcp` makes the connection;
- an ssh config whose `Host *` sets that ProxyCommand and the known-hosts
  file below, followed by the text of the host's own /etc/ssh/ssh_config
  (its Include lines expanded in place, with only files in /etc/ssh that the
  sandbox could read itself: the copy is readable inside, so a file the
  policy hides must not land in it), so its settings hold where they do
  not conflict (ssh takes each option's first value). Copied, not
  included: ssh checks that an included file is owned by root or the user,
  and in a user namespace root's files belong to nobody. Linux binds it
  over /etc/ssh/ssh_config, so a plain `ssh host` uses it; both backends
  name it in GIT_SSH_COMMAND (`ssh -F`);
- the lines of the user's ~/.ssh/known_hosts for the hosts those rules
  name, and no other: ~/.ssh stays hidden (keys, config), host keys are
  checked as they would be outside, and the list of every host the user
  ever reached is not handed to the sandbox. A host with no line there
  fails ("Host key verification failed"); `ssh-keyscan` it outside first.

Nothing here is a protection: the daemon decides what passes whatever the
sandbox does with these files.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable

from stockade.core.cachefiles import write_once
from stockade.profiles.domains import HostRule, parse_rule

SANDBOX_DIR = "/run/stockade"
SCRIPT = f"{SANDBOX_DIR}/ssh-proxy"
CONFIG = f"{SANDBOX_DIR}/ssh_config"
KNOWN_HOSTS = f"{SANDBOX_DIR}/ssh_known_hosts"
SYSTEM_CONFIG = "/etc/ssh/ssh_config"
BASH = "/bin/bash"
HTTP_PORTS = (80, 443)  # decide.HTTP_PORTS: never raw TCP

SCRIPT_TEXT = r"""#!/bin/bash
# stockade: ssh's ProxyCommand inside a sandbox. One HTTP CONNECT to the proxy that
# HTTPS_PROXY names, then the bytes both ways. Usage: ssh-proxy HOST PORT
set -u
host=$1 port=$2
# One host and one port, nothing else: a name with a space, CR or LF would write more than the CONNECT line.
case $port in ''|*[!0-9]*) echo "stockade ssh-proxy: not a port: $port" >&2; exit 1 ;; esac
case $host in ''|-*|*[!A-Za-z0-9._:-]*) echo "stockade ssh-proxy: not a host name: $host" >&2; exit 1 ;; esac
proxy=${HTTPS_PROXY:-${https_proxy:-${ALL_PROXY:-http://127.0.0.1:3128}}}
proxy=${proxy#*://}
proxy=${proxy%%/*}
auth=
case $proxy in *@*) auth=${proxy%@*}; proxy=${proxy##*@} ;; esac
proxy_host=${proxy%:*} proxy_port=${proxy##*:}
case $host in *:*) target="[$host]:$port" ;; *) target="$host:$port" ;; esac
if ! exec 3<>"/dev/tcp/$proxy_host/$proxy_port"; then
    echo "stockade ssh-proxy: cannot reach the proxy at $proxy_host:$proxy_port" >&2
    exit 1
fi
{
    printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n' "$target" "$target"
    if [ -n "$auth" ]; then
        printf 'Proxy-Authorization: Basic %s\r\n' "$(printf '%s' "$auth" | base64 | tr -d '\n')"
    fi
    printf '\r\n'
} >&3
IFS= read -r status <&3 || status=
status=${status%$'\r'}
length=0
while IFS= read -r line <&3; do
    line=${line%$'\r'}
    [ -z "$line" ] && break
    case $line in [Cc]ontent-[Ll]ength:*) length=${line#*:}; length=${length// /} ;; esac
done
case $status in
    "HTTP/1."[01]" 200"*) ;;
    *)
        echo "stockade ssh-proxy: the proxy refused $target: ${status:-no answer}" >&2
        body=
        if [ "$length" -gt 0 ] 2>/dev/null; then IFS= read -r -d '' -n "$length" -t 5 body <&3; fi
        [ -n "$body" ] && printf '%s\n' "${body%$'\n'}" >&2
        exit 1 ;;
esac
cat <&3 &
reader=$!
cat >&3
# Input ended: ssh closes it when it is done with the connection (bash cannot half-close a
# socket, so the other side would wait for more). The answer's tail gets a moment, then both end.
(sleep 2; kill "$reader" 2>/dev/null) &
timer=$!
wait "$reader"
kill "$timer" 2>/dev/null
exit 0
"""


def raw_tcp_rules(allow: tuple[str, ...] | list[str]) -> tuple[HostRule, ...]:
    """The allow entries that let raw TCP through (a port named, not 80 or 443): what ssh may reach."""
    rules = []
    for entry in allow:
        try:
            rule = parse_rule(entry)
        except ValueError:
            continue
        if rule.port is not None and rule.port not in HTTP_PORTS:
            rules.append(rule)
    return tuple(rules)


def config_text(script: str, known_hosts: str, host_config: str = "") -> str:
    """The ssh config: every host through the ProxyCommand, host keys from the filtered file, then the host's own config."""
    script, known_hosts = _quoted(script), _quoted(known_hosts)
    lines = [
        "# stockade: ssh goes through this sandbox's proxy, which lets through only the policy's",
        '# host:port allow entries (README, "SSH and git over SSH"). Host keys: the lines of your',
        "# ~/.ssh/known_hosts for those hosts. ssh takes each option's first value, so these win.",
        "Host *",
        f"    ProxyCommand {BASH} {script} %h %p",
        f"    UserKnownHostsFile {known_hosts}",
        "    CheckHostIP no",
    ]
    text = "\n".join(lines) + "\n"
    if host_config:
        text += f"\n# ---- the host's {SYSTEM_CONFIG}, its Include lines expanded ----\n" + host_config.rstrip("\n") + "\n"
    return text


def system_folder_only(path: str) -> bool:
    """The default `readable` of `expanded`: files in the host's ssh config folder (/etc/ssh), and nowhere else."""
    folder = os.path.realpath(os.path.dirname(SYSTEM_CONFIG))
    return all(os.path.commonpath((folder, p)) == folder for p in (os.path.abspath(path), os.path.realpath(path)))


def expanded(path: str, depth: int = 0, readable: Callable[[str], bool] = system_folder_only) -> str:
    """An ssh config file's text with each Include replaced by the files it names (as ssh reads them: a relative
    path is under /etc/ssh, globs in name order); "" for a file that cannot be read.

    The copy lands where the sandbox reads it: a file `readable` says the sandbox could not read
    itself (hidden by the policy, in a private home, anywhere outside /etc/ssh by default) is
    left out, not copied in."""
    if not readable(path):
        return f"# stockade: {path} is not visible inside the sandbox; left out\n"
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return ""
    out = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].lower() != "include" or depth >= 8:
            out.append(line)
            continue
        out.append(f"# {line.strip()}")
        for pattern in words[1:]:
            pattern = pattern.strip('"')
            if not os.path.isabs(pattern):
                pattern = os.path.join(os.path.dirname(SYSTEM_CONFIG), pattern)
            for name in _glob(pattern):
                out.append(expanded(name, depth + 1, readable).rstrip("\n"))
    return "\n".join(out) + "\n"


def _glob(pattern: str) -> list[str]:
    """The files a pattern with wildcards in its last part names, in name order (planning reads through os only)."""
    folder, last = os.path.split(pattern)
    if not any(c in last for c in "*?["):
        return [pattern] if os.path.isfile(pattern) else []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if not n.startswith(".") and _ssh_match(n, last) and os.path.isfile(os.path.join(folder, n))]


def _quoted(path: str) -> str:
    """A path as ssh_config (and the shell running ProxyCommand) reads it: quoted when it holds a space."""
    return f'"{path}"' if any(c in path for c in " \t") else path


def known_hosts_for(text: str, rules: tuple[HostRule, ...]) -> str:
    """The lines of a known_hosts file for the hosts `rules` name (@revoked and @cert-authority ones too), each
    with only the names it lists that those rules match (and its negations, which narrow it): a line may list
    other hosts as well (`host1,host2`, an address), and those are not handed to the sandbox."""
    names = {_known_name(r.host, r.port) for r in rules if r.network is None and not r.wildcard}
    names |= {_known_name(str(r.network.network_address), r.port) for r in rules if r.network is not None and r.network.num_addresses == 1}
    wild = [r for r in rules if r.wildcard]
    kept = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields[0] if fields[0].startswith("@") else ""
        if marker and len(fields) < 2:
            continue
        patterns = fields[1] if marker else fields[0]
        if patterns.startswith("|1|"):
            if _wanted(patterns, names, wild):
                kept.append(line)
            continue
        chosen = [p for p in patterns.split(",") if p.startswith("!") or p and _wanted(p, names, wild)]
        if any(not p.startswith("!") for p in chosen):
            kept.append(" ".join([*([marker] if marker else []), ",".join(chosen), *fields[2 if marker else 1 :]]))
    return "".join(f"{line}\n" for line in kept)


def _known_name(host: str, port: int | None) -> str:
    """How known_hosts names a host on a port: `host` on 22, `[host]:port` elsewhere."""
    return host if port in (None, 22) else f"[{host}]:{port}"


def _wanted(patterns: str, names: set[str], wild: list[HostRule]) -> bool:
    if patterns.startswith("|1|"):
        try:
            _empty, _one, salt, digest = patterns.split("|")
            key, expected = base64.b64decode(salt), base64.b64decode(digest)
        except ValueError:
            return False
        return any(hmac.compare_digest(hmac.new(key, name.encode(), hashlib.sha1).digest(), expected) for name in names)
    for pattern in patterns.lower().split(","):
        if not pattern or pattern.startswith("!"):
            continue
        if any(_ssh_match(name, pattern) for name in names):
            return True
        host, port = _split_known(pattern)
        for rule in wild:
            if port == rule.port and (host == f"*.{rule.host}" or host.endswith(f".{rule.host}") and not any(c in host for c in "*?")):
                return True
    return False


def _ssh_match(name: str, pattern: str) -> bool:
    """ssh's host patterns: `*` and `?` are the only wildcards (brackets are literal: `[host]:2222`)."""
    if "*" not in pattern and "?" not in pattern:
        return name == pattern
    return re.fullmatch("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), name) is not None


def _split_known(pattern: str) -> tuple[str, int]:
    if pattern.startswith("[") and "]:" in pattern:
        host, _, port = pattern[1:].partition("]:")
        return host, int(port) if port.isdigit() else -1
    return pattern, 22


class SshFiles:
    """The three files on the host (in stockade's cache), and where the sandbox reads them."""

    __slots__ = ("script", "config", "known_hosts")

    def __init__(self, script: str, config: str, known_hosts: str) -> None:
        self.script = script
        self.config = config
        self.known_hosts = known_hosts

    def paths(self) -> tuple[str, ...]:
        return (self.script, self.config, self.known_hosts)


def ssh_files(
    cache: str, home: str, rules: tuple[HostRule, ...], *, inside: bool, system: str | None, readable: Callable[[str], bool] = system_folder_only
) -> SshFiles:
    """Make the files for a policy whose raw-TCP `rules` are given. `inside`: the config names the script and
    the known hosts where Linux binds them (SCRIPT, KNOWN_HOSTS); else where they are (macOS reads them there).
    `system` is the host's ssh config the config carries on with, or None; of it and its Includes, only files
    `readable` (by the sandbox, and in /etc/ssh) are copied in."""
    try:
        with open(os.path.join(home, ".ssh", "known_hosts"), encoding="utf-8", errors="replace") as handle:
            known = handle.read()
    except OSError:
        known = ""
    folder = os.path.join(cache, "ssh")
    script = write_once(folder, "ssh-proxy", SCRIPT_TEXT.encode(), 0o755)
    known_hosts = write_once(folder, "known_hosts", known_hosts_for(known, rules).encode())
    text = config_text(SCRIPT if inside else script, KNOWN_HOSTS if inside else known_hosts, expanded(system, 0, readable) if system else "")
    return SshFiles(script=script, config=write_once(folder, "ssh_config", text.encode()), known_hosts=known_hosts)


def ssh_environment(config: str, policy_set: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The variables that send git's ssh through the config at `config` (where the sandbox reads it); a plain
    ssh reads it from STOCKADE_SSH_CONFIG where it cannot be bound over /etc/ssh/ssh_config (macOS). They
    replace what the host's environment passed in, not what the policy's [env] set names (its choice)."""
    chosen = {name for name, _value in policy_set}
    env = {"GIT_SSH_COMMAND": f"ssh -F {_quoted(config)}", "STOCKADE_SSH_CONFIG": config}
    return {name: value for name, value in env.items() if name not in chosen}
