"""What the network bridge and the proxy daemon cost, each figure a ratio measured in the same run.

    python bench/net.py [--runs 5] [--size-mb 200] [--requests 200] [--startup-runs 20] [--cold-runs 5]

- bulk: a SIZE MB download (curl -o /dev/null) from a loopback python
  http.server origin, direct on the host vs from inside `stockade run`
  through the bridge and the daemon; plain HTTP (the daemon streams the body)
  and HTTPS (a CONNECT tunnel the daemon splices). MB/s as curl reports it,
  so the sandbox's start-up is not in the figure.
- keep-alive: REQUESTS small GETs on one persistent connection (http.client),
  direct vs through the proxy from inside the sandbox; the median added
  latency per request.
- start-up: `stockade run -- true` with a network allowlist and a warm daemon
  vs the same with the network off; and the first run against a cold daemon.

Everything runs in a HOME of its own (its own daemon, which the bench stops),
with the daemon's test resolver mapping bench.test to the loopback origins.
Prints Markdown tables; asserts nothing.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Timing, interleaved, machine, stockade_command  # noqa: E402

NAME = "bench.test"
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
SMALL = b"x" * 512


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall between them
    server: http.server.ThreadingHTTPServer

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


def start_origin(big: bytes, tls: tuple[Path, Path] | None = None) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.big = big  # type: ignore[attr-defined]
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def make_certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "origin.pem", folder / "origin.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", f"/CN={NAME}", "-addext", f"subjectAltName=DNS:{NAME},IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    os.chmod(cert, 0o644)
    return cert, key


class Bench:
    def __init__(self, root: Path, cert: Path, ports: dict[str, int]) -> None:
        self.root = root
        self.home = root / "h"
        self.project = root / "p"
        for folder in (self.home, self.project):
            folder.mkdir()
        self.cert = cert
        self.ports = ports
        resolver = root / "names.json"
        resolver.write_text(json.dumps({"names": {NAME: ["127.0.0.1"]}, "upstreams": [f"127.0.0.1:{p}" for p in ports.values()]}))
        self.env = {
            "HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
            "STOCKADE_PROXY_TEST_RESOLVER": str(resolver), "STOCKADE_PROXY_IDLE": "600",
        }  # fmt: skip
        if os.environ.get("PYTHONPATH"):
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        self.net_policy = root / "net.toml"
        self.net_policy.write_text(f'extends = ["default"]\n[network]\nallow = ["{NAME}"]\n')
        self.off_policy = root / "off.toml"
        self.off_policy.write_text('extends = ["default"]\n')
        self.stockade = stockade_command()

    def run_argv(self, policy: Path, *command: str) -> list[str]:
        return [*self.stockade, "run", "--quiet", "--policy", str(policy), "--", *command]

    def sandboxed(self, *command: str) -> str:
        """stdout of `command` inside the sandbox with the network allowlist."""
        done = subprocess.run(self.run_argv(self.net_policy, *command), cwd=self.project, env=self.env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"sandboxed {command[0]}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def daemon_pid(self) -> int | None:
        try:
            return int(json.loads((self.home / ".local/state/stockade/run/proxy.port").read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return None

    def stop_daemon(self) -> None:
        pid = self.daemon_pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return
            except OSError:
                return
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)


def curl_speed(argv: list[str]) -> float:
    """MB/s of one download as curl measures it (its speed_download, bytes per second)."""
    return float(subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600).stdout.split()[-1]) / 1e6


def bulk(bench: Bench, runs: int) -> list[tuple[str, float, float]]:
    """(scheme, direct MB/s, sandboxed MB/s), medians of `runs` interleaved rounds."""
    rows = []
    for scheme in ("http", "https"):
        port = bench.ports[scheme]
        curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{speed_download}\n", "--cacert", str(bench.cert)]
        direct_url = f"{scheme}://{NAME}:{port}/big"
        direct, sandboxed = [], []
        for _ in range(runs):
            direct.append(curl_speed([*curl, "--resolve", f"{NAME}:{port}:127.0.0.1", direct_url]))
            out = bench.sandboxed(*curl, direct_url)
            sandboxed.append(float(out.split()[-1]) / 1e6)
        rows.append((scheme, statistics.median(direct), statistics.median(sandboxed)))
    return rows


KEEPALIVE = r"""
import http.client, json, ssl, sys, time
scheme, host, port, count, via, cafile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
context = ssl.create_default_context(cafile=cafile)
if via == "direct":
    conn = (http.client.HTTPSConnection(host, port, context=context) if scheme == "https" else http.client.HTTPConnection(host, port))
    target = "/small"
else:
    proxy_host, proxy_port = via.rsplit(":", 1)
    if scheme == "https":
        conn = http.client.HTTPSConnection(proxy_host, int(proxy_port), context=context)
        conn.set_tunnel(host, port)
        target = "/small"
    else:
        conn = http.client.HTTPConnection(proxy_host, int(proxy_port))
        target = f"http://{host}:{port}/small"
