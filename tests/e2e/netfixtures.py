"""The host side of the network escape suite (ESCAPES.md section B).

One `NetWorld` per test module: loopback HTTP and HTTPS origins that the
proxy daemon reaches under test names through its test resolver
(STOCKADE_PROXY_TEST_RESOLVER), a host-only canary HTTP server and a UDP
canary that must hear nothing, a self-signed certificate for the test names,
and a HOME of its own, so the daemon (one per user home) is this module's
alone and is stopped at teardown. Every origin logs what it receives, the
resolver logs every name it is asked, and each run writes its own audit log,
so the tests assert on the host side rather than on what the sandbox prints.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import random
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.boxes import Box
from tests.e2e.escapes import Listener
from tests.netkit import make_certificate
from tests.visible import force_rmtree, visible_root

PY = "/usr/bin/python3"  # Debian's python inside the sandbox, readable by every uid
NAMES = ("allowed.test", "denied.test", "a.wild.test", "blocked.wild.test", "pypi.test")
ALLOW = ("allowed.test", "*.wild.test")
DENY = ("blocked.wild.test",)
PROXY_PORT = 3128  # inside the sandbox (bwrap/parts/netns.py)
BIG = 64 << 20
SUN_PATH_MAX = 107  # sockaddr_un.sun_path holds 108 bytes with the NUL
q = shlex.quote


# -- origins -------------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    host: str
    body_bytes: int = 0
    body_sha: str = ""


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        super().__init__(("127.0.0.1", 0), _Handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self.origin.lock:
            self.origin.connections += 1
        return True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # head and body are two writes: no delayed-ACK stall of the origin's own
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _seen(self, **extra: Any) -> None:
        origin = self.server.origin
        with origin.lock:
            origin.requests.append(Seen(self.command, self.path, self.headers.get("Host", ""), **extra))

    def _reply(self, body: bytes | memoryview, status: int = 200, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        view = memoryview(body)
        for start in range(0, len(view), 1 << 20):
            self.wfile.write(view[start : start + (1 << 20)])

    def do_GET(self) -> None:
        self._seen()
        origin = self.server.origin
        path = self.path.split("?", 1)[0]
        if path == "/blob":
            self._reply(origin.blob)
        elif path == "/drip":  # 64 KiB every 50 ms for up to 20 s: a download that is still going
            self._drip()
        elif path in origin.files:
            body, kind = origin.files[path]
            self._reply(body, kind=kind)
        elif origin.files and path.startswith(("/simple", "/files")):
            self._reply(b"not found\n", 404)
        else:
            self._reply(f"hello from {origin.name} {self.path}\n".encode())

    do_HEAD = do_GET

    def _drip(self) -> None:
        chunk, count = b"d" * (64 << 10), 400
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(chunk) * count))
        self.end_headers()
        try:
            for _ in range(count):
                self.wfile.write(chunk)
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass  # the proxy went away

    def do_POST(self) -> None:
        remaining = int(self.headers.get("Content-Length", "0"))
        digest = hashlib.sha256()
        total = 0
        while remaining:
            chunk = self.rfile.read(min(remaining, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            total += len(chunk)
            remaining -= len(chunk)
        self._seen(body_bytes=total, body_sha=digest.hexdigest())
        self._reply(digest.hexdigest().encode())

    do_PUT = do_POST


@dataclass
class Origin:
    """A loopback HTTP(S) server that logs every request and every connection it gets."""

    name: str
    blob: bytes = b""
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # path -> (body, content type)
    requests: list[Seen] = field(default_factory=list)
    connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: _Server | None = None
    tls: bool = False

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def start(self, cert: tuple[Path, Path] | None = None) -> Origin:
        self.server = _Server(self)
        if cert is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(cert[0]), str(cert[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.tls = True
        threading.Thread(target=self.server.serve_forever, name=f"origin-{self.name}", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def mark(self) -> tuple[int, int]:
        with self.lock:
            return len(self.requests), self.connections

    def since(self, mark: tuple[int, int]) -> tuple[list[Seen], int]:
        """Requests and connections received after `mark`."""
        with self.lock:
            return self.requests[mark[0] :], self.connections - mark[1]


class UdpCanary:
    """A host UDP socket on 127.0.0.1 that records every datagram."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.received.append(data)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class TcpCanary(Listener):
    """A host TCP listener that records connections and bytes (for raw-TCP tunnels)."""

    def __init__(self, greeting: bytes = b"SSH-2.0-canary\r\n") -> None:
        super().__init__(socket.AF_INET, ("127.0.0.1", 0), greeting)
        self.port = self.address[1]

    def stop(self) -> None:
        self.close()


