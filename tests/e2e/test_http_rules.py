"""[network.http."HOST"]: the daemon terminates that host's TLS and judges each request, through real runs.

Loopback HTTPS origins with a test CA: one HTTP/1.1 (Python), one that
speaks HTTP/2 (Node's http2). Each case checks the request that must pass
and the one that must not, with what reached the origin, what the client
was told and what the audit log says.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.e2e.netfixtures import make_box, state_dir
from tests.netkit import make_certificate, stop_daemon
from tests.visible import force_rmtree, visible_root

pytestmark = pytest.mark.e2e

HOST = "api.test"
OTHER = "plain.test"  # allowed, with no HTTP rules: spliced as before, never inspected

NODE_H2 = r"""
const http2 = require("http2"), fs = require("fs");
const server = http2.createSecureServer({key: fs.readFileSync(process.argv[2]), cert: fs.readFileSync(process.argv[3]), allowHTTP1: true},
  (req, res) => { res.end(`${req.httpVersion} ${req.method} ${req.url}\n`); });
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
"""


class Origin(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        self.seen: list[tuple[str, str]] = []
        super().__init__(("127.0.0.1", 0), Handler)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Origin

    def answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        self.server.seen.append((self.command, self.path))
        if self.headers.get("upgrade"):  # switches to anything asked (as an h2c-capable backend would)
            self.send_response(101)
            self.send_header("connection", "upgrade")
            self.send_header("upgrade", self.headers["upgrade"])
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            for line in self.rfile:  # what comes after the switch: logged as raw lines
                if line.strip():
                    self.server.seen.append(("raw", line.decode("latin-1").strip()))
            return
        body = f"{self.request_version} {self.command} {self.path}\n".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = do_PUT = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = visible_root("h")
    scratch = tmp_path_factory.mktemp("http")
    cert, key = make_certificate(root, [HOST, OTHER])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    origin = Origin(context)
    node = shutil.which("node")
    h2 = h2_port = None
    if node:
        script = root / "h2.js"
        script.write_text(NODE_H2)
        h2 = subprocess.Popen([node, str(script), str(key), str(cert)], stdout=subprocess.PIPE, text=True)
        assert h2.stdout is not None
        h2_port = int(h2.stdout.readline())
    ports = [origin.server_address[1], *([h2_port] if h2_port else [])]
    names = scratch / "names.json"
    names.write_text(json.dumps({"names": {HOST: ["127.0.0.1"], OTHER: ["127.0.0.1"]}, "upstreams": [f"127.0.0.1:{p}" for p in ports]}))
    box = make_box(root / "box")
    box.env.update(STOCKADE_PROXY_TEST_RESOLVER=str(names), STOCKADE_PROXY_TEST_UPSTREAM_CA=str(cert), STOCKADE_PROXY_IDLE="60")
    yield SimpleNamespace(box=box, origin=origin, port=origin.server_address[1], h2_port=h2_port, cert=cert, root=root)
    stop_daemon(state_dir(box) / "run")
    origin.shutdown()
    if h2 is not None:
        h2.kill()
        h2.wait()
    force_rmtree(root)


def policy(allow: list[str], deny: list[str] = (), host: str = HOST) -> str:  # type: ignore[assignment]
    return (
        f'extends = ["default"]\n[network]\nallow = ["{HOST}", "{OTHER}"]\n'
        f'[network.http."{host}"]\nallow = {json.dumps(allow)}\ndeny = {json.dumps(list(deny))}\n'
    )


def curl(world: SimpleNamespace, *requests: str, port: int | None = None, extra: str = "") -> str:
    """A shell line running curl once over one connection for each METHOD /path (so keep-alive is used)."""
    port = port or world.port
    parts = []
    for number, request in enumerate(requests):
        method, path = request.split(" ", 1)
        parts.append(f'{"--next " if number else ""}-sS -X {method} -w "[%{{http_code}}]\\n" https://{HOST}:{port}{path}')
    return f"curl {extra} {' '.join(parts)}"


def audit(world: SimpleNamespace) -> list[dict[str, object]]:
    path = state_dir(world.box) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_each_request_is_judged_on_one_kept_alive_connection(world: SimpleNamespace) -> None:
    before = len(world.origin.seen)
    rules = policy(["GET /repos/**", "POST /repos/*/issues"], ["* /repos/secret/**"])
    script = curl(world, "GET /repos/a/b", "POST /repos/a/issues", "DELETE /repos/a", "GET /repos/secret/x", "GET /other", "GET /repos/last")
    result = world.box.run(script, policy=rules)
    assert result.returncode == 0, result
    codes = [line[-5:] for line in result.stdout.splitlines() if line.endswith("]")]
    assert codes == ["[200]", "[200]", "[403]", "[403]", "[403]", "[200]"], result.stdout
    seen = world.origin.seen[before:]
    assert seen == [("GET", "/repos/a/b"), ("POST", "/repos/a/issues"), ("GET", "/repos/last")]  # refused ones never reached it
    assert 'add "DELETE /repos/a" to allow under [network.http."api.test"]' in result.stdout  # the 403 names the line
    assert '"* /repos/secret/**" is under deny' in result.stdout
    ends = [r for r in audit(world) if r.get("scheme") == "https" and r.get("phase") == "end"][-6:]
    assert [(r["method"], r["path"], r["decision"], r["rule"]) for r in ends] == [
        ("GET", "/repos/a/b", "allow", "http allow GET /repos/**"),
        ("POST", "/repos/a/issues", "allow", "http allow POST /repos/*/issues"),
        ("DELETE", "/repos/a", "deny", "no HTTP rule allows DELETE /repos/a"),
        ("GET", "/repos/secret/x", "deny", "http deny * /repos/secret/**"),
        ("GET", "/other", "deny", "no HTTP rule allows GET /other"),
        ("GET", "/repos/last", "allow", "http allow GET /repos/**"),
    ]
    summary = [line for line in result.stderr.splitlines() if line.startswith("stockade: network: denied")]
    assert len(summary) == 3 and any('add "GET /other" to allow' in line for line in summary), result.stderr


def test_http2_streams_are_judged_one_by_one(world: SimpleNamespace) -> None:
    if world.h2_port is None:
        pytest.skip("node is not installed (the HTTP/2 origin)")
    rules = policy(["GET /ok/**"])
    script = curl(world, "GET /ok/1", "GET /no/2", "GET /ok/3", port=world.h2_port, extra="--http2")
    result = world.box.run(script, policy=rules)
    assert result.returncode == 0, result
    assert "2.0 GET /ok/1" in result.stdout and "2.0 GET /ok/3" in result.stdout, result.stdout  # the origin saw HTTP/2
    assert result.stdout.count("[200]") == 2 and result.stdout.count("[403]") == 1, result.stdout
    assert "2.0 GET /no/2" not in result.stdout, result.stdout  # the refused stream never reached the origin


def test_http2_of_a_client_that_ignores_the_proxy_is_judged_the_same(world: SimpleNamespace) -> None:
    """Issue 36: through the transparent door (bwrap/parts/interception.py) an HTTP/2 client's streams are
    judged one by one exactly as a proxied client's are."""
    if world.h2_port is None:
        pytest.skip("node is not installed (the HTTP/2 origin)")
    unset = "unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy NO_PROXY no_proxy\n"
    script = unset + curl(world, "GET /ok/1", "GET /no/2", "GET /ok/3", port=world.h2_port, extra="--http2 --noproxy '*'")
    result = world.box.run(script, policy=policy(["GET /ok/**"]))
    assert result.returncode == 0, result
    assert "2.0 GET /ok/1" in result.stdout and "2.0 GET /ok/3" in result.stdout, result.stdout
    assert result.stdout.count("[200]") == 2 and result.stdout.count("[403]") == 1, result.stdout
    assert "2.0 GET /no/2" not in result.stdout, result.stdout