samples = []
for _ in range(count):
    start = time.perf_counter()
    conn.request("GET", target, headers={"Host": f"{host}:{port}"})
    response = conn.getresponse()
    response.read()
    samples.append(time.perf_counter() - start)
    if response.status != 200:
        raise SystemExit(f"status {response.status}")
print(json.dumps(samples))
"""


def keepalive(bench: Bench, count: int) -> list[tuple[str, float, float]]:
    """(scheme, direct median ms, sandboxed median ms) per request on one kept-alive connection."""
    rows = []
    for scheme in ("http", "https"):
        port = str(bench.ports[scheme])
        # Direct: the origin by its address (the certificate names 127.0.0.1 too).
        direct_argv = [PY, "-c", KEEPALIVE, scheme, "127.0.0.1", port, str(count), "direct", str(bench.cert)]
        direct = json.loads(subprocess.run(direct_argv, capture_output=True, text=True, check=True, timeout=300).stdout)
        sandboxed = json.loads(bench.sandboxed(PY, "-c", KEEPALIVE, scheme, NAME, port, str(count), "127.0.0.1:3128", str(bench.cert)))
        rows.append((scheme, statistics.median(direct) * 1000, statistics.median(sandboxed) * 1000))
    return rows


def startup(bench: Bench, runs: int, cold_runs: int) -> tuple[list[Timing], Timing]:
    net = bench.run_argv(bench.net_policy, "true")
    off = bench.run_argv(bench.off_policy, "true")
    subprocess.run(net, cwd=bench.project, env=bench.env, check=True, capture_output=True)  # the daemon is warm from here on
    warm = interleaved({"network off": off, "allowlist, warm daemon": net}, runs, cwd=str(bench.project), env=bench.env)
    cold = []
    for _ in range(cold_runs):
        bench.stop_daemon()
        start = time.perf_counter()
        subprocess.run(net, cwd=bench.project, env=bench.env, check=True, capture_output=True)
        cold.append(time.perf_counter() - start)
    return warm, Timing("allowlist, cold daemon (first run)", tuple(cold))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="downloads per path")
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--requests", type=int, default=200, help="keep-alive requests per path")
    parser.add_argument("--startup-runs", type=int, default=20)
    parser.add_argument("--cold-runs", type=int, default=5)
    args = parser.parse_args()
    for tool in ("curl", "openssl", "bwrap"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench/net.py needs {tool}")
    root = Path(tempfile.mkdtemp(prefix="sbn-", dir=os.path.expanduser("~")))  # visible inside, and a short socket path
    big = os.urandom(args.size_mb * 1_000_000)
    cert, key = make_certificate(root)
    servers = {"http": start_origin(big), "https": start_origin(big, (cert, key))}
    bench = Bench(root, cert, {k: int(s.server_address[1]) for k, s in servers.items()})
    try:
        warm, cold = startup(bench, args.startup_runs, args.cold_runs)
        bulk_rows = bulk(bench, args.runs)
        keep_rows = keepalive(bench, args.requests)
    finally:
        bench.stop_daemon()
        for server in servers.values():
            server.shutdown()
            server.server_close()
        shutil.rmtree(root, ignore_errors=True)

    print(f"# network ({machine()})\n")
    print(f"## bulk: {args.size_mb} MB download, median of {args.runs} (curl's own MB/s)\n")
    print("| path | direct MB/s | sandbox + proxy MB/s | ratio |")
    print("|---|---:|---:|---:|")
    for scheme, direct, sandboxed in bulk_rows:
        how = "plain HTTP (daemon streams the body)" if scheme == "http" else "HTTPS (CONNECT tunnel, spliced)"
        print(f"| {how} | {direct:.0f} | {sandboxed:.0f} | {sandboxed / direct:.2f} |")
    print(f"\n## keep-alive: {args.requests} small GETs on one connection, median per request\n")
    print("| path | direct ms | sandbox + proxy ms | added ms | ratio |")
    print("|---|---:|---:|---:|---:|")
    for scheme, direct, sandboxed in keep_rows:
        print(f"| {scheme} | {direct:.3f} | {sandboxed:.3f} | +{sandboxed - direct:.3f} | {sandboxed / direct:.1f} |")
    base = warm[0].median_ms
    print(f"\n## start-up: `stockade run -- true`, median of {args.startup_runs} interleaved (cold: {args.cold_runs} runs)\n")
    print("| what | median ms | min | max | vs network off |")
    print("|---|---:|---:|---:|---:|")
    for t in (*warm, cold):
        print(f"| {t.name} | {t.median_ms:.1f} | {t.min_ms:.1f} | {t.max_ms:.1f} | +{t.median_ms - base:.1f} ms ({t.median_ms / base:.2f}x) |")


if __name__ == "__main__":
    main()
