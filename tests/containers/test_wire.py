"""HTTP as the gate reads it: heads, lengths, chunks, and the bounds on each."""

from __future__ import annotations

import socket

import pytest

from stockade.containers import wire


def _reader(data: bytes) -> wire.Reader:
    ours, theirs = socket.socketpair()
    theirs.sendall(data)
    theirs.close()
    return wire.Reader(ours)


def test_a_head_and_what_follows_it_are_kept_apart() -> None:
    reader = _reader(b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcREST")
    head = wire.Head(reader.head() or b"")
    assert wire.request_line(head) == ("POST", "/x") and head.body_length() == 3
    assert wire.read_body(reader, head, 10) == b"abc" and reader.take() == b"REST"


def test_a_chunked_body_is_read_whole_and_its_trailers_dropped() -> None:
    reader = _reader(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n")
    head = wire.Head(reader.head() or b"")
    assert wire.status_of(head) == 200 and wire.read_body(reader, head, 100) == b"abcde"


@pytest.mark.parametrize(
    "raw",
    [
        b"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST /x HTTP/1.1\r\n Folded: header\r\n\r\n",
    ],
)
def test_ambiguous_framing_is_an_error(raw: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.Head(raw[:-2] if False else raw.split(b"\r\n\r\n")[0] + b"\r\n\r\n").body_length()


@pytest.mark.parametrize("line", [b"X: a\nPOST /containers/create HTTP/1.1", b"X: a\rb", b"X: a\x00b", b"GET /_ping\n HTTP/1.1"])
def test_a_control_character_inside_a_head_is_refused(line: bytes) -> None:
    """Go reads a bare LF as a line end: what the gate saw as one header would be a second request there."""
    with pytest.raises(wire.WireError, match="control character"):
        wire.Head(b"GET /_ping HTTP/1.1\r\n" + line + b"\r\n\r\n")


def test_bounds_hold() -> None:
    with pytest.raises(wire.WireError, match="head too long"):
        _reader(b"GET /" + b"a" * (wire.MAX_HEAD + 10)).head()
    reader = _reader(b"POST /x HTTP/1.1\r\nContent-Length: 99999\r\n\r\n")
    with pytest.raises(wire.WireError, match="too large"):
        wire.read_body(reader, wire.Head(reader.head() or b""), 100)
    assert _reader(b"").head() is None
    with pytest.raises(wire.WireError, match="bad request line"):
        wire.request_line(wire.Head(b"GET http://other/ HTTP/1.1\r\n\r\n"))


def test_a_chunk_past_its_bound_is_refused_before_it_is_read() -> None:
    reader = _reader(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + f"{wire.MAX_CHUNK + 1:x}\r\n".encode() + b"x" * 10)
    head = wire.Head(reader.head() or b"")
    with pytest.raises(wire.WireError, match="too large"):
        wire.read_body(reader, head, 1 << 40)
    with pytest.raises(wire.WireError, match="bad Content-Length"):
        wire.Head(b"POST /x HTTP/1.1\r\nContent-Length: \xc2\xb2\r\n\r\n".decode("utf-8").encode("latin-1", "replace")).body_length()