@pytest.mark.parametrize(
    "path",
    ["/repos/%2e%2e/admin", "/repos/a%2Fb", "/repos//a", "/repos/./a"],
)
def test_a_path_that_servers_read_differently_is_refused(world: SimpleNamespace, path: str) -> None:
    before = len(world.origin.seen)
    result = world.box.run(curl(world, f"GET {path}", "GET /repos/plain", extra="--path-as-is"), policy=policy(["GET /repos/**"]))
    assert result.stdout.count("[403]") == 1 and result.stdout.count("[200]") == 1, result.stdout
    assert world.origin.seen[before:] == [("GET", "/repos/plain")]


def test_a_host_without_http_rules_is_not_inspected(world: SimpleNamespace) -> None:
    """plain.test has no table: its TLS passes through untouched, so only the origin's own certificate verifies."""
    script = (
        f'curl -sS -o /dev/null -w "plain=%{{http_code}}\\n" --cacert {world.cert} https://{OTHER}:{world.port}/x; '
        f'curl -sS -o /dev/null -w "inspected=%{{http_code}}\\n" --cacert {world.cert} https://{HOST}:{world.port}/repos/x'
    )
    result = world.box.run(script, policy=policy(["GET /repos/**"]))
    assert "plain=200" in result.stdout, result  # spliced: the origin's own certificate
    assert "inspected=000" in result.stdout, result  # the daemon's certificate: not the origin's, so curl refuses it
    tls = [r for r in audit(world) if r.get("scheme") == "tls" and r.get("host") == OTHER]
    assert tls, "the plain host's tunnel was not recorded"


