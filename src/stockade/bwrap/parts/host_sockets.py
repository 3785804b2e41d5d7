"""The host's pathname sockets that a sandbox could see, to hide them (ESCAPES 35).

seccomp cannot filter connect() by path, so the sandbox may make stream sockets
of its own only because every host socket it could see is hidden at planning.
The kernel lists the sockets of the host's network namespace in /proc/net/unix;
those under folders every sandbox gets privately (/tmp, /run, /dev, ...) are
out of sight already and left out, so the list changes rarely, and the plan
cache keeps a plan only while the list is the same (plan_cache.py).

The kernel lists each path as it was given to bind(): through a symlinked
folder, or climbing out of /tmp with `..`. Each is resolved to where the socket
is now, and only then left out for lying in a private folder; and not even then
when the run shows that folder's place (`keep`: a project under /tmp).

A name may hold a newline followed by text shaped like an entry line: the
lines alone cannot tell one name from two entries, so each pathname is also
read on over the lines after it, as far as sun_path reaches, and each such
reading that names a socket is hidden too.

Not seen here: a socket bound by a relative path (the kernel lists it as given),
and a socket of another network namespace (a container's, another sandbox's)
bound on a path this sandbox can see. A socket made on the host after planning,
in a place the sandbox sees, is reachable by stream connect() until the next run.
"""

from __future__ import annotations

import os
import stat

TABLE = "/proc/net/unix"
PRIVATE_INSIDE = ("/tmp", "/var/tmp", "/dev", "/run")  # every sandbox gets its own (mounts.py)
_open, _read, _close = os.open, os.read, os.close  # planning's recorder wraps os.open; this read is checked by content
_lstat, _readlink = os.lstat, os.readlink  # and os.lstat: the resolved list is compared whole instead
MAX_LINKS = 40
SUN_PATH = 108  # bytes of a pathname socket address (sockaddr_un.sun_path); a name the kernel lists is no longer
# An entry: "NUM: REFCOUNT PROTOCOL FLAGS TYPE ST INODE[ PATH]", hex fields of these widths. Parsed by
# hand: every cached `stockade run` reads this table, and importing re would cost it milliseconds.
_LOWER_HEX, _UPPER_HEX, _DIGITS = frozenset("0123456789abcdef"), frozenset("0123456789ABCDEF"), frozenset("0123456789")
_WIDTHS = (8, 8, 8, 4, 2)
NOT_AN_ENTRY = object()


