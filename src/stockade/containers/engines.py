"""Where the host's container engine listens, and each run's gate folder beside it.

The engine's socket is the policy's `[containers] socket` when it names one;
else the user's own DOCKER_HOST (docker) or CONTAINER_HOST (podman) when it is
a unix:// URL; else the engine's usual place: /var/run/docker.sock, and for
podman /run/podman/podman.sock as root or $XDG_RUNTIME_DIR/podman/podman.sock
for a user (where `podman system service` listens).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping

from stockade.containers.gate import split_url

GATES = "containers"  # under stockade's runtime folder: one folder per running session
SOCKET = "docker.sock"
LOCK = "lock"


def engine_socket(engine: str, configured: str | None, env: Mapping[str, str]) -> str:
    if configured:
        return configured
    if engine == "docker":
        return split_url(env.get("DOCKER_HOST", "")) or "/var/run/docker.sock"
    given = split_url(env.get("CONTAINER_HOST", ""))
    if given:
        return given
    if os.geteuid() == 0:
        return "/run/podman/podman.sock"
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return os.path.join(runtime, "podman", "podman.sock")


def gate_folder(runtime: str, session: str) -> str:
    return os.path.join(runtime, GATES, session)


def hold(folder: str) -> int:
    """Mark the session alive for as long as this process lives: a lock on a file in its folder."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def gone(runtime: str, session: str) -> bool:
    """Whether `session` was a run of this user's (its folder is here) that ended without its cleanup."""
    return os.path.isdir(gate_folder(runtime, session)) and not alive(runtime, session)


def remove_folder(folder: str) -> None:
    """A gate's folder, its socket and lock with it (quietly: another run may be removing it too)."""
    for name in (SOCKET, LOCK):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass


def alive(runtime: str, session: str) -> bool:
    """Whether the run of `session` still holds its lock (a run killed with -9 does not)."""
    try:
        fd = os.open(os.path.join(gate_folder(runtime, session), LOCK), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