def test_clients_trust_the_daemon_through_the_variables_and_never_see_its_key(world: SimpleNamespace) -> None:
    script = (
        "for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE PIP_CERT NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO AWS_CA_BUNDLE; "
        'do eval echo "$v=\\$$v"; done; '
        "grep -c 'BEGIN CERTIFICATE' \"$SSL_CERT_FILE\"; "
        f"env -u PYTHONPATH /usr/bin/python3 -c \"import urllib.request; print(urllib.request.urlopen('https://{HOST}:{world.port}/repos/py').status)\"; "
        f"cat {state_dir(world.box)}/mitmproxy/mitmproxy-ca.pem 2>&1 | head -c 200; echo"
    )
    result = world.box.run(script, policy=policy(["GET /repos/**"]))
    lines = result.stdout.splitlines()
    assert all(line.endswith("=/run/stockade/ca-bundle.pem") for line in lines[:7]), lines
    assert int(lines[7]) > 1  # the system's roots and the daemon's CA
    assert lines[8] == "200", result  # Python's own ssl module, through SSL_CERT_FILE and the proxy variables
    assert "PRIVATE KEY" not in result.stdout and "No such file" in result.stdout, result.stdout  # the CA's key stays hidden
    key = state_dir(world.box) / "mitmproxy" / "mitmproxy-ca.pem"
    assert key.exists() and "PRIVATE KEY" in key.read_text() and os.stat(key).st_mode & 0o077 == 0  # control: it is there, 0600


