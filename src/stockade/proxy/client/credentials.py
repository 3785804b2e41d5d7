"""Read a run's credentials where they live, outside the sandbox, and make each its placeholder.

Runs in stockade's own process before the sandbox starts, once per run (a
cached plan keeps only where each value lives, never a value). The values
go to the daemon in the session's spec over its private control socket;
the sandbox gets only the placeholders (bwrap/running/execute.py).

On every networked run that has credentials, so it imports nothing heavy:
`subprocess` only for a credential read from a command.
"""

from __future__ import annotations

import os

from stockade.core.errors import PolicyError
from stockade.profiles.credentials import Resolved  # the model a run's credential is read into

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from stockade.profiles.credentials import Credential

MAX_VALUE = 16 << 10  # bytes: far above any token, and a header's value has to stay a header
COMMAND_TIMEOUT = 30.0  # seconds for `gh auth token` and its kin
PLACEHOLDER_PREFIX = "stockade-placeholder-"


def plan_entry(
    name: str, source: str, where: tuple[str, ...], hosts: tuple[str, ...], header: str | None, query: str | None, origin: str
) -> list[object]:
    """What a cached plan keeps of one credential (proxy.client.sessionclient.session_rules): where its value lives, not the value."""
    return [name, source, list(where), list(hosts), header or "", query or "", origin]


def read_all(credentials: Sequence[Credential], host_env: Mapping[str, str]) -> list[Resolved]:
    """`resolve` for a policy's credentials, read straight from it (macOS, which keeps no plan)."""
    return resolve([plan_entry(c.name, c.source, c.where, c.hosts, c.header, c.query, c.origin) for c in credentials], host_env)


def resolve(entries: list[list[object]], host_env: Mapping[str, str]) -> list[Resolved]:
    """Each credential's value, read now, with a placeholder made for this run; PolicyError (exit 2)
    names the credential, where its value should have been, and the policy file."""
    found = []
    for entry in entries:
        name, source, where, hosts, header, query, origin = entry
        assert isinstance(name, str) and isinstance(source, str) and isinstance(where, list) and isinstance(origin, str)
        value = _read(name, source, [str(word) for word in where], host_env, origin)
        placeholder = f"{PLACEHOLDER_PREFIX}{name.lower().replace('_', '-')}-{os.urandom(20).hex()}"
        found.append(Resolved(name, placeholder, value, [str(h) for h in hosts], str(header), str(query)))  # type: ignore[attr-defined]
    return found


def _read(name: str, source: str, where: list[str], host_env: Mapping[str, str], origin: str) -> str:
    label = f"[credentials.{name}]"
    if source == "env":
        value = host_env.get(where[0])
        if value is None:
            raise _missing(f"{label}: the variable {where[0]} is not set in the shell stockade runs from; set it, or remove the table", origin)
    elif source == "file":
        try:
            with open(where[0], "rb") as handle:
                links = os.fstat(handle.fileno()).st_nlink
                data = handle.read(MAX_VALUE + 1) if links <= 1 else b""
        except OSError as exc:
            raise _missing(f"{label}: cannot read {where[0]}: {exc.strerror}", origin) from None
        if links > 1:
            # The sandbox is kept from this path only: another name of the same file would show the value.
            others = f"{links - 1} other name(s) (hard links) the sandbox could read it by"
            raise _missing(f"{label}: {where[0]} has {others}; keep it in a file of its own", origin)
        value = _text(label, data, f"the file {where[0]}", origin)
    else:
        value = _run(label, where, origin)
    value = value.strip()
    if not value:
        raise _missing(f"{label}: its value ({_described(source, where)}) is empty", origin)
    if len(value.encode("utf-8", "surrogateescape")) > MAX_VALUE:
        raise _missing(f"{label}: its value ({_described(source, where)}) is longer than {MAX_VALUE >> 10} KiB", origin)
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        # A line break would end the header it is put in and start one the sandbox chose.
        raise _missing(f"{label}: its value ({_described(source, where)}) holds a line break or another control character", origin)
    return value


def _run(label: str, command: list[str], origin: str) -> str:
    import subprocess

    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=COMMAND_TIMEOUT, check=False)
    except FileNotFoundError:
        raise _missing(f"{label}: the command {command[0]} was not found", origin) from None
    except PermissionError:
        raise _missing(f"{label}: the command {command[0]} cannot be run (permission denied)", origin) from None
    except subprocess.TimeoutExpired:
        raise _missing(f"{label}: the command {' '.join(command)} did not finish in {COMMAND_TIMEOUT:.0f} s", origin) from None
    except OSError as exc:
        raise _missing(f"{label}: the command {command[0]} failed to start: {exc.strerror}", origin) from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        last = f": {said[-1][:200]}" if said else ""
        raise _missing(f"{label}: the command {' '.join(command)} exited with {done.returncode}{last}", origin)
    return _text(label, done.stdout, f"the output of {' '.join(command)}", origin)


def _text(label: str, data: bytes, what: str, origin: str) -> str:
    if len(data) > MAX_VALUE:
        raise _missing(f"{label}: {what} is longer than {MAX_VALUE >> 10} KiB", origin)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _missing(f"{label}: {what} is not UTF-8 text", origin) from None


def _described(source: str, where: list[str]) -> str:
    return f"${where[0]}" if source == "env" else where[0] if source == "file" else " ".join(where)


def _missing(message: str, origin: str) -> PolicyError:
    return PolicyError(message, file=origin if origin.startswith("/") else None)
