"""The supervisor's relay: sandbox connections to the proxy daemon, outside the seccomp filter.

The first request line of each connection gets this session's
Proxy-Authorization header, so the daemon knows the session and the sandbox
never sees the credential. Bytes then move with splice(2) through a pipe,
never through Python buffers.
"""

from __future__ import annotations

import os
import socket
import threading

MAX_HEAD = 16384  # a first request line longer than this is refused
CHUNK = 1 << 20
SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 1)  # not SPLICE_F_MORE: measured at half the throughput


class Relay:
    """Accepts on the sandbox's listener; one pair of pump threads per connection."""

    def __init__(self, listener: socket.socket, upstream: tuple[str, int], credential: bytes, max_connections: int = 256) -> None:
        self.listener = listener
        self.upstream = upstream
        self.header = b"Proxy-Authorization: Basic " + credential + b"\r\n"
        self.slots = threading.BoundedSemaphore(max_connections)
        self.refused = 0  # connections over the cap
        self._thread = threading.Thread(target=self._accept_loop, name="stockade-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.slots.acquire(blocking=False):
                self.refused += 1
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            with client:
                # A relay adds no Nagle delay of its own: a response's head and body, spliced as two
                # writes, would otherwise wait for the client's delayed ACK (40 ms per keep-alive request).
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                head = _read_request_line(client)
                if head is None:
                    return
                line, rest = head
                with socket.create_connection(self.upstream) as upstream:
                    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    upstream.sendall(line + self.header + rest)
                    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
                    back.start()
                    _pump(client, upstream)
                    back.join()
        except OSError:
            pass
        finally:
            self.slots.release()


def _read_request_line(client: socket.socket) -> tuple[bytes, bytes] | None:
    """(first line with its CRLF, whatever followed it), or None for a non-HTTP client."""
    data = b""
    while b"\r\n" not in data:
        chunk = client.recv(4096)
        if not chunk or len(data) + len(chunk) > MAX_HEAD:
            if data:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return None
        data += chunk
        if not data[:1].isalpha():  # no HTTP method (SOCKS, TLS, ...): refuse now, not when a CRLF never comes
            break
    end = data.index(b"\r\n") + 2 if b"\r\n" in data else len(data)
    line = data[:end]
    if not line[:1].isalpha() or line.count(b" ") < 2 or not line.rstrip().split(b" ")[-1].startswith(b"HTTP/"):
        client.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 58\r\n\r\n"
                       b"stockade: only HTTP proxy requests reach the network proxy")
        return None
    return line, data[end:]


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Move bytes one way until EOF, then pass the EOF on (half-close)."""
    read_end, write_end = os.pipe()
    try:
        while True:
            moved = os.splice(source.fileno(), write_end, CHUNK, flags=SPLICE_FLAGS)
            if moved == 0:
                break
            while moved:
                moved -= os.splice(read_end, sink.fileno(), moved, flags=SPLICE_FLAGS)
    except OSError:
        pass
    finally:
        os.close(read_end)
        os.close(write_end)
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
