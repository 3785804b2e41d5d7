"""An allowed host loopback port is reached at the same address inside, from any client
(bwrap/parts/forwards.py; issue 31, item 4).

`allow = ["127.0.0.1:PORT"]` used to reach the host's service only for a client told to
use the proxy: NO_PROXY sends 127.0.0.1 to the sandbox's own loopback, where nothing
listened. Now the sandbox's namespace listens at that port and the daemon serves each
connection as a CONNECT to the entry, judged and recorded like any other.
"""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import threading

import pytest

from tests.e2e.netfixtures import NetWorld

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")]

RAW_GET = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET /raw HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n")
print("RAW", s.recv(12).decode())
"""


@pytest.fixture(scope="module")
def world(net_world: NetWorld) -> NetWorld:
    return net_world


def test_an_allowed_loopback_port_is_reached_by_clients_that_ignore_the_proxy(world: NetWorld) -> None:
    w = world
    port = w.origins["http"].port
    policy = w.policy("fwd", allow=[f"127.0.0.1:{port}"])
    script = (
        f'curl -s -o /dev/null -w "curl=%{{http_code}}\\n" "http://127.0.0.1:{port}/through-curl";'
        f"env -u PYTHONPATH /usr/bin/python3 -c {shlex.quote(RAW_GET)} {port};"
        f'curl -s -o /dev/null -w "other=%{{http_code}}\\n" "http://127.0.0.1:$CANARY_PORT/" || echo other=refused;'
        # the sandbox's own servers on other loopback ports stay its own
        "env -u PYTHONPATH /usr/bin/python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 0.5;"
        'curl -s -o /dev/null -w "own=%{http_code}\\n" "http://127.0.0.1:18765/"; kill $!'
    )
    result = w.run(script, tag="fwd", policy=policy)
    assert "curl=200" in result.stdout and "RAW HTTP/1.1 200" in result.stdout, result
    assert "other=refused" in result.stdout or "other=000" in result.stdout, result  # a port nobody allowed: nothing there
    assert "own=200" in result.stdout, result
    seen = [s.path for s in w.origins["http"].requests]
    assert "/through-curl" in seen and "/raw" in seen
    records = w.records("fwd", 2)
    assert {(r["host"], r["port"], r["decision"]) for r in records} >= {("127.0.0.1", port, "allow")}, records


def test_a_denied_loopback_port_is_refused_and_recorded(world: NetWorld) -> None:
    w = world
    port = w.origins["http"].port
    policy = w.policy("fwd-deny", allow=[f"127.0.0.1:{port}"], deny=[f"127.0.0.1:{port}"])
    before = len(w.origins["http"].requests)
    result = w.run(f'curl -s -o /dev/null -w "code=%{{http_code}}\\n" "http://127.0.0.1:{port}/denied-fwd" || true', tag="fwd-deny", policy=policy)
    assert "code=200" not in result.stdout, result
    assert all(s.path != "/denied-fwd" for s in w.origins["http"].requests[before:])
    assert any(r["decision"] == "deny" and r["port"] == port for r in w.records("fwd-deny", 1)), w.records("fwd-deny")


def test_localhost_with_a_port_listens_at_both_loopbacks(world: NetWorld) -> None:
    """Node asks ::1 first for localhost: both of the sandbox's loopbacks forward to the entry."""
    w = world
    port = w.origins["http"].port
    policy = w.policy("fwd-localhost", allow=[f"localhost:{port}"])
    script = (
        f'curl -4 -s -o /dev/null -w "v4=%{{http_code}}\\n" "http://localhost:{port}/v4";'
        f'curl -6 -s -o /dev/null -w "v6=%{{http_code}}\\n" "http://localhost:{port}/v6"'
    )
    result = w.run(script, tag="fwd-localhost", policy=policy)
    assert "v4=200" in result.stdout and "v6=200" in result.stdout, result


def test_a_refused_loopback_connection_gets_a_line_when_the_command_failed(world: NetWorld) -> None:
    w = world
    port = w.canary.port  # a host service nobody allowed: inside, nothing listens there
    failed = w.run(f'curl -sS -m5 -o /dev/null "http://127.0.0.1:{port}/"', tag="fwd-refused")
    assert failed.returncode != 0
    assert "connection(s) to a loopback port inside were refused" in failed.stderr and '"127.0.0.1:PORT"' in failed.stderr, failed
    coped = w.run(f'curl -sS -m5 -o /dev/null "http://127.0.0.1:{port}/" || true', tag="fwd-refused")
    assert coped.returncode == 0 and "loopback port inside" not in coped.stderr, coped  # a command that coped hears nothing


class _Echo:
    """A client-first raw TCP service on the host's loopback (a database's protocol, for the forward)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(64)
                conn.sendall(b"echo:" + data)

    def close(self) -> None:
        self.server.close()


def test_a_plain_tcp_service_is_reached_through_its_forward(world: NetWorld) -> None:
    """Not TLS, not HTTP, not SSH: at a forwarded port any protocol passes (the entry names the port)."""
    w = world
    echo = _Echo()
    table = json.loads(w.resolver.read_text())
    table["upstreams"].append(f"127.0.0.1:{echo.port}")  # the test resolver lets the daemon dial only these
    w.resolver.write_text(json.dumps(table))
    try:
        client = (
            "import socket, sys\n"
            "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
            "s.sendall(bytes([0, 0, 0, 8, 4, 210, 22, 47]))\n"  # a Postgres SSLRequest
            "print(s.recv(64))\n"
        )
        result = w.run(f"env -u PYTHONPATH /usr/bin/python3 -c {shlex.quote(client)} {echo.port}", tag="fwd-tcp",
                       policy=w.policy("fwd-tcp", allow=[f"127.0.0.1:{echo.port}"]))  # fmt: skip
        assert "b'echo:\\x00\\x00\\x00\\x08\\x04\\xd2\\x16/'" in result.stdout, result
        assert any(r.get("scheme") == "tcp" and r["port"] == echo.port and r["decision"] == "allow" for r in w.records("fwd-tcp", 1))
    finally:
        echo.close()
        w.write_resolver()
