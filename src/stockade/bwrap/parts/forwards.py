"""The host's loopback ports a policy allows, reached at the same address inside the sandbox.

The sandbox has a loopback of its own (bwrap/parts/netns.py), and NO_PROXY sends
127.0.0.1 and localhost there, as it must: a test suite's own servers live
there. So an allowed `127.0.0.1:8765` (a local registry, a dev database) was
reachable only by a client told to use the proxy. For each allowed loopback
entry with a port, the sandbox's namespace also listens at that address and
port, and the daemon serves what comes in as a CONNECT to the entry
(proxy/daemon/door.py): any client reaches it, plain TCP included, judged and
recorded like every other connection. Its other ports stay the sandbox's own.

Planning only: parse_rule's imports stay off the run's path.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_LISTENERS = 64  # the daemon takes as many (proxy/control.py MAX_FORWARDS)


def loopback_forwards(allow: Iterable[str], proxy_port: int, taken_ports: Iterable[int] = ()) -> list[list[object]]:
    """[the entry as the daemon is asked for it, the port, [addresses to listen at inside]]: one per
    allowed loopback entry that names a port (profiles/openings.py says what the others do).
    `localhost` is both 127.0.0.1 and ::1 (Node asks ::1 first); the proxy's own port inside
    cannot be one, nor interception's (`taken_ports`: its door and the sandbox's resolver)."""
    reserved = {proxy_port, *taken_ports}
    from stockade.profiles.domains import parse_rule

    forwards: list[list[object]] = []
    taken: set[tuple[str, int]] = set()
    for text in allow:
        try:
            rule = parse_rule(text)
        except ValueError:
            continue
        if rule.host == "localhost":
            addresses = ["127.0.0.1", "::1"]
        elif rule.network is not None and rule.network.num_addresses == 1 and rule.network.is_loopback:
            addresses = [str(rule.network.network_address)]
        else:
            continue
        if rule.port is None or rule.port in reserved:
            continue
        fresh = [address for address in addresses if (address, rule.port) not in taken][: MAX_LISTENERS - len(taken)]
        taken.update((address, rule.port) for address in fresh)
        if fresh:
            forwards.append([str(rule), rule.port, fresh])
    return forwards
