"""The real daemon, end to end: curl through it to loopback HTTP and HTTPS origins.

Names reach the origins through the daemon's test resolver; no test needs
the internet. Each origin logs what it receives, so "the denied origin saw
nothing" is checked, not assumed.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.client import HTTPConnection, IncompleteRead
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stockade.core.locations import Locations
from stockade.proxy.client import api, launch, sessionclient
from stockade.proxy.control import SessionSpec
from tests.netkit import make_certificate

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]

BIG = 64 << 20
NAMES = ("allowed.test", "denied.test", "a.wild.test", "blocked.wild.test")


# -- origins -------------------------------------------------------------------


@dataclass
class Origin:
    name: str
    server: http.server.ThreadingHTTPServer
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Host)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


def _blob() -> bytes:
    return random.Random(7).randbytes(BIG)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self) -> None:
        self.server.origin.requests.append((self.command, self.path, self.headers.get("Host", "")))

    def _reply(self, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        view = memoryview(body)
        for start in range(0, len(view), 1 << 20):
            self.wfile.write(view[start : start + (1 << 20)])

    def _lie(self, claimed: int, sent: bytes) -> None:
        """A Content-Length that is not what follows, then hang up."""
        self.send_response(200)
        self.send_header("Content-Length", str(claimed))
        self.end_headers()
        self.wfile.write(sent)
        self.wfile.flush()
        self.close_connection = True

    def _chunked(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for start in range(0, len(body), 1 << 20):
            piece = body[start : start + (1 << 20)]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self) -> None:
        self._record()
        blob = self.server.blob
        if self.path == "/blob":
            self._reply(blob)
        elif self.path == "/short":  # half the body it announces
            self._lie(len(blob), blob[: len(blob) // 2])
        elif self.path == "/long":  # more than it announces: a second response smuggled behind the body
            self._lie(len(blob) // 2, blob[: len(blob) // 2] + b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nSMUGGLED!")
        elif self.path == "/chunked":
            self._chunked(blob)
        else:
            self._reply(f"hello from {self.server.origin.name} {self.path}\n".encode())
        if self.path.endswith("/drop"):
            self.close_connection = True  # hang up after answering, without saying so in a header

    def do_HEAD(self) -> None:
        self._record()
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.server.blob)))
        self.end_headers()

    def do_POST(self) -> None:
        self._record()
        remaining = int(self.headers.get("Content-Length", "0"))
        digest = hashlib.sha256()
        while remaining:
            chunk = self.rfile.read(min(remaining, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
        self._reply(digest.hexdigest().encode())


def start_origin(name: str, blob: bytes, tls: tuple[Path, Path] | None = None) -> Origin:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    origin = Origin(name, server)
    server.origin = origin  # type: ignore[attr-defined]
    server.blob = blob  # type: ignore[attr-defined]
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return origin


# -- the daemon under test -----------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, daemon_tools: SimpleNamespace) -> Iterator[SimpleNamespace]:
    root = tmp_path_factory.mktemp("proxyworld")
    blob = _blob()
    cert, key = make_certificate(root, NAMES)
    origins = {
        "http": start_origin("allowed-http", blob),
        "https": start_origin("allowed-https", blob, (cert, key)),
        "denied": start_origin("denied-http", blob),
        "denied_tls": start_origin("denied-https", blob, (cert, key)),
        "canary": start_origin("canary", blob),  # a host service the sandbox must never reach
    }
    resolver = root / "names.json"
    queries = root / "queries.txt"
    resolver.write_text(
        json.dumps(
            {
                "names": {
                    "allowed.test": ["127.0.0.1"],
                    "denied.test": ["127.0.0.1"],
                    "a.wild.test": ["127.0.0.1"],
                    "blocked.wild.test": ["127.0.0.1"],
                    "rebind.wild.test": ["127.0.0.1"],
                    "meta.wild.test": ["169.254.169.254"],
                },
                # every origin but the canary is a registered test upstream
                "upstreams": [f"127.0.0.1:{o.port}" for k, o in origins.items() if k != "canary"],
                "log": str(queries),
            }
        )
    )
    locations = daemon_tools.make_locations(root / "home")
    # A daemon slow to answer (a loaded CI machine) is replaced by the next registration (launch.HUNG_AFTER);
    # the replacement must answer from the same table, not from real DNS.
    saved_env = {name: os.environ.get(name) for name in (launch.TEST_RESOLVER_ENV, launch.IDLE_ENV)}
    os.environ[launch.TEST_RESOLVER_ENV], os.environ[launch.IDLE_ENV] = str(resolver), "600"
    started = time.monotonic()
    port = api.ensure_daemon(locations, test_resolver=str(resolver), idle_timeout=600)
    start_seconds = time.monotonic() - started
    yield SimpleNamespace(
        root=root,
        blob=blob,
        blob_sha=hashlib.sha256(blob).hexdigest(),
        cert=cert,
        origins=origins,
        port=port,
        locations=locations,
        queries=queries,
        start_seconds=start_seconds,
    )
    daemon_tools.stop_daemon(locations)
    for name, value in saved_env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for origin in origins.values():
        origin.server.shutdown()
        origin.server.server_close()


@pytest.fixture
def session(world: SimpleNamespace, tmp_path: Path) -> Iterator[Callable[..., SimpleNamespace]]:
    """Register sessions for one test; ends them afterwards."""
    opened: list[str] = []

    def open_session(
        allow: tuple[str, ...] = ("allowed.test", "*.wild.test"), deny: tuple[str, ...] = ("blocked.wild.test",), mode: str = "allowlist"
    ) -> SimpleNamespace:
        spec = SessionSpec(
            session_id=f"{tmp_path.name}-{len(opened)}",
            command=["curl", "-x", "..."],
            cwd=str(tmp_path),
            allow=allow,
            deny=deny,
            audit_path=str(tmp_path / f"audit-{len(opened)}.jsonl"),
            origin=str(tmp_path / ".stockade.toml"),
            mode=mode,
        )
        ticket = api.register_session(world.locations, spec)
        opened.append(spec.session_id)
        return SimpleNamespace(ticket=ticket, spec=spec, audit=Path(spec.audit_path), proxy=f"http://stockade:{ticket.token}@127.0.0.1:{ticket.port}")

    yield open_session
    for session_id in opened:
        try:
            api.end_session(world.locations, session_id)
        except OSError:
            pass


def curl(*args: str, proxy: str | None, timeout: float = 120) -> tuple[str, bytes, str]:
    """(status code, body, stderr) of a curl call through `proxy`."""
    argv = ["curl", "-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}"]
    if proxy is not None:
        argv += ["-x", proxy]
    done = subprocess.run(argv + list(args), capture_output=True, timeout=timeout)
    body, _, code = done.stdout.rpartition(b"\n")
    return code.decode(), body, done.stderr.decode(errors="replace")


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


def raw_proxy(world: SimpleNamespace, request: bytes) -> bytes:
    """Send bytes to the daemon as they are and return everything it answers."""
    with socket.create_connection(("127.0.0.1", world.port), timeout=10) as conn:
        conn.sendall(request)  # no half-close: mitmproxy reads that as the client leaving
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def credential(token: str) -> str:
    return "Basic " + base64.b64encode(f"stockade:{token}".encode()).decode()


# -- tests -------------------------------------------------------------------------


def test_daemon_started_quickly_and_privately(world: SimpleNamespace) -> None:
    assert world.start_seconds < 15
    runtime = world.locations.runtime
    assert os.stat(runtime).st_mode & 0o777 == 0o700
    assert os.stat(runtime / "proxy.sock").st_mode & 0o777 == 0o600
    recorded = json.loads((runtime / "proxy.port").read_text())
    assert recorded["port"] == world.port
    assert api.ensure_daemon(world.locations) == world.port  # warm: the same daemon


def test_allowed_http(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    port = world.origins["http"].port
    code, body, _ = curl(f"http://allowed.test:{port}/hello?token=s3cret&x=1", proxy=s.proxy)
    assert code == "200" and body == b"hello from allowed-http /hello?token=s3cret&x=1\n"
    assert world.origins["http"].requests[-1][2] == f"allowed.test:{port}"
    assert wait_for(lambda: len(records(s.audit)) == 1)
    (record,) = records(s.audit)
    assert record["decision"] == "allow" and record["host"] == "allowed.test" and record["port"] == port
    assert record["method"] == "GET" and record["path"] == "/hello?token=REDACTED&x=1"
    assert record["scheme"] == "http" and record["address"] == "127.0.0.1"
    assert record["session"] == s.spec.session_id and record["command"] == s.spec.command
    assert record["bytes_down"] > 40 and record["bytes_up"] > 20
    assert "s3cret" not in s.audit.read_text()


def ping(world: SimpleNamespace) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(world.locations.runtime / "proxy.sock"))
        conn.sendall(b'{"op":"ping"}\n')
        return json.loads(conn.recv(65536))


def test_allowed_https_passes_untouched(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    spliced_before = ping(world)["spliced"]
    port = world.origins["https"].port
    # --cacert trusts the origin's own certificate only: a proxy that intercepted TLS would fail here.
    code, body, err = curl("--cacert", str(world.cert), f"https://allowed.test:{port}/tls", proxy=s.proxy)
    assert code == "200", err
    assert body == b"hello from allowed-https /tls\n"
    assert wait_for(lambda: len(records(s.audit)) == 1)
    (record,) = records(s.audit)
    assert (record["decision"], record["scheme"], record["sni"], record["method"]) == ("allow", "tls", "allowed.test", "CONNECT")
    assert record["path"] is None and record["address"] == "127.0.0.1"
    assert record["bytes_up"] > 300 and record["bytes_down"] > 300
    assert ping(world)["spliced"] == spliced_before + 1  # the fast path carried it


def test_wildcard_and_spelling(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    port = world.origins["http"].port
    assert curl(f"http://A.Wild.TEST.:{port}/", proxy=s.proxy)[0] == "200"
    assert curl(f"http://BLOCKED.wild.test.:{port}/", proxy=s.proxy)[0] == "403"
    assert wait_for(lambda: len(records(s.audit)) == 2)
    assert [r["host"] for r in records(s.audit)] == ["a.wild.test", "blocked.wild.test"]


def test_denied_gets_403_with_the_fix_and_the_origin_sees_nothing(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    denied = world.origins["denied"]
    code, body, _ = curl(f"http://denied.test:{denied.port}/", proxy=s.proxy)
    assert code == "403"
    text = body.decode()
    assert text.count("\n") == 1
    assert f"blocked denied.test:{denied.port}" in text
    assert "going around the proxy will not work" in text
    assert f"to allow it, run: stockade allow denied.test --policy {s.spec.origin}" in text
    tls_code, _, _ = curl("--cacert", str(world.cert), f"https://denied.test:{world.origins['denied_tls'].port}/", proxy=s.proxy)
    assert tls_code in ("000", "403")  # curl reports a refused CONNECT as 000 (with the 403 in stderr)
    assert denied.requests == [] and world.origins["denied_tls"].requests == []
    assert wait_for(lambda: len(records(s.audit)) == 2)
    first, second = records(s.audit)
    assert (first["decision"], first["rule"], first["hint"]) == ("deny", "no allow rule matches", 'allow = ["denied.test"]')
    assert (second["method"], second["decision"]) == ("CONNECT", "deny")


def test_no_credential_is_407(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    session()
    origin = world.origins["http"]
    before = len(origin.requests)
    code, _, _ = curl(f"http://allowed.test:{origin.port}/", proxy=f"http://127.0.0.1:{world.port}")
    assert code == "407"
    code, _, _ = curl(f"http://allowed.test:{origin.port}/", proxy=f"http://stockade:not-a-token@127.0.0.1:{world.port}")
    assert code == "407"
    https_code, _, err = curl(
        "--cacert", str(world.cert), f"https://allowed.test:{world.origins['https'].port}/", proxy=f"http://127.0.0.1:{world.port}"
    )
    assert https_code in ("000", "407") and "407" in err
    assert len(origin.requests) == before


def test_credentials_are_bound_to_their_session(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    a = session(allow=("allowed.test",), deny=())
    b = session(allow=("a.wild.test",), deny=())
    port = world.origins["http"].port
    assert curl(f"http://a.wild.test:{port}/", proxy=a.proxy)[0] == "403"
    assert curl(f"http://a.wild.test:{port}/", proxy=b.proxy)[0] == "200"
    assert curl(f"http://allowed.test:{port}/", proxy=b.proxy)[0] == "403"
    assert wait_for(lambda: len(records(a.audit)) == 1 and len(records(b.audit)) == 2)


def test_sandbox_credential_next_to_the_relay_one_is_refused(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    a = session()
    port = world.origins["http"].port
    request = (
        f"GET http://allowed.test:{port}/ HTTP/1.1\r\n"
        f"Proxy-Authorization: {credential(a.ticket.token)}\r\n"  # what the relay inserts
        f"Host: allowed.test:{port}\r\nProxy-Authorization: {credential('forged')}\r\nConnection: close\r\n\r\n"
    ).encode()
    assert raw_proxy(world, request).startswith(b"HTTP/1.1 403")


# -- a session's door: the sandbox's listener served by the daemon itself ------------------------


def door(s: SimpleNamespace) -> tuple[str, int]:
    """Hand the daemon a fresh listener as `s`'s door, as `stockade run` does; our copy closes (the daemon holds the only one)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        api.attach_listener(s.spec.session_id, listener)
        return f"http://127.0.0.1:{listener.getsockname()[1]}", listener.getsockname()[1]