def test_an_origin_whose_certificate_does_not_verify_is_refused(world: SimpleNamespace) -> None:
    """The daemon verifies the origin as a client would: with a CA it does not trust, the request fails."""
    other_root = world.root / "other-ca"
    other_root.mkdir(exist_ok=True)
    other_cert, _ = make_certificate(other_root, [HOST])
    box = make_box(world.root / "untrusting")
    box.env.update({k: v for k, v in world.box.env.items() if k.startswith("STOCKADE_PROXY_")})
    box.env["STOCKADE_PROXY_TEST_UPSTREAM_CA"] = str(other_cert)
    before = len(world.origin.seen)
    try:
        result = box.run(curl(world, "GET /repos/x"), policy=policy(["GET /repos/**"]))
    finally:
        stop_daemon(state_dir(box) / "run")
    assert "[200]" not in result.stdout, result
    assert world.origin.seen[before:] == []  # the handshake failed before any request went up
    said = [line for line in result.stderr.splitlines() if "certificate did not verify" in line]
    assert said and said[0].startswith("stockade: network: denied api.test:"), result.stderr  # the summary says why
    control = world.box.run(curl(world, "GET /repos/x"), policy=policy(["GET /repos/**"]))
    assert "[200]" in control.stdout, control


def test_policy_errors_name_the_file_and_line(world: SimpleNamespace) -> None:
    text = 'extends = ["default"]\n[network]\nallow = ["api.test"]\n\n[network.http."api.test"]\nallow = ["GET /a", "get /b"]\n'
    result = world.box.run("true", policy=text)
    assert result.returncode == 2, result
    assert "policy.toml:6:" in result.stderr and "HTTP method in capitals" in result.stderr, result.stderr


def test_an_untrusted_project_can_narrow_but_not_widen_a_hosts_requests(world: SimpleNamespace) -> None:
    """Your own policy limits api.test to GET /repos/**; a cloned repository's file may add denials there, not allows."""
    box = world.box
    config = box.home / ".config" / "stockade"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(policy(["GET /repos/**"]))
    (box.project / ".stockade.toml").write_text('[network.http."api.test"]\nallow = ["DELETE /repos/**"]\ndeny = ["GET /repos/private/**"]\n')
    try:
        before = len(world.origin.seen)
        result = box.run(curl(world, "GET /repos/ok", "DELETE /repos/x", "GET /repos/private/y"))
        assert [line[-5:] for line in result.stdout.splitlines() if line.endswith("]")] == ["[200]", "[403]", "[403]"], result
        assert world.origin.seen[before:] == [("GET", "/repos/ok")]
        assert "DELETE /repos/**" in result.stderr  # the dropped allowance is named
    finally:
        (config / "config.toml").unlink()
        (box.project / ".stockade.toml").unlink()


def test_dry_run_says_which_hosts_are_inspected(world: SimpleNamespace) -> None:
    result = world.box.run("true", policy=policy(["GET /repos/**"]), options=["--dry-run"])
    assert result.returncode == 0, result
    assert "# TLS inspected for api.test (HTTP rules)" in result.stdout, result.stdout


def plain_origin(world: SimpleNamespace) -> http.server.ThreadingHTTPServer:
    """A plain-HTTP origin with the same handler (requests in `.seen`), which the daemon's resolver may reach."""
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    plain.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    names = Path(world.box.env["STOCKADE_PROXY_TEST_RESOLVER"])
    table = json.loads(names.read_text())
    table["upstreams"].append(f"127.0.0.1:{plain.server_address[1]}")
    names.write_text(json.dumps(table))
    return plain


def test_plain_http_to_a_host_with_http_rules_is_judged_too(world: SimpleNamespace) -> None:
    """The rules are the host's, whatever the scheme: a plain-HTTP request to api.test (direct to the proxy, or
    inside a CONNECT tunnel) is judged like one inside its TLS."""
    plain = plain_origin(world)
    port = plain.server_address[1]
    script = (
        f'curl -sS -o /dev/null -w "get=%{{http_code}}\\n" http://{HOST}:{port}/repos/ok; '
        f'curl -sS -o /dev/null -w "delete=%{{http_code}}\\n" -X DELETE http://{HOST}:{port}/repos/x; '
        f'curl -sS -o /dev/null -w "tunnelled=%{{http_code}}\\n" -X DELETE --proxytunnel http://{HOST}:{port}/repos/y'
    )
    try:
        result = world.box.run(script, policy=policy(["GET /repos/**"]))
    finally:
        plain.shutdown()
    assert "get=200" in result.stdout, result
    assert "delete=403" in result.stdout and "tunnelled=403" in result.stdout, result.stdout
    assert plain.seen == [("GET", "/repos/ok")]  # type: ignore[attr-defined]


