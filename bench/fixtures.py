"""What the workloads run and run against: loopback origins (a big body, small ones), and the scripts they run."""

from __future__ import annotations

import http.server
import os
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

NAME = "bench.test"  # what stockade's daemon is told (by its test resolver) lives on loopback
SMALL = b"x" * 512


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall between them

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = self.server.big if self.path == "/big" else SMALL  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        view = memoryview(body)
        for start in range(0, len(view), 1 << 20):
            self.wfile.write(view[start : start + (1 << 20)])


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A throwaway certificate for NAME and 127.0.0.1, so both stockade (by name) and srt (by address) verify it."""
    cert, key = folder / "origin.pem", folder / "origin.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", f"/CN={NAME}", "-addext", f"subjectAltName=DNS:{NAME},IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    os.chmod(cert, 0o644)
    return cert, key


def serve(big: bytes, tls: tuple[Path, Path] | None) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.big = big  # type: ignore[attr-defined]
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Origins:
    """A plain-HTTP and an HTTPS origin on loopback, serving the same random body."""

    cert: Path
    servers: dict[str, http.server.ThreadingHTTPServer]

    @classmethod
    def start(cls, folder: Path, size_mb: int) -> Origins:
        big = os.urandom(size_mb * 1_000_000)
        cert, key = make_certificate(folder)
        return cls(cert, {"http": serve(big, None), "https": serve(big, (cert, key))})

    def port(self, scheme: str) -> int:
        return int(self.servers[scheme].server_address[1])

    def stop(self) -> None:
        for server in self.servers.values():
            server.shutdown()
            server.server_close()


# Small GETs on one kept-alive connection, direct or through whatever proxy the sandbox put in the environment
# (srt's asks for the credentials it puts in the proxy URL). Prints each request's latency in seconds, as JSON.
# An empty CA file trusts the default store, which SSL_CERT_FILE names inside a sandbox with inspected hosts.
KEEPALIVE = r"""
import base64, http.client, json, os, ssl, sys, time, urllib.parse
scheme, host, port, count, cafile, via = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] or None, sys.argv[6]
context = ssl.create_default_context(cafile=cafile)
headers, target = {"Host": f"{host}:{port}"}, "/small"
if os.environ.get("BENCH_TOKEN"):  # the credential row: a placeholder the daemon swaps for the value
    headers["Authorization"] = "Bearer " + os.environ["BENCH_TOKEN"]
if via == "direct":
    conn = http.client.HTTPSConnection(host, port, context=context) if scheme == "https" else http.client.HTTPConnection(host, port)
else:
    proxy = urllib.parse.urlsplit(os.environ[f"{scheme}_proxy"] if f"{scheme}_proxy" in os.environ else os.environ[f"{scheme.upper()}_PROXY"])
    auth = {}
    if proxy.username:
        pair = f"{urllib.parse.unquote(proxy.username)}:{urllib.parse.unquote(proxy.password or '')}"
        auth["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    if scheme == "https":
        conn = http.client.HTTPSConnection(proxy.hostname, proxy.port, context=context)
        conn.set_tunnel(host, port, headers=auth)
    else:
        conn = http.client.HTTPConnection(proxy.hostname, proxy.port)
        target = f"http://{host}:{port}/small"
        headers.update(auth)
samples = []
for _ in range(count):
    start = time.perf_counter()
    conn.request("GET", target, headers=headers)
    response = conn.getresponse()
    response.read()
    samples.append(time.perf_counter() - start)
    if response.status != 200:
        raise SystemExit(f"status {response.status}")
print(json.dumps(samples))
"""

# Writes COUNT small files into ./f, then reads them all back: a build or a test run touching many files.
FILES = r"""
import os, sys
count, body = int(sys.argv[1]), b"x" * 200
os.mkdir("f")
for i in range(count):
    with open(f"f/{i}", "wb") as handle:
        handle.write(body)
total = 0
for i in range(count):
    with open(f"f/{i}", "rb") as handle:
        total += len(handle.read())
if total != count * len(body):
    raise SystemExit("short read")
"""