def raw_door(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def test_door_connections_are_their_session_s_without_any_credential(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session(allow=("allowed.test",), deny=())
    proxy, _ = door(s)
    http, denied = world.origins["http"], world.origins["denied"]
    spliced_before = ping(world)["spliced"]
    assert curl(f"http://allowed.test:{http.port}/door", proxy=proxy)[:2] == ("200", b"hello from allowed-http /door\n")
    code, body, err = curl("--cacert", str(world.cert), f"https://allowed.test:{world.origins['https'].port}/door", proxy=proxy)
    assert (code, body) == ("200", b"hello from allowed-https /door\n"), err
    assert curl(f"http://denied.test:{denied.port}/door", proxy=proxy)[0] == "403"
    assert curl(f"http://a.wild.test:{http.port}/door", proxy=proxy)[0] == "403"  # another session's host
    assert denied.requests == [] and ping(world)["spliced"] == spliced_before + 1
    assert wait_for(lambda: len(records(s.audit)) == 4)
    # In any order: a spliced tunnel's record is written when its connection is torn down, which may
    # come after the next request's denial.
    assert sorted((r["session"], r["decision"]) for r in records(s.audit)) == [(s.spec.session_id, d) for d in ("allow", "allow", "deny", "deny")]


def test_door_refuses_a_credential_sent_from_inside(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    _, port = door(s)
    target = f"allowed.test:{world.origins['http'].port}"
    plain = f"GET http://{target}/inside HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n"
    # Even the session's own valid credential: on a door, a Proxy-Authorization header can only come from the sandbox.
    for value in (credential(s.ticket.token), credential("forged")):
        assert raw_door(port, f"{plain}Proxy-Authorization: {value}\r\n\r\n".encode()).startswith(b"HTTP/1.1 403")
    assert raw_door(port, f"{plain}\r\n".encode()).startswith(b"HTTP/1.1 200")  # the control
    assert [p for _, p, _ in world.origins["http"].requests].count("/inside") == 1
    assert wait_for(lambda: len(records(s.audit)) == 3)
    assert [r["rule"] for r in records(s.audit)][:2] == ["a Proxy-Authorization header from inside the sandbox"] * 2


def test_door_is_refused_to_any_connection_but_the_registering_one(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    with socket.create_server(("127.0.0.1", 0)) as listener, socket.socket(socket.AF_UNIX) as other:
        other.connect(str(world.locations.runtime / "proxy.sock"))
        socket.send_fds(other, [json.dumps({"op": "listen", "session_id": s.spec.session_id}).encode() + b"\n"], [listener.fileno()])
        reply = json.loads(other.recv(65536))
        assert reply["ok"] is False and "not registered on this connection" in reply["error"]
        api.attach_listener(s.spec.session_id, listener)  # the control: the registering connection may
        with pytest.raises(api.ProxyDaemonError, match="already has its listener"):
            api.attach_listener(s.spec.session_id, listener)


def test_door_closes_with_its_session(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    proxy, port = door(s)
    url = f"http://allowed.test:{world.origins['http'].port}/before-end"
    assert curl(url, proxy=proxy)[0] == "200"
    api.end_session(world.locations, s.spec.session_id)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_door_answers_what_is_not_http_at_once(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    _, port = door(s)
    for first in (b"\x05\x01\x00", b"\x04\x01\x00\x50\x7f\x00\x00\x01x\x00", b"\x16\x03\x01\x02\x00\x01"):  # SOCKS5, SOCKS4, TLS
        started = time.monotonic()
        reply = raw_door(port, first)
        assert reply.startswith(b"HTTP/1.1 400") and b"only HTTP proxy requests" in reply, reply
        assert time.monotonic() - started < 2
    assert raw_door(port, f"GET http://allowed.test:{world.origins['http'].port}/ HTTP/1.1\r\nConnection: close\r\n\r\n".encode()).startswith(
        b"HTTP/1.1 200"
    )


def test_kept_alive_requests_are_each_judged(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    """Each request on one client connection is decided and audited; an upstream is looked up when it is dialed."""
    s = session()
    _, port = door(s)
    http_port = world.origins["http"].port
    names = world.root / "names.json"
    saved = names.read_text()
    table = json.loads(saved)

    def point(address: str) -> None:
        table["names"]["flip.wild.test"] = [address]
        names.write_text(json.dumps(table))

    conn = HTTPConnection("127.0.0.1", port, timeout=30)

    def get(host: str, path: str) -> int:
        conn.request("GET", f"http://{host}:{http_port}{path}", headers={"Host": f"{host}:{http_port}"})
        response = conn.getresponse()
        response.read()
        return response.status

    try:
        point("127.0.0.1")
        assert get("flip.wild.test", "/ka1") == 200
        point("169.254.169.254")  # the name now points inside; the open upstream was checked when dialed
        assert get("flip.wild.test", "/ka2/drop") == 200  # ...and carries this one, then the origin hangs up
        assert get("blocked.wild.test", "/ka3") == 403  # another host on the same connection: judged by the rules
        assert get("meta.wild.test", "/ka4") == 403  # an allowed name with an inside address: looked up, refused
        time.sleep(1)  # the origin's hang-up reaches the daemon
        assert get("flip.wild.test", "/ka5") == 403  # a new upstream: looked up again, inside now, refused
        point("127.0.0.1")
        assert get("flip.wild.test", "/ka6") == 200  # the control: the same connection still works
    finally:
        names.write_text(saved)
        conn.close()
    paths = [p for _, p, _ in world.origins["http"].requests if p.startswith("/ka")]
    assert paths == ["/ka1", "/ka2/drop", "/ka6"]
    assert wait_for(lambda: len(records(s.audit)) == 6)
    found = records(s.audit)
    assert [r["decision"] for r in found] == ["allow", "allow", "deny", "deny", "deny", "allow"]
    assert [r["address"] for r in found if r["decision"] == "allow"] == ["127.0.0.1"] * 3
    assert found[2]["rule"] == 'deny "blocked.wild.test"'
    assert [r["rule"] for r in found[3:5]] == [f"{h}.wild.test resolves to 169.254.169.254 (cloud metadata)" for h in ("meta", "flip")]


def test_host_header_must_match_the_target(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    allowed, denied = world.origins["http"], world.origins["denied"]
    auth = f"Proxy-Authorization: {credential(s.ticket.token)}\r\n"
    mismatch = f"GET http://allowed.test:{allowed.port}/ HTTP/1.1\r\n{auth}Host: denied.test:{denied.port}\r\nConnection: close\r\n\r\n"
    assert raw_proxy(world, mismatch.encode()).startswith(b"HTTP/1.1 403")
    origin_form = f"GET / HTTP/1.1\r\n{auth}Host: denied.test:{denied.port}\r\nConnection: close\r\n\r\n"
    assert raw_proxy(world, origin_form.encode()).startswith(b"HTTP/1.1 403")
    userinfo = f"GET http://allowed.test@denied.test:{denied.port}/ HTTP/1.1\r\n{auth}Host: denied.test:{denied.port}\r\nConnection: close\r\n\r\n"
    assert raw_proxy(world, userinfo.encode())[:12] in (b"HTTP/1.1 400", b"HTTP/1.1 403")  # mitmproxy refuses userinfo
    code, body, _ = curl(f"http://allowed.test@denied.test:{denied.port}/", proxy=s.proxy)  # curl drops it
    assert code == "403" and b"blocked denied.test" in body
    assert denied.requests == []


def _tls_through(world: SimpleNamespace, token: str, connect: str, port: int, sni: str | None) -> str:
    """CONNECT, then a TLS handshake with `sni`; returns "ok" or the failure."""
    with socket.create_connection(("127.0.0.1", world.port), timeout=10) as conn:
        conn.sendall(f"CONNECT {connect}:{port} HTTP/1.1\r\nHost: {connect}:{port}\r\nProxy-Authorization: {credential(token)}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(1024)
        if not head.startswith(b"HTTP/1.1 200"):
            return head.split(b"\r\n")[0].decode()
        context = ssl.create_default_context(cafile=str(world.cert))
        context.check_hostname = False
        try:
            with context.wrap_socket(conn, server_hostname=sni) as tls:
                tls.sendall(f"GET /sni HTTP/1.1\r\nHost: {connect}\r\nConnection: close\r\n\r\n".encode())
                return "ok" if tls.recv(12).startswith(b"HTTP/1.1 200") else "bad reply"
        except (ssl.SSLError, OSError) as exc:
            return f"failed: {exc}"


def test_tls_sni_must_match_the_connect_host(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    origin = world.origins["https"]
    before = len(origin.requests)
    assert _tls_through(world, s.ticket.token, "allowed.test", origin.port, "denied.test").startswith("failed")
    assert _tls_through(world, s.ticket.token, "allowed.test", origin.port, None).startswith("failed")
    assert len(origin.requests) == before  # the killed tunnels never reached the origin
    assert _tls_through(world, s.ticket.token, "allowed.test", origin.port, "allowed.test") == "ok"
    assert wait_for(lambda: len(records(s.audit)) == 3)
    fronted, bare, good = records(s.audit)
    assert fronted["decision"] == "deny" and "TLS SNI denied.test does not match" in fronted["rule"]
    assert bare["decision"] == "deny" and "without SNI" in bare["rule"]
    assert good["decision"] == "allow" and good["sni"] == "allowed.test"


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://127.0.0.1:{http}/", id="http v4"),
        pytest.param("https://127.0.0.1:{https}/", id="https v4"),
        pytest.param("http://2130706433:{http}/", id="decimal v4"),
        pytest.param("http://[::ffff:127.0.0.1]:{http}/", id="mapped v6"),
        pytest.param("http://localhost:{canary}/", id="localhost name"),
        pytest.param("http://rebind.wild.test:{canary}/", id="allowed name resolving to loopback"),
        pytest.param("http://meta.wild.test/latest/meta-data/", id="allowed name resolving to metadata"),
    ],
)
def test_inside_addresses_are_refused(world: SimpleNamespace, session: Callable[..., SimpleNamespace], url: str) -> None:
    s = session()
    ports = {k: o.port for k, o in world.origins.items()}
    code, body, err = curl("--cacert", str(world.cert), url.format(**ports), proxy=s.proxy)
    assert code in ("403", "000"), (code, body, err)
    assert world.origins["canary"].requests == []
    assert wait_for(lambda: len(records(s.audit)) == 1)
    assert records(s.audit)[0]["decision"] == "deny"


def test_denied_names_are_never_resolved(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    for host in ("d1.exfil.denied.test", "blocked.wild.test", "x.exfil.test"):
        curl(f"http://{host}/", proxy=s.proxy)
        curl("--cacert", str(world.cert), f"https://{host}/", proxy=s.proxy)
    asked = world.queries.read_text() if world.queries.exists() else ""
    assert "exfil" not in asked and "blocked.wild.test" not in asked


def test_plain_http_through_a_tunnel(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    origin = world.origins["http"]
    code, body, _ = curl("--proxytunnel", f"http://allowed.test:{origin.port}/tunnelled", proxy=s.proxy)
    assert code == "200" and body == b"hello from allowed-http /tunnelled\n"
    code, _, _ = curl("--proxytunnel", "-H", "Host: denied.test", f"http://allowed.test:{origin.port}/fronted", proxy=s.proxy)
    assert code == "403"
    assert all(path != "/fronted" for _, path, _ in origin.requests)


def test_names_cannot_inject_audit_records(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    auth = f"Proxy-Authorization: {credential(s.ticket.token)}\r\n"
    for host in ("a\x1b]52;c;aGk=\x07.test", 'a%0a{"decision":"allow"}.test', "[red]x[/red].test"):
        raw_proxy(world, f"CONNECT {host}:443 HTTP/1.1\r\n{auth}\r\n".encode("latin-1"))
        raw_proxy(world, f"GET http://{host}/ HTTP/1.1\r\n{auth}Host: {host}\r\nConnection: close\r\n\r\n".encode("latin-1"))
    text = s.audit.read_text() if s.audit.exists() else ""
    assert all(ord(c) >= 0x20 for line in text.splitlines() for c in line)
    assert all(r["decision"] == "deny" for r in records(s.audit))


def test_ipv6_literals_are_refused(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    port = world.origins["http"].port
    assert curl(f"http://[::1]:{port}/", proxy=s.proxy)[0] == "403"
    assert curl("--cacert", str(world.cert), f"https://[2001:db8::1]:{port}/", proxy=s.proxy)[0] in ("000", "403")
    assert wait_for(lambda: len(records(s.audit)) == 2)
    assert [r["rule"] for r in records(s.audit)] == ["IP literal not listed"] * 2


def test_raw_tcp_through_a_tunnel_is_killed(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    origin = world.origins["http"]
    before = len(origin.requests)
    with socket.create_connection(("127.0.0.1", world.port), timeout=10) as conn:
        conn.sendall(f"CONNECT allowed.test:{origin.port} HTTP/1.1\r\nProxy-Authorization: {credential(s.ticket.token)}\r\n\r\n".encode())
        assert conn.recv(1024).startswith(b"HTTP/1.1 200")
        conn.sendall(b"SSH-2.0-OpenSSH_9.0\r\n")
        assert conn.recv(1024) == b""  # closed, nothing relayed
    assert len(origin.requests) == before
    assert wait_for(lambda: len(records(s.audit)) == 1)
    (record,) = records(s.audit)
    assert record["decision"] == "deny" and record["scheme"] == "tcp"


def test_keep_alive_connection_is_reused(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    port = world.origins["http"].port
    urls = [f"http://allowed.test:{port}/r{i}" for i in range(12)]
    argv = ["curl", "-sS", "--max-time", "30", "-x", s.proxy, "-w", "%{http_code} %{num_connects}\n"]
    for url in urls:
        argv += ["-o", "/dev/null", url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.split()
    assert out[0::2] == ["200"] * 12
    assert sum(int(n) for n in out[1::2]) == 1  # one proxy connection for all twelve


def test_big_bodies_stream_byte_identical(world: SimpleNamespace, session: Callable[..., SimpleNamespace], tmp_path: Path) -> None:
    s = session()
    upload = tmp_path / "upload.bin"
    upload.write_bytes(world.blob)
    for scheme, origin in (("http", world.origins["http"]), ("https", world.origins["https"])):
        url = f"{scheme}://allowed.test:{origin.port}"
        out = tmp_path / f"down-{scheme}.bin"
        done = subprocess.run(
            ["curl", "-sS", "--max-time", "120", "--cacert", str(world.cert), "-x", s.proxy, "-o", str(out), f"{url}/blob"],
            capture_output=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert hashlib.sha256(out.read_bytes()).hexdigest() == world.blob_sha
        code, body, err = curl("--cacert", str(world.cert), "--data-binary", f"@{upload}", f"{url}/upload", proxy=s.proxy)
        assert code == "200", err
        assert body.decode() == world.blob_sha
    assert wait_for(lambda: len(records(s.audit)) == 4)
    down_http, up_http, down_tls, up_tls = records(s.audit)
    assert down_http["bytes_down"] >= BIG and up_http["bytes_up"] >= BIG
    assert down_tls["bytes_down"] >= BIG and up_tls["bytes_up"] >= BIG


def bodies(world: SimpleNamespace) -> int:
    """Plain-HTTP bodies the daemon has spliced whole since it started."""
    return int(ping(world)["bodies"])


def test_plain_http_bodies_are_spliced_byte_identical_and_the_connection_is_judged_after(
    world: SimpleNamespace, session: Callable[..., SimpleNamespace]
) -> None:
    s = session()
    _, port = door(s)
    http_port, denied = world.origins["http"].port, world.origins["denied"]
    before = bodies(world)
    conn = HTTPConnection("127.0.0.1", port, timeout=60)

    def get(host: str, path: str, target_port: int = http_port) -> tuple[int, bytes]:
        conn.request("GET", f"http://{host}:{target_port}{path}", headers={"Host": f"{host}:{target_port}"})
        response = conn.getresponse()
        return response.status, response.read()

    status, body = get("allowed.test", "/blob")
    assert status == 200 and hashlib.sha256(body).hexdigest() == world.blob_sha
    assert wait_for(lambda: bodies(world) == before + 1)  # the fast path carried it
    # The same connection, after a spliced body: mitmproxy parses the next request and the filter judges it.
    assert get("denied.test", "/after-splice", denied.port)[0] == 403
    assert get("allowed.test", "/after-splice") == (200, b"hello from allowed-http /after-splice\n")
    status, body = get("allowed.test", "/blob")  # and a second big body on it
    assert status == 200 and hashlib.sha256(body).hexdigest() == world.blob_sha
    conn.close()
    assert denied.requests == [] and wait_for(lambda: bodies(world) == before + 2)
    assert wait_for(lambda: len(records(s.audit)) == 4)
    found = records(s.audit)
    assert [(r["path"], r["decision"]) for r in found] == [
        ("/blob", "allow"),
        ("/after-splice", "deny"),
        ("/after-splice", "allow"),
        ("/blob", "allow"),
    ]
    assert found[0]["bytes_down"] >= BIG and found[3]["bytes_down"] >= BIG and found[0]["error"] is None


def test_a_body_shorter_than_announced_fails_like_mitmproxy_would(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    _, port = door(s)
    http_port = world.origins["http"].port
    conn = HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", f"http://allowed.test:{http_port}/short", headers={"Host": f"allowed.test:{http_port}"})
    response = conn.getresponse()
    with pytest.raises(IncompleteRead) as cut:
        response.read()
    assert cut.value.partial == world.blob[: BIG // 2]  # what the server sent, in order, and no more
    conn.close()
    assert wait_for(lambda: len(records(s.audit)) == 1)
    (record,) = records(s.audit)
    assert record["decision"] == "allow" and record["error"] and BIG // 2 <= record["bytes_down"] < BIG
    assert curl(f"http://allowed.test:{http_port}/still-fine", proxy=door(session())[0])[0] == "200"


def test_bytes_past_the_announced_length_never_answer_the_next_request(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    _, port = door(s)
    http_port = world.origins["http"].port
    before = bodies(world)
    conn = HTTPConnection("127.0.0.1", port, timeout=60)

    def get(path: str) -> tuple[int, bytes]:
        conn.request("GET", f"http://allowed.test:{http_port}{path}", headers={"Host": f"allowed.test:{http_port}"})
        response = conn.getresponse()
        return response.status, response.read()

    assert get("/long") == (200, world.blob[: BIG // 2])  # exactly the announced length
    assert wait_for(lambda: bodies(world) == before + 1)
    assert get("/next") == (200, b"hello from allowed-http /next\n")  # not the smuggled answer
    conn.close()
    paths = [p for _, p, _ in world.origins["http"].requests]
    assert paths[-2:] == ["/long", "/next"]


def test_chunked_and_small_bodies_stay_with_mitmproxy(world: SimpleNamespace, session: Callable[..., SimpleNamespace], tmp_path: Path) -> None:
    s = session()
    proxy, _ = door(s)
    http_port = world.origins["http"].port
    before = bodies(world)
    out = tmp_path / "chunked.bin"
    done = subprocess.run(["curl", "-sS", "-x", proxy, "-o", str(out), f"http://allowed.test:{http_port}/chunked"], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == world.blob_sha
    assert curl(f"http://allowed.test:{http_port}/small", proxy=proxy)[:2] == ("200", b"hello from allowed-http /small\n")
    assert curl("-I", f"http://allowed.test:{http_port}/blob", proxy=proxy)[0] == "200"  # HEAD: a length, no body
    assert bodies(world) == before  # none of them went by splice


def test_ending_a_session_cuts_its_spliced_body(world: SimpleNamespace, session: Callable[..., SimpleNamespace], tmp_path: Path) -> None:
    s = session()
    proxy, _ = door(s)
    partial = tmp_path / "partial"
    slow = subprocess.Popen(
        ["curl", "-sS", "--limit-rate", "2M", "-x", proxy, "-o", str(partial), f"http://allowed.test:{world.origins['http'].port}/blob"],
        stderr=subprocess.DEVNULL,
    )
    assert wait_for(lambda: partial.exists() and partial.stat().st_size > (1 << 20))
    api.end_session(world.locations, s.spec.session_id)
    assert slow.wait(timeout=20) != 0  # cut long before the 32 s the download would take
    assert partial.stat().st_size < BIG
    assert wait_for(lambda: len(records(s.audit)) == 1)
    (record,) = records(s.audit)
    assert record["decision"] == "allow" and 0 < record["bytes_down"] < BIG and record["error"]


def test_denied_uploads(world: SimpleNamespace, session: Callable[..., SimpleNamespace], tmp_path: Path) -> None:
    s = session()
    denied = world.origins["denied"]
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 1000)
    code, body, _ = curl("--data-binary", f"@{small}", f"http://denied.test:{denied.port}/upload", proxy=s.proxy)
    assert code == "403" and b"blocked denied.test" in body
    big = tmp_path / "big.bin"
    big.write_bytes(world.blob)
    code, _, _ = curl("--data-binary", f"@{big}", f"http://denied.test:{denied.port}/upload", proxy=s.proxy)
    assert code in ("000", "403")  # too big to wait for: the connection is closed instead
    assert denied.requests == []
    assert curl(f"http://allowed.test:{world.origins['http'].port}/still-fine", proxy=s.proxy)[0] == "200"
    assert wait_for(lambda: len(records(s.audit)) == 3)
    assert [r["decision"] for r in records(s.audit)] == ["deny", "deny", "allow"]


def test_ending_a_session_cuts_its_running_tunnel(world: SimpleNamespace, session: Callable[..., SimpleNamespace], tmp_path: Path) -> None:
    s = session()
    url = f"https://allowed.test:{world.origins['https'].port}/blob"
    slow = subprocess.Popen(
        ["curl", "-sS", "--limit-rate", "2M", "--cacert", str(world.cert), "-x", s.proxy, "-o", str(tmp_path / "partial"), url],
        stderr=subprocess.DEVNULL,
    )
    assert wait_for(lambda: (tmp_path / "partial").exists() and (tmp_path / "partial").stat().st_size > 0)
    api.end_session(world.locations, s.spec.session_id)
    assert slow.wait(timeout=20) != 0  # cut long before the 32 s the download would take
    assert (tmp_path / "partial").stat().st_size < BIG
    assert wait_for(lambda: len(records(s.audit)) == 1)  # written after the end, not lost
    (record,) = records(s.audit)
    assert record["decision"] == "allow" and 0 < record["bytes_down"] < BIG
    assert record["error"] == "ended with the run"


def test_tunnels_without_splice(daemon_tools: SimpleNamespace, world: SimpleNamespace, tmp_path: Path) -> None:
    """The same tunnel and plain-HTTP body on mitmproxy's own path (--no-splice): same bytes, same records."""
    locations = daemon_tools.make_locations(tmp_path / "nosplice")
    locations.runtime.mkdir(parents=True, mode=0o700)
    locations.state.mkdir(parents=True, mode=0o700, exist_ok=True)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "stockade.proxy.daemon", "--runtime-dir", str(locations.runtime), "--state-dir", str(locations.state),
         "--test-resolver", str(world.root / "names.json"), "--no-splice"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_for(lambda: (locations.runtime / "proxy.port").exists(), timeout=30)
        spec = SessionSpec(session_id="nosplice", command=["curl"], cwd="/", allow=("allowed.test",), audit_path=str(tmp_path / "a.jsonl"))
        ticket = api.register_session(locations, spec)
        for scheme in ("https", "http"):
            out = tmp_path / f"down-{scheme}.bin"
            done = subprocess.run(
                ["curl", "-sS", "--cacert", str(world.cert), "-x", f"http://stockade:{ticket.token}@127.0.0.1:{ticket.port}", "-o", str(out),
                 f"{scheme}://allowed.test:{world.origins[scheme].port}/blob"],
                capture_output=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert hashlib.sha256(out.read_bytes()).hexdigest() == world.blob_sha
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(locations.runtime / "proxy.sock"))
            conn.sendall(b'{"op":"ping"}\n')
            assert {k: v for k, v in json.loads(conn.recv(65536)).items() if k in ("spliced", "bodies")} == {"spliced": 0, "bodies": 0}
        api.end_session(locations, "nosplice")
        found = records(tmp_path / "a.jsonl")
        assert [(r["decision"], r["scheme"]) for r in found] == [("allow", "tls"), ("allow", "http")]
        assert all(r["bytes_down"] >= BIG and r["error"] is None for r in found)
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def test_failed_audit_write_stops_the_session(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    s = session()
    port = world.origins["http"].port
    assert curl(f"http://allowed.test:{port}/", proxy=s.proxy)[0] == "200"
    assert wait_for(lambda: len(records(s.audit)) == 1)
    s.audit.unlink()
    s.audit.mkdir()  # the log is no longer writable
    curl(f"http://allowed.test:{port}/lost", proxy=s.proxy)  # its record cannot be written
    code, body, _ = curl(f"http://allowed.test:{port}/after", proxy=s.proxy)
    assert code == "403" and b"audit log unwritable" in body
    assert all(path != "/after" for _, path, _ in world.origins["http"].requests)


def test_end_session_reports_denials_and_revokes_the_token(world: SimpleNamespace, tmp_path: Path) -> None:
    spec = SessionSpec(
        session_id="summary", command=["x"], cwd=str(tmp_path), allow=("allowed.test",), deny=(),
        audit_path=str(tmp_path / "audit.jsonl"), origin="/p/.stockade.toml",
    )  # fmt: skip
    ticket = api.register_session(world.locations, spec)
    proxy = f"http://stockade:{ticket.token}@127.0.0.1:{ticket.port}"
    curl("http://denied.test:81/", proxy=proxy)
    curl("http://denied.test:81/again", proxy=proxy)
    curl("--cacert", str(world.cert), "https://203.0.113.7/", proxy=proxy)
    denials = api.end_session(world.locations, "summary")
    assert {(d["host"], d["port"], d["count"], d["hint"], d["origin"]) for d in denials} == {
        ("denied.test", 81, 2, 'allow = ["denied.test"]', "/p/.stockade.toml"),
        ("203.0.113.7", 443, 1, 'allow = ["203.0.113.7"]', "/p/.stockade.toml"),
    }
    assert curl(f"http://allowed.test:{world.origins['http'].port}/", proxy=proxy)[0] == "407"


def test_session_ends_when_its_process_dies(world: SimpleNamespace, tmp_path: Path) -> None:
    script = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from stockade.core.locations import Locations\n"
        "from stockade.proxy.client import api\n"
        "root = Path(sys.argv[1])\n"
        "loc = Locations(home=root, config=root/'config', state=root/'state', cache=root/'cache', runtime=root/'run')\n"
        "spec = api.SessionSpec(session_id='dies', command=['x'], cwd='/', allow=('allowed.test',), audit_path=sys.argv[2])\n"
        "t = api.register_session(loc, spec)\n"
        "print(t.token, flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(world.locations.home), str(tmp_path / "a.jsonl")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    token = proc.stdout.readline().strip()
    url = f"http://allowed.test:{world.origins['http'].port}/"
    proxy = f"http://stockade:{token}@127.0.0.1:{world.port}"
    assert curl(url, proxy=proxy)[0] == "200"
    proc.kill()
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    assert wait_for(lambda: curl(url, proxy=proxy)[0] == "407")


def test_control_socket_refuses_other_users(world: SimpleNamespace) -> None:
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")
    # Another user cannot even reach the 0700 directory; give it a hard link to the socket
    # in an open directory, to prove SO_PEERCRED refuses it on its own.
    import tempfile

    with tempfile.TemporaryDirectory() as open_dir:
        os.chmod(open_dir, 0o755)
        link = Path(open_dir) / "proxy.sock"
        os.link(world.locations.runtime / "proxy.sock", link)
        os.chmod(link, 0o666)
        try:
            probe = (
                "import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
                'try: s.sendall(b\'{"op":"ping"}\\n\')\n'
                "except OSError: pass  # the daemon may have answered and closed already\n"
                "print(s.recv(4096).decode())\n"
            )
            done = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", sys.executable, "-c", probe, str(link)],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
        finally:
            os.chmod(world.locations.runtime / "proxy.sock", 0o600)
    assert '"ok":false' in done.stdout and "own user" in done.stdout, done.stderr


def _process_gone(pid: int) -> bool:
    """The daemon (a child of this test process when ensure_daemon started it) has exited."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_daemon_exits_when_idle_after_its_folders_are_removed(fresh_locations: Callable[[str], Locations]) -> None:
    """A HOME deleted under a live daemon (a test's, a CI runner's) must not leave it running for ever."""
    locations = fresh_locations("gone")
    api.ensure_daemon(locations, idle_timeout=2)
    pid = json.loads((locations.runtime / "proxy.port").read_text())["pid"]
    shutil.rmtree(locations.runtime)

    def gone() -> bool:
        return _process_gone(pid)

    try:
        assert wait_for(gone, timeout=30), "the daemon outlived its runtime folder"
    finally:
        if not gone():
            os.kill(pid, signal.SIGKILL)


def test_daemon_exits_when_idle(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("idle")
    port = api.ensure_daemon(locations, idle_timeout=2)
    pid = json.loads((locations.runtime / "proxy.port").read_text())["pid"]
    spec = SessionSpec(session_id="s", command=["x"], cwd="/", allow=(), audit_path=str(locations.state / "a.jsonl"))
    api.register_session(locations, spec)
    time.sleep(3)
    assert os.path.exists(locations.runtime / "proxy.port")  # a session keeps it alive
    api.end_session(locations, "s")

    def gone() -> bool:
        return _process_gone(pid)

    assert wait_for(gone, timeout=20)
    assert not (locations.runtime / "proxy.port").exists()
    assert not (locations.runtime / "proxy.sock").exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_concurrent_starts_make_one_daemon(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("race")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from stockade.core.locations import Locations\n"
        "from stockade.proxy.client import api\n"
        "root = Path(sys.argv[1])\n"
        "loc = Locations(home=root, config=root/'config', state=root/'state', cache=root/'cache', runtime=root/'run')\n"
        "print(api.ensure_daemon(loc, idle_timeout=60))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(locations.home)], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    ports = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(ports) == 1 and ports != {""}


def test_daemon_that_cannot_start_explains_why(fresh_locations: Callable[[str], Locations], tmp_path: Path) -> None:
    locations = fresh_locations("broken")
    with pytest.raises(api.ProxyDaemonError, match="did not start"):
        api.ensure_daemon(locations, test_resolver=str(tmp_path / "missing.json"))


def test_control_socket_failure_is_reported_fast(fresh_locations: Callable[[str], Locations], tmp_path: Path) -> None:
    locations = fresh_locations("x" * 120)  # the socket path is longer than AF_UNIX allows
    started = time.monotonic()
    with pytest.raises(api.ProxyDaemonError, match="did not start"):
        api.ensure_daemon(locations)
    assert time.monotonic() - started < 15


def _daemon_pid(locations: Locations) -> int:
    return int(json.loads((locations.runtime / "proxy.port").read_text())["pid"])


def test_a_hung_daemon_is_replaced_and_leaves_once_it_wakes(fresh_locations: Callable[[str], Locations], monkeypatch: pytest.MonkeyPatch) -> None:
    """A stopped daemon accepts on its control socket and never answers: the next run must not wait
    out the I/O timeout (20 s before), but start a new daemon; the old one, woken, takes no new
    session and exits once idle."""
    locations = fresh_locations("hung")
    api.ensure_daemon(locations, idle_timeout=600)  # it would not leave on its idle timer during the test
    old = _daemon_pid(locations)
    monkeypatch.setattr(sessionclient, "IO_TIMEOUT", 120.0)  # waiting out the I/O timeout would show as a test timeout
    os.kill(old, signal.SIGSTOP)
    try:
        spec = SessionSpec(session_id="after-hang", command=["x"], cwd="/", allow=(), audit_path=str(locations.state / "a.jsonl"))
        done: list[object] = []
        worker = threading.Thread(target=lambda: done.append(api.register_session(locations, spec)), daemon=True)
        worker.start()
        worker.join(60)
        assert done, "the run waited on the hung daemon instead of replacing it"
        ticket = done[0]
        new = _daemon_pid(locations)
        assert new != old and api.daemon_status(locations)["pid"] == new
        api.end_session(locations, "after-hang")
        assert not _process_gone(old), "control: the stopped daemon is still there"
    finally:
        os.kill(old, signal.SIGCONT)
    assert wait_for(lambda: _process_gone(old), timeout=30), "the superseded daemon did not exit when idle"
    assert api.daemon_status(locations)["pid"] == new and ticket.port  # type: ignore[attr-defined]


def test_a_removed_control_socket_leaves_one_daemon(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("unlinked")
    api.ensure_daemon(locations, idle_timeout=600)
    old = _daemon_pid(locations)
    (locations.runtime / "proxy.sock").unlink()
    api.ensure_daemon(locations, idle_timeout=600)
    new = _daemon_pid(locations)
    assert new != old
    assert wait_for(lambda: _process_gone(old), timeout=30), "two daemons: the one whose socket was removed stays"
    assert not _process_gone(new)


def test_a_daemon_whose_home_was_removed_exits(fresh_locations: Callable[[str], Locations]) -> None:
    """A temporary HOME (a test suite's, a CI job's) removed under a daemon: nothing can reach it
    again, so it must not stay (daemons of throwaway HOMEs piled up at 70-90 MB each)."""
    locations = fresh_locations("throwaway")
    api.ensure_daemon(locations, idle_timeout=600)  # its idle timer alone would keep it for ten minutes
    pid = _daemon_pid(locations)
    shutil.rmtree(locations.home)
    assert wait_for(lambda: _process_gone(pid), timeout=30), "the daemon outlived its HOME"


def test_an_endless_request_head_is_cut_at_the_limit(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    """mitmproxy buffers a request head whole; 8 connections of endless header lines took the shared
    daemon to 1.65 GB before. Past the limit the daemon answers 431 and closes."""
    from stockade.proxy.daemon.headlimit import MAX_REQUEST_HEAD

    s = session()
    _, port = door(s)
    target = f"allowed.test:{world.origins['http'].port}"
    sent = 0
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET http://{target}/endless HTTP/1.1\r\nHost: {target}\r\n".encode())
        line = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        try:
            while sent < 64 * MAX_REQUEST_HEAD:
                conn.sendall(line)
                sent += len(line)
        except OSError:
            pass  # the daemon closed it
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except OSError:
            pass
    assert answer.startswith(b"HTTP/1.1 431"), (sent, answer[:200])
    assert sent < 64 * MAX_REQUEST_HEAD, "the daemon kept reading an endless head"
    assert "/endless" not in [p for _, p, _ in world.origins["http"].requests]
    control = raw_door(port, f"GET http://{target}/after-endless HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n".encode())
    assert control.startswith(b"HTTP/1.1 200"), control[:200]


def _hold_tunnel(port: int, target: str, tls: ssl.SSLContext) -> ssl.SSLSocket | bytes:
    """CONNECT through a door and finish the TLS handshake (the daemon splices it); the held
    socket, or what the daemon answered instead of 200."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                break
            head += chunk
        if not head.startswith(b"HTTP/1.1 200"):
            while chunk := conn.recv(4096):
                head += chunk
            conn.close()
            return head
        return tls.wrap_socket(conn, server_hostname=target.split(":")[0])
    except OSError:
        conn.close()
        raise


def test_a_session_holding_every_tunnel_it_can_does_not_cut_off_another(
    world: SimpleNamespace, fresh_locations: Callable[[str], Locations], tmp_path: Path
) -> None:
    """At a descriptor limit of 1024 one sandbox holding ~127 spliced tunnels used to take every
    descriptor of the daemon all sessions share (EMFILE for the others). Now its budget stops it
    short, with a 503 saying why, and the other session keeps its network."""
    import psutil

    locations = fresh_locations("budget")
    api.ensure_daemon(locations, test_resolver=str(world.root / "names.json"), idle_timeout=600)
    pid = json.loads((locations.runtime / "proxy.port").read_text())["pid"]
    psutil.Process(pid).rlimit(psutil.RLIMIT_NOFILE, (1024, 1024))  # what `ulimit -n 1024` gives a daemon

    def open_session(name: str) -> SimpleNamespace:
        spec = SessionSpec(session_id=f"{tmp_path.name}-{name}", command=["hold"], cwd=str(tmp_path), allow=("allowed.test",),
                           deny=(), audit_path=str(tmp_path / f"audit-{name}.jsonl"), origin=str(tmp_path / ".stockade.toml"))  # fmt: skip
        ticket = api.register_session(locations, spec)
        with socket.create_server(("127.0.0.1", 0)) as listener:
            api.attach_listener(spec.session_id, listener)
            port = listener.getsockname()[1]
        return SimpleNamespace(spec=spec, ticket=ticket, port=port, proxy=f"http://127.0.0.1:{port}", audit=Path(spec.audit_path))

    hostile, victim = open_session("hostile"), open_session("victim")
    target = f"allowed.test:{world.origins['https'].port}"
    tls = ssl.create_default_context(cafile=str(world.cert))
    held: list[ssl.SSLSocket] = []
    answers: list[bytes] = []
    try:
        for _ in range(300):
            got = _hold_tunnel(hostile.port, target, tls)
            if isinstance(got, bytes):
                answers.append(got)
                if len(answers) >= 5:
                    break
            else:
                held.append(got)
        descriptors = len(os.listdir(f"/proc/{pid}/fd"))
        assert answers and all(a.startswith(b"HTTP/1.1 503") for a in answers), answers[:1]
        assert b"its share of the proxy daemon" in answers[0], answers[0]
        assert 50 <= len(held) < 127, len(held)  # it got a real share, and not all of it
        assert descriptors < 1024 - 32, descriptors  # room left for the daemon itself
        # The victim: its requests and tunnels work while the hostile holds all it can.
        for i in range(20):
            assert curl(f"http://allowed.test:{world.origins['http'].port}/victim-{i}", proxy=victim.proxy)[0] == "200"
        kept = [_hold_tunnel(victim.port, target, tls) for _ in range(10)]
        assert all(isinstance(k, ssl.SSLSocket) for k in kept), kept
        for k in kept:
            k.close()
        code, body, err = curl("--cacert", str(world.cert), f"https://{target}/victim-tls", proxy=victim.proxy)
        assert (code, body) == ("200", b"hello from allowed-https /victim-tls\n"), err
    finally:
        for sock in held:
            sock.close()
    ended = api.close_session(locations, hostile.spec.session_id)
    assert ended.refused.startswith(f"network: {len(answers)} connections refused with a 503: the sandbox held"), ended
    assert api.close_session(locations, victim.spec.session_id).refused == ""
    assert wait_for(lambda: any(r["host"] == "*" for r in records(hostile.audit)))
    (refusal,) = [r for r in records(hostile.audit) if r["host"] == "*"]
    assert (refusal["decision"], refusal["repeats"]) == ("deny", len(answers)) and "its share" in refusal["rule"]
    log = (locations.state / "proxy.log").read_text(errors="replace")
    assert "Too many open files" not in log, log[-2000:]


class _Flood:
    """Pipelines denied requests on a few door connections as fast as the daemon takes them,
    counting the answers, until stopped (a hostile sandbox)."""

    def __init__(self, port: int, target: str, connections: int = 4) -> None:
        self.port, self.target = port, target
        self.answers = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._one, daemon=True) for _ in range(connections)]

    def __enter__(self) -> _Flood:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)

    def _one(self) -> None:
        request = f"GET http://{self.target}/flood HTTP/1.1\r\nHost: {self.target}\r\n\r\n".encode() * 50
        while not self.stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
                    reader = threading.Thread(target=self._count, args=(conn,), daemon=True)
                    reader.start()
                    while not self.stop.is_set():
                        conn.sendall(request)
            except OSError:
                time.sleep(0.01)

    def _count(self, conn: socket.socket) -> None:
        try:
            while chunk := conn.recv(65536):
                self.answers += chunk.count(b"HTTP/1.1 403")
        except OSError:
            pass


def _victim_median_ms(port: int, target: str, count: int = 100) -> float:
    """Median milliseconds of `count` requests, each on a new connection through a door."""
    times = []
    for i in range(count):
        started = time.perf_counter()
        answer = raw_door(port, f"GET http://{target}/victim-{i} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n".encode())
        times.append((time.perf_counter() - started) * 1000)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    return sorted(times)[count // 2]


def test_a_flood_of_denials_is_paced_and_another_session_is_served(
    world: SimpleNamespace, session: Callable[..., SimpleNamespace], capsys: pytest.CaptureFixture[str]
) -> None:
    """A sandbox pipelining denied requests got ~2,400 answers a second and slowed every other
    session 20x. Its denials now wait for their slots (sessions.DENIAL_RATE after a burst), what it
    sends ahead is capped (headlimit.MAX_PIPELINED), and its door accepts at door.CONNECTION_RATE:
    the number of answers it gets in a window is bounded whatever the machine's speed, and the
    victim is served. The victim's slowdown is measured and reported, not asserted (timing)."""
    import psutil

    from stockade.proxy.filter.sessions import DENIAL_BURST, DENIAL_RATE

    hostile, victim = session(), session()
    _, hostile_port = door(hostile)
    _, victim_port = door(victim)
    daemon = psutil.Process(json.loads((world.locations.runtime / "proxy.port").read_text())["pid"])
    allowed = f"allowed.test:{world.origins['http'].port}"
    alone = _victim_median_ms(victim_port, allowed)
    rss_before = daemon.memory_info().rss
    started = time.monotonic()
    with _Flood(hostile_port, f"denied.test:{world.origins['denied'].port}", connections=16) as flood:
        flooded = _victim_median_ms(victim_port, allowed)
        time.sleep(max(0.0, 3.0 - (time.monotonic() - started)))
        elapsed = time.monotonic() - started
        answered = flood.answers
        rss_during = daemon.memory_info().rss
    with capsys.disabled():
        print(f"\n  victim median {alone:.2f} ms alone, {flooded:.2f} ms under a flood ({flooded / alone:.1f}x); "
              f"the flood got {answered} denials in {elapsed:.1f} s")  # fmt: skip
    bound = DENIAL_BURST + DENIAL_RATE * elapsed * 1.5 + 20
    # Only the bound is asserted: how many answers the flood's readers see before MAX_PIPELINED closes
    # their connections depends on the machine's load (0 on a busy 2-core runner); the victim's medians
    # above are its liveness check (each raises if the victim is not served).
    assert answered <= bound, f"{answered} denials answered in {elapsed:.1f}s (bound {bound:.0f})"
    # What the flood sent ahead of its answers is bounded per connection (headlimit.MAX_PIPELINED).
    assert rss_during - rss_before < 64 << 20, (rss_before, rss_during)
    assert world.origins["denied"].requests == []


# -- the filter's addons, as the daemon assembles them ----------------------------


async def test_addon_loads_into_dumpmaster_without_name_clash() -> None:
    from mitmproxy.options import Options
    from mitmproxy.tools.dump import DumpMaster

    from stockade.proxy.daemon.main import Filter

    master = DumpMaster(Options(), with_termlog=False, with_dumper=False)
    chain = Filter().chain()
    master.addons.add(*chain)
    for addon in chain:
        assert master.addons.get(type(addon).__name__.lower()) is addon


async def test_options_are_prefixed() -> None:
    from mitmproxy.options import Options
    from mitmproxy.test import taddons

    from stockade.proxy.daemon.main import Filter

    with taddons.context(*Filter().chain()) as tctx:
        ours = {name for name in tctx.options.keys() if name not in Options().keys()}
    assert ours and all(name.startswith("stockade_") for name in ours)


def test_the_chain_runs_each_addon_after_the_ones_it_reads() -> None:
    """The order daemon.Filter documents: Auth before Decisions before Metering before SpliceOffers,
    mitmproxy's NextLayer (proxy_addons) before Metering wraps its choice."""
    from stockade.proxy.daemon.main import Filter, proxy_addons

    names = [type(a).__name__ for a in [*proxy_addons(), *Filter().chain()]]
    order = ["NextLayer", "SessionAuth", "Decisions", "Tunnels", "Metering", "SpliceOffers", "Backstop"]
    assert [n for n in names if n in order] == order


class UpgradeEcho:
    """An origin that answers any request with 101 and then echoes raw bytes, noting each chunk it got."""

    def __init__(self, upgrade: bool = True) -> None:
        self.upgrade = upgrade  # False: never answer, only note the body as it streams in
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.got: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            if not self.upgrade:
                self.got.append(head.partition(b"\r\n\r\n")[2])
                while chunk := conn.recv(4096):
                    self.got.append(chunk)
                return
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
            while chunk := conn.recv(4096):
                self.got.append(chunk)
                conn.sendall(chunk)

    def close(self) -> None:
        self.server.close()


def _exchange(conn: socket.socket, data: bytes) -> bytes:
    """Send `data` and read what comes back within a second (b"" once the connection is closed)."""
    try:
        conn.sendall(data)
        conn.settimeout(1.0)
        return conn.recv(4096)
    except (TimeoutError, OSError):
        return b""


def test_tcp_after_an_upgrade_is_cut_when_its_session_ends(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    """An allowed upgrade's raw TCP goes on only while its session may move bytes: mitmproxy 11
    keeps relaying a TCP flow killed in a hook (mitmproxy #4711), so a cut must close it."""
    names = world.root / "names.json"
    saved = names.read_text()
    origin = UpgradeEcho()
    table = json.loads(saved)
    table["upstreams"].append(f"127.0.0.1:{origin.port}")
    names.write_text(json.dumps(table))
    s = session(allow=("allowed.test",), deny=())
    try:
        with socket.create_connection(("127.0.0.1", world.port), timeout=10) as conn:
            conn.sendall(
                f"GET http://allowed.test:{origin.port}/up HTTP/1.1\r\nHost: allowed.test:{origin.port}\r\n"
                f"Proxy-Authorization: {credential(s.ticket.token)}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n".encode()
            )
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            assert head.startswith(b"HTTP/1.1 101"), head
            assert _exchange(conn, b"while-alive") == b"while-alive"  # the control: the upgraded stream works
            api.end_session(world.locations, s.spec.session_id)
            after = _exchange(conn, b"after-end")
            time.sleep(0.3)
            assert after == b"" and b"after-end" not in b"".join(origin.got), "the stream went on after its session ended"
    finally:
        names.write_text(saved)
        origin.close()


def test_a_streamed_request_body_is_cut_when_its_session_ends(world: SimpleNamespace, session: Callable[..., SimpleNamespace]) -> None:
    """A plain-HTTP body streams through as it comes (counted, not buffered); once the session
    ends, no more of it reaches the origin. The control: the chunk sent before the end arrives."""
    names = world.root / "names.json"
    saved = names.read_text()
    origin = UpgradeEcho(upgrade=False)
    table = json.loads(saved)
    table["upstreams"].append(f"127.0.0.1:{origin.port}")
    names.write_text(json.dumps(table))
    s = session(allow=("allowed.test",), deny=())
    try:
        with socket.create_connection(("127.0.0.1", world.port), timeout=10) as conn:
            conn.sendall(
                f"POST http://allowed.test:{origin.port}/up HTTP/1.1\r\nHost: allowed.test:{origin.port}\r\n"
                f"Proxy-Authorization: {credential(s.ticket.token)}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
            )
            conn.sendall(b"b\r\nwhile-alive\r\n")
            assert wait_for(lambda: b"while-alive" in b"".join(origin.got)), origin.got
            api.end_session(world.locations, s.spec.session_id)
            try:
                conn.sendall(b"9\r\nafter-end\r\n")
            except OSError:
                pass
            time.sleep(0.5)
            assert b"after-end" not in b"".join(origin.got), "the body went on after its session ended"
    finally:
        names.write_text(saved)
        origin.close()


def test_a_daemon_whose_folders_are_gone_before_it_starts_makes_nothing_and_exits(tmp_path: Path) -> None:
    """A run makes the daemon's folders, then starts it without waiting: if that HOME is removed in
    between, the daemon must not make the folders again and live on there (a leftover daemon)."""
    gone = tmp_path / "removed-home"
    done = subprocess.run(
        [sys.executable, "-m", "stockade.proxy.daemon", "--runtime-dir", str(gone / "run"), "--state-dir", str(gone / "state")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "is gone" in done.stderr, done
    assert not gone.exists()
    (gone / "run").mkdir(parents=True)  # control: with both folders there it starts (and stops at once on SIGTERM)
    (gone / "state").mkdir()
    started = subprocess.Popen(
        [sys.executable, "-m", "stockade.proxy.daemon", "--runtime-dir", str(gone / "run"), "--state-dir", str(gone / "state")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_for(lambda: (gone / "run" / "proxy.port").exists(), timeout=30)
    finally:
        started.terminate()
        started.wait(timeout=30)