def test_an_untrusted_project_cannot_widen_a_limited_host_through_another_spelling(world: SimpleNamespace) -> None:
    """Your policy limits api.test to GET /repos/**; a cloned repository's tables for "*.test" and for
    "api.test:PORT" both match api.test too, and the daemon lets a request through when any matching
    table allows it: their allow rules must not reach api.test (their denials still do)."""
    box = world.box
    config = box.home / ".config" / "stockade"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(policy(["GET /repos/**"]))
    (box.project / ".stockade.toml").write_text(
        f'[network.http."*.test"]\nallow = ["* /**"]\n[network.http."{HOST}:{world.port}"]\nallow = ["PUT /**"]\ndeny = ["GET /repos/private/**"]\n'
    )
    try:
        before = len(world.origin.seen)
        result = box.run(curl(world, "DELETE /repos/a", "PUT /anything", "GET /repos/private/y", "GET /repos/ok"))
        assert [line[-5:] for line in result.stdout.splitlines() if line.endswith("]")] == ["[403]", "[403]", "[403]", "[200]"], result
        assert world.origin.seen[before:] == [("GET", "/repos/ok")]  # the legitimate request still works
        assert 'HTTP rule "allow * /**" for *.test' in result.stderr, result.stderr  # the dropped allowances are named
    finally:
        (config / "config.toml").unlink()
        (box.project / ".stockade.toml").unlink()


RAW_UPGRADE = r"""
import socket, ssl, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(f"CONNECT api.test:{port} HTTP/1.1\r\nHost: api.test:{port}\r\n\r\n".encode())
assert s.recv(4096).startswith(b"HTTP/1.1 200")
t = ssl.create_default_context().wrap_socket(s, server_hostname="api.test")
t.sendall(b"GET /repos/ok HTTP/1.1\r\nHost: api.test\r\n\r\n")
print(t.recv(4096).split(b"\r\n")[0].decode())
t.sendall(b"GET /repos/up HTTP/1.1\r\nHost: api.test\r\nConnection: upgrade\r\nUpgrade: foo\r\n\r\n")
time.sleep(0.5)
try:
    print(t.recv(4096).split(b"\r\n")[0].decode())
    t.sendall(b"DELETE /repos/secret HTTP/1.1\r\nHost: api.test\r\n\r\n")
    time.sleep(0.5)
    print("after:", t.recv(4096))
except (OSError, ssl.SSLError) as exc:
    print("cut:", type(exc).__name__)
"""


def test_an_upgrade_to_raw_tcp_does_not_leave_later_requests_unjudged(world: SimpleNamespace) -> None:
    """An allowed request asking `Upgrade: foo` (h2c smuggling and its kin): after the origin's 101 the
    tunnel would carry raw bytes, so a DELETE the rules refuse would reach the origin unjudged."""
    (world.box.project / "raw.py").write_text(RAW_UPGRADE)
    before = len(world.origin.seen)
    result = world.box.run(f"env -u PYTHONPATH /usr/bin/python3 raw.py {world.port}", policy=policy(["GET /repos/**"]))
    seen = world.origin.seen[before:]
    assert ("raw", "DELETE /repos/secret HTTP/1.1") not in seen, (seen, result)  # the attack failed
    assert seen[:2] == [("GET", "/repos/ok"), ("GET", "/repos/up")], (seen, result)  # control: judged requests went through
    assert result.stdout.startswith("HTTP/1.1 200"), result
    cut = [r for r in audit(world) if r.get("rule", "").startswith("an upgrade to raw TCP on a host with HTTP rules")]
    assert cut, "the refused upgrade was not recorded"


