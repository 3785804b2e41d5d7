"""HTTP/1.1 as the Engine API speaks it over a unix socket: heads, bodies, and nothing more.

Bounded everywhere: a head past MAX_HEAD, a body the gate reads past MAX_BODY,
or a response it reads past MAX_RESPONSE is an error, never a buffer that
grows with what the sandbox (or an engine) sends.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator

MAX_HEAD = 64 << 10
MAX_BODY = 4 << 20  # a create body is a few KB
MAX_RESPONSE = 64 << 20  # a list of containers
CHUNK = 64 << 10


class WireError(Exception):
    """A message that is not HTTP/1.1 as the gate takes it."""


class Reader:
    """Reads from a socket through a buffer of its own, so that what follows a head is kept."""

    def __init__(self, sock: socket.socket, deadline: float | None = None) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.deadline = deadline  # time.monotonic() by which what is read must have come (a request); None: no bound

    def _fill(self) -> bool:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise WireError("the request did not arrive in time")
            self.sock.settimeout(left)
        data = self.sock.recv(CHUNK)
        if data:
            self.buffer += data
        return bool(data)

    def head(self) -> bytes | None:
        """The head up to its blank line; None at a clean end before any byte."""
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self.buffer[: end + 4])
                del self.buffer[: end + 4]
                return head
            if len(self.buffer) > MAX_HEAD:
                raise WireError("head too long")
            if not self._fill():
                if self.buffer:
                    raise WireError("the connection ended inside a head")
                return None

    def exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            if not self._fill():
                raise WireError("the connection ended inside a body")
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def line(self) -> bytes:
        while True:
            end = self.buffer.find(b"\r\n")
            if end >= 0:
                data = bytes(self.buffer[: end + 2])
                del self.buffer[: end + 2]
                return data
            if len(self.buffer) > MAX_HEAD:
                raise WireError("line too long")
            if not self._fill():
                raise WireError("the connection ended inside a line")

    def take(self) -> bytes:
        data = bytes(self.buffer)
        self.buffer.clear()
        return data


_DIGITS = re.compile(r"^[0-9]{1,18}$")  # ASCII digits only (str.isdigit takes "²")
_HEX = re.compile(r"^[0-9A-Fa-f]{1,8}$")
MAX_CHUNK = 16 << 20  # one chunk of a body, at most
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # any control byte but a tab: a bare LF is a line end to the engine


class Head:
    """A request's or a response's first line and headers. A control byte inside a line (a bare LF,
    a CR, a NUL) is refused: the engine may read it as a line end the gate did not see."""

    def __init__(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\r\n")
        if any(_CONTROL.search(line) for line in lines):
            raise WireError("a control character inside a head")
        self.first = lines[0]
        self.headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if not line:
                continue
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise WireError(f"bad header line {line[:80]!r}")
            self.headers.append((name, value.strip()))

    def get(self, name: str) -> str | None:
        found = [value for key, value in self.headers if key.lower() == name.lower()]
        if len(found) > 1 and name.lower() in ("content-length", "transfer-encoding", "host"):
            raise WireError(f"more than one {name}")
        return found[0] if found else None

    def body_length(self) -> int | None:
        """Content-Length, or None for a chunked body; 0 when the message has neither."""
        encoding = self.get("Transfer-Encoding")
        if encoding is not None:
            if encoding.lower() != "chunked":
                raise WireError(f"transfer encoding {encoding!r}")
            if self.get("Content-Length") is not None:
                raise WireError("both a length and chunks")
            return None
        length = self.get("Content-Length")
        if length is None:
            return 0
        if not _DIGITS.match(length):
            raise WireError("bad Content-Length")
        return int(length)


def request_line(head: Head) -> tuple[str, str]:
    parts = head.first.split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0") or not parts[1].startswith("/"):
        raise WireError(f"bad request line {head.first[:120]!r}")
    return parts[0], parts[1]


def status_of(head: Head) -> int:
    parts = head.first.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise WireError(f"bad status line {head.first[:120]!r}")
    return int(parts[1])


def read_body(reader: Reader, head: Head, limit: int, until_end: bool = False) -> bytes:
    """A whole body, at most `limit` bytes (a response with neither length nor chunks: up to its end)."""
    length = head.body_length()
    if length is not None and not (length == 0 and until_end and head.get("Content-Length") is None):
        if length > limit:
            raise WireError("body too large")
        return reader.exactly(length)
    if length is None:
        data = bytearray()
        for piece in chunks(reader, limit):
            data += piece
        return bytes(data)
    data = bytearray(reader.take())
    while reader._fill():
        data += reader.take()
        if len(data) > limit:
            raise WireError("body too large")
    return bytes(data)


def chunks(reader: Reader, limit: int | None = None) -> Iterator[bytes]:
    """The pieces of a chunked body as they come (each at most MAX_CHUNK; all together at most
    `limit`), its trailers read and dropped."""
    total = 0
    while True:
        size_line = reader.line().split(b";", 1)[0].strip().decode("latin-1")
        if not _HEX.match(size_line):
            raise WireError("bad chunk size")
        size = int(size_line, 16)
        if size > MAX_CHUNK or (limit is not None and total + size > limit):
            raise WireError("body too large")
        total += size
        if size == 0:
            while reader.line() != b"\r\n":
                pass
            return
        yield reader.exactly(size)
        if reader.exactly(2) != b"\r\n":
            raise WireError("bad chunk end")


def encode_head(first: str, headers: list[tuple[str, str]]) -> bytes:
    return (first + "\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n").encode("latin-1")


def json_response(status: int, reason: str, data: object) -> bytes:
    body = json.dumps(data).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")]
    return encode_head(f"HTTP/1.1 {status} {reason}", headers) + body
