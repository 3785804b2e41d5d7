"""The host's pathname sockets that a sandbox could see, to hide them (ESCAPES 35).

seccomp cannot filter connect() by path, so the sandbox may make stream sockets
of its own only because every host socket it could see is hidden at planning.
The kernel lists the sockets of the host's network namespace in /proc/net/unix;
those under folders every sandbox gets privately (/tmp, /run, /dev, ...) are
out of sight already and left out, so the list changes rarely, and the plan
cache keeps a plan only while the list is the same (plan_cache.py).

Not seen here: a socket bound by a relative path (the kernel lists it as given),
and a socket of another network namespace (a container's, another sandbox's)
bound on a path this sandbox can see. A socket made on the host after planning,
in a place the sandbox sees, is reachable by stream connect() until the next run.
"""

from __future__ import annotations

import os

TABLE = "/proc/net/unix"
PRIVATE_INSIDE = ("/tmp", "/var/tmp", "/dev", "/run")  # every sandbox gets its own (mounts.py)
_open, _read, _close = os.open, os.read, os.close  # planning's recorder wraps os.open; this read is checked by content


def paths() -> tuple[str, ...]:
    """The host's pathname sockets outside the sandbox's private folders whose file is there
    (the kernel keeps listing a socket whose file was removed: nothing can connect to it by
    path, and it would change the list when its daemon ends), sorted, once each."""
    try:
        fd = _open(TABLE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        chunks = []
        while chunk := _read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return ()
    finally:
        _close(fd)
    private = PRIVATE_INSIDE + (("/var/run",) if _links_to_run("/var/run") else ())
    found: set[str] = set()
    for line in b"".join(chunks).decode("utf-8", "surrogateescape").splitlines()[1:]:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("/") and not _inside(fields[7], private):
            found.add(fields[7])
    return tuple(sorted(path for path in found if os.path.lexists(path)))


def visible(found: tuple[str, ...], home: str | None, exposed: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `found` a sandbox sees: all but those in its private home that no writable
    or shown place (`exposed`) brings back. A plan depends on these only, so a socket coming
    and going in a hidden place (an ssh-agent in ~/.ssh) keeps the plan."""
    return tuple(
        path for path in found if not home or not _inside(path, (home,)) or _inside(path, exposed)
    )


def _links_to_run(path: str) -> bool:
    try:
        return os.readlink(path).rstrip("/") in ("/run", "../run")
    except OSError:
        return False


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == folder or path.startswith(folder + "/") for folder in folders)