TUNNELED = r"""
import http.client, sys
connection = http.client.HTTPSConnection("127.0.0.1", 3128)
connection.set_tunnel("api.test", int(sys.argv[1]))
for request in sys.argv[2:]:
    method, path = request.split(" ", 1)
    connection.request(method, path)
    response = connection.getresponse()
    response.read()
    print(response.status, request)
"""


def test_paths_that_servers_read_as_a_denied_one_are_refused(world: SimpleNamespace) -> None:
    """`;parameters` (Tomcat, Jetty, Spring drop them), a trailing / (Express, Flask route /x/ as /x),
    letter case (case-insensitive routers) and a raw # must not slip a request past a deny rule."""
    (world.box.project / "tunneled.py").write_text(TUNNELED)
    attacks = ["GET /repos/secret;x/y", "GET /repos/a/..;/secret/y", "DELETE /repos/x/", "DELETE /repos/X", "GET /Repos/Secret/y",
               "GET /files/secret.bin;.txt", "GET /repos/a#/../../secret/y"]  # fmt: skip
    controls = ["GET /repos/a;v=1/b", "DELETE /repos/y/", "GET /files/a.txt"]
    rules = policy(["* /repos/**", "GET /files/*.txt"], ["* /repos/secret/**", "DELETE /repos/x"])
    before = len(world.origin.seen)
    words = " ".join(f"'{r}'" for r in [*attacks, *controls])
    result = world.box.run(f"env -u PYTHONPATH /usr/bin/python3 tunneled.py {world.port} {words}", policy=rules)
    statuses = dict(line.split(" ", 1)[::-1] for line in result.stdout.splitlines())
    assert [statuses.get(r) for r in attacks] == ["403"] * len(attacks), result
    assert [statuses.get(r) for r in controls] == ["200"] * len(controls), result
    assert world.origin.seen[before:] == [(r.split(" ")[0], r.split(" ")[1]) for r in controls]


def test_a_method_override_cannot_turn_an_allowed_post_into_a_denied_delete(world: SimpleNamespace) -> None:
    """Rails, Express's method-override, Symfony, Laravel and Google's APIs act on X-HTTP-Method-Override
    (and its kin, and a `_method` parameter) instead of the request line's method."""
    rules = policy(["POST /repos/**", "GET /repos/**"], ["DELETE /repos/**"])
    before = len(world.origin.seen)
    script = curl(world, "POST /repos/a", "POST /repos/b", "POST /repos/c", "POST /repos/d?_method=DELETE", "POST /repos/ok", extra="")
    headers = ["X-HTTP-Method-Override: DELETE", "X-HTTP-Method: DELETE", "X-Method-Override: delete", None, "X-HTTP-Method-Override: GET"]
    parts = script.split(" --next ")
    script = " --next ".join(part + (f" -H '{h}'" if h else "") for part, h in zip(parts, headers, strict=True))
    result = world.box.run(script, policy=rules)
    assert [line[-5:] for line in result.stdout.splitlines() if line.endswith("]")] == ["[403]"] * 4 + ["[200]"], result
    assert world.origin.seen[before:] == [("POST", "/repos/ok")]  # the control went through, the overrides did not
    assert "(asked by X-HTTP-Method-Override)" in result.stdout, result.stdout


PLAIN_UPGRADE = r"""
import socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(f"GET http://api.test:{port}/repos/up HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: upgrade\r\nUpgrade: foo\r\n\r\n".encode())
time.sleep(0.5)
try:
    print(s.recv(4096).split(b"\r\n")[0].decode())
    s.sendall(b"DELETE /repos/secret HTTP/1.1\r\nHost: api.test\r\n\r\n")
    time.sleep(0.5)
    print("after:", s.recv(4096))
except OSError as exc:
    print("cut:", type(exc).__name__)
"""


