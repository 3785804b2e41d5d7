"""bwrap options as small typed pieces; `to_args()` yields the exact words.

The words travel NUL-separated through `--args FD`, so nothing a policy or
path contains can become an option, and `ps` shows none of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    word: str  # e.g. "--unshare-all"

    def to_args(self) -> Iterator[str]:
        yield self.word


@dataclass(frozen=True)
class Bind:
    """Writable bind of a host path onto the same path."""

    path: str
    word = "--bind"

    def to_args(self) -> Iterator[str]:
        yield from (self.word, self.path, self.path)


@dataclass(frozen=True)
class ReadOnlyBind(Bind):
    word = "--ro-bind"


@dataclass(frozen=True)
class ReadOnlyBindFrom:
    """Read-only bind of `source` onto `dest` (a mask file, for example)."""

    source: str
    dest: str

    def to_args(self) -> Iterator[str]:
        yield from ("--ro-bind", self.source, self.dest)


@dataclass(frozen=True)
class Tmpfs:
    path: str
    size: int | None = None
    read_only: bool = False  # an empty, read-only directory: a mask
    mode: str | None = None

    def to_args(self) -> Iterator[str]:
        if self.mode:
            yield from ("--perms", self.mode)
        if self.size:
            yield from ("--size", str(self.size))
        yield from ("--tmpfs", self.path)
        if self.read_only:
            yield from ("--remount-ro", self.path)


@dataclass(frozen=True)
class Dev:
    path: str = "/dev"

    def to_args(self) -> Iterator[str]:
        yield from ("--dev", self.path)


@dataclass(frozen=True)
class Proc:
    path: str = "/proc"

    def to_args(self) -> Iterator[str]:
        yield from ("--proc", self.path)


@dataclass(frozen=True)
class Chdir:
    path: str

    def to_args(self) -> Iterator[str]:
        yield from ("--chdir", self.path)


@dataclass(frozen=True)
class SetEnv:
    """One variable of the sandbox's environment; bwrap itself starts with none (see execute)."""

    name: str
    value: str

    def to_args(self) -> Iterator[str]:
        yield from ("--setenv", self.name, self.value)


@dataclass(frozen=True)
class FdOption:
    """An option that takes a file descriptor number (--seccomp, --info-fd)."""

    word: str
    fd: int

    def to_args(self) -> Iterator[str]:
        yield from (self.word, str(self.fd))


Piece = Flag | Bind | ReadOnlyBindFrom | Tmpfs | Dev | Proc | Chdir | FdOption | SetEnv


def words(pieces: list[Piece]) -> list[str]:
    return [word for piece in pieces for word in piece.to_args()]


def encode(pieces: list[Piece]) -> bytes:
    """NUL-separated, as `bwrap --args FD` reads them."""
    out = bytearray()
    for word in words(pieces):
        if "\0" in word:
            raise ValueError(f"bwrap argument contains a NUL byte: {word!r}")
        out += word.encode("utf-8", "surrogateescape") + b"\0"
    return bytes(out)