# -- a tiny package index (PEP 503) ----------------------------------------------------------------


def tiny_wheel(name: str = "stockade_probe_pkg", version: str = "1.0") -> tuple[str, bytes]:
    """(file name, bytes) of a minimal pure-Python wheel."""
    import base64
    import io
    import zipfile

    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"VALUE = 'stockade probe'\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\nSummary: stockade e2e probe\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: stockade-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0)), data)
    return f"{name}-{version}-py3-none-any.whl", buffer.getvalue()


def simple_index(project: str, filename: str, data: bytes) -> dict[str, tuple[bytes, str]]:
    """The PEP 503 pages and the file, as `Origin.files`."""
    html = "text/html"
    digest = hashlib.sha256(data).hexdigest()
    root = f'<!DOCTYPE html><html><body><a href="/simple/{project}/">{project}</a></body></html>\n'.encode()
    page = f'<!DOCTYPE html><html><body><a href="/files/{filename}#sha256={digest}">{filename}</a></body></html>\n'.encode()
    return {
        "/simple/": (root, html),
        f"/simple/{project}/": (page, html),
        f"/files/{filename}": (data, "application/octet-stream"),
    }


# -- the world -------------------------------------------------------------------------------------


def make_box(root: Path) -> Box:
    """HOME with canaries, a project, a folder outside every rule (as tests/e2e/conftest.py makes them)."""
    home, project, outside = root / "home", root / "project", root / "outside"
    for folder in (home / ".ssh", home / ".aws", project, outside):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_test").write_text("CANARY-SSH\n")
    (home / ".aws" / "credentials").write_text("CANARY-AWS\n")
    (outside / "secret.txt").write_text("CANARY-O\n")
    env = {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    return Box(root=root, home=home, project=project, outside=outside, env=env)


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    """The final records (an allowed flow's start record, and a session's end line, are left out; tests of them read the file)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [record for record in lines if record.get("phase") != "start" and "event" not in record]


def wait_for(predicate: Callable[[], bool], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def state_dir(box: Box) -> Path:
    return box.home / ".local" / "state" / "stockade"


def runtime_dir(box: Box) -> Path:
    return state_dir(box) / "run"  # no XDG_RUNTIME_DIR in a box's environment


class NetWorld:
    """Origins, canaries, the resolver table and a HOME whose daemon is ours alone."""

    def __init__(self, scratch: Path, prefix: str = "n", idle: int = 60) -> None:
        self.scratch = scratch  # host-only files (resolver table, query log): under the test's /tmp
        self.root = visible_root(prefix)
        self.box = make_box(self.root)
        self.others: list[Box] = []  # boxes with HOMEs (and so daemons) of their own
        control = runtime_dir(self.box) / "proxy.sock"
        if len(str(control).encode()) > SUN_PATH_MAX:
            raise RuntimeError(
                f"the daemon's control socket path {control} is longer than AF_UNIX allows; set STOCKADE_E2E_VISIBLE_ROOT to a short folder"
            )
        self.blob = random.Random(7).randbytes(BIG)
        self.blob_sha = hashlib.sha256(self.blob).hexdigest()
        self.cert, self.key = make_certificate(self.root, NAMES)
        wheel_name, wheel = tiny_wheel()
        self.wheel_name, self.wheel_sha = wheel_name, hashlib.sha256(wheel).hexdigest()
        self.origins = {
            "http": Origin("allowed-http", self.blob).start(),
            "https": Origin("allowed-https", self.blob).start((self.cert, self.key)),
            "denied": Origin("denied-http", self.blob).start(),
            "denied_tls": Origin("denied-https", self.blob).start((self.cert, self.key)),
            "wild": Origin("wild-http", self.blob).start(),
            "pypi": Origin("pypi-https", files=simple_index("stockade-probe-pkg", wheel_name, wheel)).start((self.cert, self.key)),
        }
        self.canary = Origin("canary").start()  # a host service: never registered as a test upstream
        self.udp = UdpCanary()
        self.tcp = TcpCanary()  # a raw-TCP upstream (registered): only TLS or HTTP may tunnel to it
        self.resolver = scratch / "names.json"
        self.queries = scratch / "queries.txt"
        self.queries.touch()
        self.write_resolver()
        self.env = {"STOCKADE_PROXY_TEST_RESOLVER": str(self.resolver), "STOCKADE_PROXY_IDLE": str(idle)}

    def fresh_box(self) -> Box:
        """Another HOME, so another daemon: for tests that kill theirs or must start cold."""
        box = make_box(visible_root("f"))
        self.others.append(box)
        return box

    def write_resolver(self) -> None:
        names = {n: ["127.0.0.1"] for n in NAMES}
        names.update({
            "rebind.wild.test": ["127.0.0.1"], "meta.wild.test": ["169.254.169.254"], "priv.wild.test": ["10.0.0.5"],
            "xn--bcher-kva.test": ["127.0.0.1"],  # bücher.test, for IDN rules
            "localhost": ["127.0.0.1"],  # as the host resolves it (an allowed localhost:PORT, bwrap/parts/forwards.py)
        })  # fmt: skip
        upstreams = [f"127.0.0.1:{o.port}" for o in self.origins.values()] + [f"127.0.0.1:{self.tcp.port}"]
        self.resolver.write_text(json.dumps({"names": names, "upstreams": upstreams, "log": str(self.queries)}))

    # -- policies and runs ---------------------------------------------------------------------------

    def audit_path(self, tag: str, box: Box | None = None) -> Path:
        return state_dir(box or self.box) / f"audit-{tag}.jsonl"

    def policy(
        self,
        tag: str,
        *,
        allow: Sequence[str] = ALLOW,
        deny: Sequence[str] = DENY,
        extends: str = "default",
        mode: str | None = None,
        network: bool = True,
        audit: bool = True,
        box: Box | None = None,
    ) -> str:
        """A policy file's text; its audit log is the run's own (`audit_path(tag)`) unless `audit` is False."""
        lines = [f'extends = ["{extends}"]']
        if network:
            lines.append("[network]")
            if mode is not None:
                lines.append(f'mode = "{mode}"')
            lines.append(f"allow = {json.dumps(list(allow), ensure_ascii=False)}")
            lines.append(f"deny = {json.dumps(list(deny), ensure_ascii=False)}")
        if audit:
            lines += ["[audit]", f"log = {json.dumps(str(self.audit_path(tag, box)))}"]
        return "\n".join(lines) + "\n"

    def prelude(self, box: Box | None = None) -> str:
        """Shell variables every script may use: ports, the certificate, the proxy URL, and a timer `t`."""
        box = box or self.box
        o = self.origins
        values = {
            "HP": o["http"].port, "SP": o["https"].port, "DP": o["denied"].port, "DSP": o["denied_tls"].port,
            "WP": o["wild"].port, "PP": o["pypi"].port, "CANARY_PORT": self.canary.port, "UDP_PORT": self.udp.port,
            "TCP_PORT": self.tcp.port, "DAEMON_PORT": self.daemon_port(box) or 0, "CA": self.cert, "PY": PY,
            "PX": f"http://127.0.0.1:{PROXY_PORT}", "H": box.home, "P": box.project,
        }  # fmt: skip
        text = "".join(f"{k}={q(str(v))}\n" for k, v in values.items())
        # t NAME CMD...: runs CMD quietly and prints "T NAME <exit code> <milliseconds>"
        return (
            text
            + 't() { _n=$1; shift; _s=$(date +%s%N); "$@" >/dev/null 2>&1; _r=$?; _e=$(date +%s%N); echo "T $_n $_r $(( (_e - _s) / 1000000 ))"; }\n'
        )

    def run(
        self,
        script: str,
        *,
        tag: str,
        policy: str | None = None,
        box: Box | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[str]:
        """`stockade run --policy <policy> -- sh -c <prelude + script>` in a box (this world's by default)."""
        box = box or self.box
        text = policy if policy is not None else self.policy(tag, box=box)
        return box.run(self.prelude(box) + script, policy=text, env={**self.env, **(env or {})}, timeout=timeout, **kwargs)

    def popen(
        self,
        script: str,
        *,
        tag: str,
        policy: str | None = None,
        box: Box | None = None,
        env: dict[str, str] | None = None,
        options: tuple[str, ...] = (),
    ) -> subprocess.Popen[str]:
        """The same as `run`, started in the background (stdout and stderr are pipes); `options` go to `run`."""
        box = box or self.box
        text = policy if policy is not None else self.policy(tag, box=box)
        path = box.root / f"policy-{tag}.toml"
        path.write_text(text)
        words = [sys.executable, "-m", "stockade.cli.main", "run", *options, "--policy", str(path), "--", "/bin/sh", "-c", self.prelude(box) + script]
        return subprocess.Popen(words, cwd=box.project, env={**box.env, **self.env, **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip

    def stockade(self, *args: str, box: Box | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Another stockade command (audit, ...) as this world's user, from the box's project."""
        box = box or self.box
        return subprocess.run([sys.executable, "-m", "stockade.cli.main", *args], cwd=box.project,
                              env={**box.env, **self.env, "COLUMNS": "1000"}, capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def records(self, tag: str, count: int | None = None, *, box: Box | None = None, timeout: float = 10) -> list[dict[str, Any]]:
        """The run's audit records (waiting until at least `count` are there, when given)."""
        path = self.audit_path(tag, box)
        if count is not None:
            wait_for(lambda: len(records(path)) >= count, timeout)
        return records(path)

    # -- the resolver's query log ----------------------------------------------------------------------

    def queried(self) -> list[str]:
        return [json.loads(line) for line in self.queries.read_text().splitlines() if line.strip()]

    # -- the daemon ------------------------------------------------------------------------------------

    def daemon_info(self, box: Box | None = None) -> dict[str, int] | None:
        try:
            return json.loads((runtime_dir(box or self.box) / "proxy.port").read_text())
        except (OSError, ValueError):
            return None

    def daemon_port(self, box: Box | None = None) -> int | None:
        info = self.daemon_info(box)
        return int(info["port"]) if info else None

    def daemon_pid(self, box: Box | None = None) -> int | None:
        info = self.daemon_info(box)
        return int(info["pid"]) if info else None

    def ping(self, box: Box | None = None) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(5)
            conn.connect(str(runtime_dir(box or self.box) / "proxy.sock"))
            conn.sendall(b'{"op":"ping"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        return json.loads(data)

    def kill_daemon(self, box: Box | None = None, signum: int = signal.SIGTERM, wait: float = 10) -> bool:
        """Signal the daemon recorded in the box's port file and wait for it to go; True if it did."""
        pid = self.daemon_pid(box)
        if pid is None:
            return True
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return True
        if wait_for(lambda: not pid_alive(pid), wait):
            return True
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return wait_for(lambda: not pid_alive(pid), 5)

    def close(self) -> None:
        for box in (self.box, *self.others):
            self.kill_daemon(box)
        for origin in (*self.origins.values(), self.canary):
            origin.stop()
        self.udp.stop()
        self.tcp.stop()
        for box in (self.box, *self.others):
            force_rmtree(box.root)


# -- inside the sandbox ------------------------------------------------------------------------------


def probe_lines(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """Every `PROBE <json object>` line of a run's stdout, merged."""
    found: dict[str, Any] = {}
    for line in result.stdout.splitlines():
        if line.startswith("PROBE "):
            found.update(json.loads(line[len("PROBE ") :]))
    if not found:
        raise AssertionError(f"no PROBE line (exit {result.returncode}): stdout={result.stdout!r} stderr={result.stderr!r}")
    return found


def tagged(result: subprocess.CompletedProcess[str], tag: str) -> list[str]:
    """The values of every `<tag>=...` line of a run's stdout."""
    prefix = f"{tag}="
    return [line[len(prefix) :] for line in result.stdout.splitlines() if line.startswith(prefix)]


def one(result: subprocess.CompletedProcess[str], tag: str) -> str:
    values = tagged(result, tag)
    assert len(values) == 1, (tag, result.stdout, result.stderr)
    return values[0]


# A python probe run inside: each attempt timed, outcome as "ok ..." or "errno NAME".
TIMED_PROBE = r"""
import errno, json, socket, time
def attempt(name, fn):
    start = time.monotonic()
    try:
        outcome = "ok " + str(fn())
    except OSError as exc:
        outcome = "errno " + (errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else type(exc).__name__)
    except Exception as exc:
        outcome = "error " + type(exc).__name__
    RESULTS[name] = [outcome, round(time.monotonic() - start, 3)]
RESULTS = {}
"""


def timed_probe(body: str) -> str:
    """Python source: TIMED_PROBE's helpers, `body` (calls to attempt), then one PROBE line."""
    return TIMED_PROBE + body + '\nprint("PROBE " + json.dumps(RESULTS), flush=True)\n'