def test_a_plain_http_upgrade_on_a_host_with_rules_leaves_no_unjudged_bytes(world: SimpleNamespace) -> None:
    """The same smuggling as inside TLS, over plain HTTP: after a 101 no raw bytes may go on to a host with rules."""
    plain = plain_origin(world)
    (world.box.project / "plain_upgrade.py").write_text(PLAIN_UPGRADE)
    try:
        result = world.box.run(f"env -u PYTHONPATH /usr/bin/python3 plain_upgrade.py {plain.server_address[1]}", policy=policy(["GET /repos/**"]))
        control = world.box.run(
            f"curl -sS -o /dev/null -w 'get=%{{http_code}}' http://{HOST}:{plain.server_address[1]}/repos/ok", policy=policy(["GET /repos/**"])
        )
    finally:
        plain.shutdown()
    seen = plain.seen  # type: ignore[attr-defined]
    assert ("raw", "DELETE /repos/secret HTTP/1.1") not in seen, (seen, result)  # the attack failed
    assert ("GET", "/repos/up") in seen and ("GET", "/repos/ok") in seen, (seen, result)  # control: judged requests went through
    assert "get=200" in control.stdout, control


class ClZeroOrigin:
    """A plain-HTTP origin that reads no body it does not expect (CL.0): a GET's body, or a POST's to
    /static/, is read as the connection's next request. `seen`: every request it acted on."""

    def __init__(self) -> None:
        import socket

        self.seen: list[tuple[str, str]] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _address = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: object) -> None:
        import socket

        assert isinstance(conn, socket.socket)
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.lstrip(b"\r\n").decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                self.seen.append((method, path))
                fields = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
                length = int(fields.get("content-length", "0"))
                if method == "POST" and not path.startswith("/static/"):
                    while len(buffer) < length:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buffer += data
                    buffer = buffer[length:]
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")

    def close(self) -> None:
        self.server.close()


RAW_REQUESTS = r"""
import json, socket, sys
port, cases = int(sys.argv[1]), json.loads(sys.argv[2])
for method, path, content_type, body in cases:
    s = socket.create_connection(("127.0.0.1", 3128))
    data = body.encode()
    head = f"{method} http://api.test:{port}{path} HTTP/1.1\r\nHost: api.test:{port}\r\nContent-Length: {len(data)}\r\n"
    head += f"Content-Type: {content_type}\r\n" if content_type else ""
    s.sendall(head.encode() + b"\r\n" + data)
    answer = b""
    while b"\r\n" not in answer:
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    print(method, path, answer.split(b"\r\n")[0].decode() or "cut")
    s.close()
"""

SMUGGLED = "DELETE /items/1 HTTP/1.1\r\nHost: api.test\r\n\r\n"