def paths(keep: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The real paths of the host's pathname sockets outside the sandbox's private folders
    (or inside one of `keep`, places of them the sandbox sees) whose file is there (the
    kernel keeps listing a socket whose file was removed: nothing can connect to it by path,
    and it would change the list when its daemon ends), sorted, once each."""
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
    lines, parsed = _parsed(b"".join(chunks).decode("utf-8", "surrogateescape"))
    found: set[str] = set()
    for path in _joined(lines, parsed):
        real = resolve(path)
        if (not _inside(real, PRIVATE_INSIDE) or _inside(real, keep)) and _exists(real):
            found.add(real)
    for path in _longer(lines, parsed):
        if _is_socket(path):  # one lstat first: almost every such reading names nothing
            real = resolve(path)
            if not _inside(real, PRIVATE_INSIDE) or _inside(real, keep):
                found.add(real)
    return tuple(sorted(found))


def scoped(scope: tuple[str | None, tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> tuple[str, ...]:
    """The host sockets a sandbox of this scope (mounts.View.socket_scope) sees, as they are now:
    none in stockade's own hidden folders (`unseen`), which no sandbox enters."""
    home, exposed, keep, unseen = scope
    return tuple(path for path in visible(paths(keep), home, exposed) if not _inside(path, unseen))


def visible(found: tuple[str, ...], home: str | None, exposed: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `found` a sandbox sees: all but those in its private home that no writable
    or shown place (`exposed`) brings back. A plan depends on these only, so a socket coming
    and going in a hidden place (an ssh-agent in ~/.ssh) keeps the plan."""
    return tuple(path for path in found if not home or not _inside(path, (home,)) or _inside(path, exposed))


def _exists(path: str) -> bool:
    try:
        _lstat(path)
    except OSError:
        return False
    return True


def _parsed(table: str) -> tuple[list[str], list[str | None | object]]:
    """The table's lines after its header, and each line's `_entry_name`. Split on newlines only
    (a carriage return or a form feed is part of a name, which splitlines would break); the
    table's own last newline ends no name."""
    lines = table.removesuffix("\n").split("\n")[1:]
    return lines, [_entry_name(line) for line in lines]


def _joined(lines: list[str], parsed: list[str | None | object]) -> list[str]:
    """The pathnames in the table (`parsed`: each line's `_entry_name`). The kernel prints a name
    as it is, so a name with a newline goes on over the next lines: a line that does not start
    like an entry is the rest of the name above, not an entry of its own."""
    names: list[str | None] = []
    for line, name in zip(lines, parsed, strict=True):
        if name is not NOT_AN_ENTRY:
            names.append(name)  # type: ignore[arg-type]
        elif names and names[-1] is not None:
            names[-1] += "\n" + line
    return [name for name in names if name and name.startswith("/")]


def _longer(lines: list[str], parsed: list[str | None | object]) -> list[str]:
    """Each pathname read on over the lines after it, as far as a socket address can reach.

    A name may hold a newline followed by text shaped like an entry line (the kernel
    prints it as it is), and `_joined` then cuts the name there: the lines are the
    same whether they are one name or two entries. So every longer reading that still
    fits in sun_path is a candidate too; only those naming a socket are kept (paths)."""
    readings: list[str] = []
    for index, name in enumerate(parsed):
        if not isinstance(name, str) or not name.startswith("/"):
            continue
        size = len(name.encode("utf-8", "surrogateescape"))
        following = index + 1
        while following < len(lines):
            more = lines[following]
            size += 1 + len(more.encode("utf-8", "surrogateescape"))
            if size > SUN_PATH:
                break
            name += "\n" + more
            readings.append(name)
            following += 1
    return readings


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(_lstat(path).st_mode)
    except OSError:
        return False


def _entry_name(line: str) -> str | None | object:
    """The path of an entry line (None when it has none), or NOT_AN_ENTRY."""
    number, colon, rest = line.partition(": ")
    if not colon or not number or not set(number) <= _LOWER_HEX:
        return NOT_AN_ENTRY
    fields = rest.split(" ", len(_WIDTHS))
    if len(fields) <= len(_WIDTHS):
        return NOT_AN_ENTRY
    for field, width in zip(fields, _WIDTHS, strict=False):
        if len(field) != width or not set(field) <= _UPPER_HEX:
            return NOT_AN_ENTRY
    inode, space, path = fields[-1].lstrip(" ").partition(" ")  # the inode is right-aligned: spaces before it
    if not inode or not set(inode) <= _DIGITS:
        return NOT_AN_ENTRY
    return path if space else None


def resolve(path: str, links: int = 0) -> str:
    """os.path.realpath (missing parts kept as spelled), by the functions saved above."""
    resolved = "/"
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, part)
        try:
            info = _lstat(candidate)
        except OSError:
            resolved = candidate
            continue
        if not stat.S_ISLNK(info.st_mode):
            resolved = candidate
        elif links >= MAX_LINKS:
            return candidate  # a loop: as realpath does, give up on resolving
        else:
            resolved = resolve(os.path.join(resolved, _readlink(candidate)), links + 1)
    return resolved


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == folder or path.startswith(folder + "/") for folder in folders)


def private(path: str) -> bool:
    """Inside a folder every sandbox gets its own of."""
    return _inside(path, PRIVATE_INSIDE)
