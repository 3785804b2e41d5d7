"""Whether a sandboxed command tried to reach a network it does not have.

A sandbox's network namespace has only loopback (and, when networked, the
proxy's door on it): a connect() or sendto() towards any other address fails
at once with ENETUNREACH, and the kernel counts it as OutNoRoutes in the
namespace's /proc/net/snmp and snmp6. DNS lookups count too (the resolver's
packet to the name server has no route). The command's own message is then
"Could not resolve host" or "Network is unreachable", which tells neither a
person nor a coding agent that the policy is why; with the count, the run's
summary can.

The files are opened while the sandbox lives (an open file keeps its network
namespace), read after it ended: two opens and two reads a run.
"""

from __future__ import annotations

import os

FILES = ("snmp", "snmp6")


def open_counters(pid: int) -> list[int]:
    """The sandbox's counter files, opened through one of its processes; [] if it is gone."""
    fds = []
    for name in FILES:
        try:
            fds.append(os.open(f"/proc/{pid}/net/{name}", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            continue
    return fds


def attempts(fds: list[int]) -> int:
    """Packets and connections that found no route (IPv4 and IPv6); closes the files."""
    return read_counts(fds)[0]


def read_counts(fds: list[int]) -> tuple[int, int]:
    """(packets and connections that found no route, TCP connections refused: on the sandbox's
    own loopback, where a port nobody listens on answers with a reset); closes the files."""
    no_route = refused = 0
    for fd in fds:
        try:
            text = _read_all(fd).decode("ascii", "replace")
        except OSError:
            continue
        finally:
            os.close(fd)
        no_route += _no_routes(text)
        refused += _tcp_failures(text)
    return no_route, refused


def _tcp_failures(text: str) -> int:
    """Tcp AttemptFails of snmp (the TCP counters are one for IPv4 and IPv6)."""
    lines = text.splitlines()
    for header, values in zip(lines, lines[1:], strict=False):
        if header.startswith("Tcp: ") and values.startswith("Tcp: "):
            return _number(dict(zip(header.split(), values.split(), strict=False)).get("AttemptFails", "0"))
    return 0


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _no_routes(text: str) -> int:
    lines = text.splitlines()
    for header, values in zip(lines, lines[1:], strict=False):  # snmp: a header line, then its values
        if header.startswith("Ip: ") and values.startswith("Ip: "):
            fields = dict(zip(header.split(), values.split(), strict=False))
            return _number(fields.get("OutNoRoutes", "0"))
    for line in lines:  # snmp6: one "name value" per line
        name, _, value = line.partition(" ")
        if name == "Ip6OutNoRoutes":
            return _number(value.strip())
    return 0


def _number(text: str) -> int:
    return int(text) if text.isdigit() else 0