def test_a_request_hidden_in_a_body_never_reaches_an_origin_that_would_run_it(world: SimpleNamespace) -> None:
    """ESCAPES 91: a GET with a body, or a body that starts with a request line, to an origin that does not read
    it (CL.0) ran the hidden DELETE unjudged. Each is refused; ordinary bodies and bodiless GETs go on."""
    origin = ClZeroOrigin()
    names = Path(world.box.env["STOCKADE_PROXY_TEST_RESOLVER"])
    table = json.loads(names.read_text())
    table["upstreams"].append(f"127.0.0.1:{origin.port}")
    names.write_text(json.dumps(table))
    (world.box.project / "raw_requests.py").write_text(RAW_REQUESTS)
    attacks = [["GET", "/public/a", "", SMUGGLED], ["POST", "/static/b", "text/plain", SMUGGLED], ["GET", "/public/c", "", "x=1"],
               ["POST", "/items", "text/plain", "\r\n" + SMUGGLED], ["POST", "/static/f", "text/plain", SMUGGLED.replace(" ", "\t")],
               ["POST", "/static/g", "text/plain", SMUGGLED.replace("/items/1", "/items/1?pad=" + "a" * 9000)],
               ["POST", "/static/h", "text/plain", SMUGGLED.replace("DELETE", "delete")], ["POST", "/static/i", "text/plain", "\r\n" * 40 + SMUGGLED],
               ["POST", "/static/j", "text/plain", SMUGGLED.replace("DELETE /", "DELETE ")]]  # fmt: skip
    controls = [["GET", "/public/d", "", ""], ["POST", "/items", "application/json", '{"name": "DELETE /items/1 HTTP/1.1"}'],
                ["POST", "/static/e", "text/plain", "plain text\nDELETE /items/1 HTTP/1.1\r\n"]]  # fmt: skip
    rules = policy(["GET /public/**", "POST /items", "POST /static/**"], ["DELETE /**"])
    try:
        result = world.box.run(
            f"env -u PYTHONPATH /usr/bin/python3 raw_requests.py {origin.port} '{json.dumps([*attacks, *controls])}'", policy=rules
        )
    finally:
        origin.close()
    lines = result.stdout.splitlines()
    statuses = [line.split(" ", 2)[2][:12] for line in lines]
    # refused by its head (403), or cut where the head went on before its body was read (a streamed body)
    assert all(status in ("HTTP/1.1 403", "cut") for status in statuses[: len(attacks)]), result
    assert statuses[len(attacks) :] == ["HTTP/1.1 200"] * 3, result
    assert not [entry for entry in origin.seen if entry[0].upper() == "DELETE"], origin.seen
    assert ("GET", "/public/d") in origin.seen and ("POST", "/items") in origin.seen and ("POST", "/static/e") in origin.seen


def test_a_method_override_in_a_body_is_judged_like_the_header(world: SimpleNamespace) -> None:
    """ESCAPES 90: Rack, Laravel and Symfony take `_method` from a POST's form (Laravel and Rails from JSON too)."""
    (world.box.project / "raw_requests.py").write_text(RAW_REQUESTS)
    form, multipart = "application/x-www-form-urlencoded", "multipart/form-data; boundary=b"
    attacks = [["POST", "/items", form, "name=x&_method=DELETE"], ["POST", "/items", "application/json", '{"_method": "delete"}'],
               ["POST", "/items", multipart, '--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'],
               ["POST", "/items", "", "_method=DELETE"], ["POST", "/items", form, ".method=DELETE"],
               ["POST", "/items", "text/plain; x=/json", '{"_method": "DELETE"}'], ["POST", "/items", form + ", text/plain", "_method=DELETE"],
               ["POST", "/items", 'multipart/form-data; boundary="b"', "--b\r\nContent-Disposition: form-data; name=_method\r\n\r\nDELETE\r\n--b--\r\n"],
               ["POST", "/items?.method=DELETE", "", ""],
               ["POST", "/items", "multipart/mixed; boundary=b", '--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'],
               ["POST", "/items", multipart, '--b\r\nContent-Disposition: form-data;\r\n name="_method"\r\n\r\nDELETE\r\n--b--\r\n']]  # fmt: skip
    controls = [["POST", "/items", form, "name=x&method=DELETE"], ["POST", "/items", "application/json", '{"name": "_method"}'],
                ["POST", "/items", form, "_method=POST"]]  # fmt: skip
    rules = policy(["GET /public/**", "POST /items"], ["DELETE /**"])
    plain = plain_origin(world)
    try:
        script = f"env -u PYTHONPATH /usr/bin/python3 raw_requests.py {plain.server_address[1]} '{json.dumps([*attacks, *controls])}'"
        result = world.box.run(script, policy=rules)
    finally:
        plain.shutdown()
    lines = result.stdout.splitlines()
    assert [line.split(" ", 2)[2][:12] for line in lines] == ["HTTP/1.1 403"] * len(attacks) + ["HTTP/1.1 200"] * 3, result
    assert plain.seen == [("POST", "/items")] * 3  # type: ignore[attr-defined]
