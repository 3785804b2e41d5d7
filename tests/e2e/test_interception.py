"""Every program through the filter (issue 36): clients that ignore HTTP_PROXY, and DNS answered inside.

With the proxy variables unset, real clients (curl --noproxy '*', Node's fetch
and https, Python's own socket with TLS) reach an allowed host through the
transparent door (bwrap/parts/interception.py, proxy/daemon/door.py), and the sandbox's
resolver (proxy/daemon/inside_dns.py) answers its name. Each refusal is the proxied
path's: recorded, with the summary's `stockade allow` line; a refused name is
never asked of any resolver. All against the loopback origins of NetWorld,
whose test resolver is the daemon's only way to a name.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.e2e.netfixtures import NetWorld, q, records, tagged

pytestmark = pytest.mark.e2e

UNSET = "unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy NO_PROXY no_proxy\nunset PYTHONPATH\n"

RAW_TLS = r"""
import socket, ssl, sys
host, port, sni = sys.argv[1], int(sys.argv[2]), sys.argv[3]
context = ssl.create_default_context(cafile=sys.argv[4])
context.check_hostname = False
try:
    with socket.create_connection((host, port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=sni) as tls:
            tls.sendall(f"GET /raw HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n".encode())
            print("raw", tls.recv(200).split(b"\r\n")[0].decode())
except Exception as error:
    print("raw-error", type(error).__name__)
"""

DNS_QUERY = r"""
import socket, struct, sys
name, kind, transport = sys.argv[1], int(sys.argv[2]), sys.argv[3]
server = next(line.split()[1] for line in open("/etc/resolv.conf") if line.split()[:1] == ["nameserver"])
question = b"".join(bytes([len(part)]) + part.encode() for part in name.split(".")) + b"\0" + struct.pack("!HH", kind, 1)
message = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + question
if transport == "tcp":
    with socket.create_connection((server, 53), timeout=5) as s:
        s.sendall(struct.pack("!H", len(message)) + message)
        reply = s.recv(4096)[2:]
else:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(message, (server, 53))
        reply = s.recv(4096)
flags, answers = struct.unpack("!H", reply[2:4])[0], struct.unpack("!H", reply[6:8])[0]
print(f"dns {name} {kind} {transport} rcode={flags & 0xF} answers={answers}")
"""


@pytest.fixture(scope="module")
def world(net_world: NetWorld) -> NetWorld:
    return net_world


def _dns(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {" ".join(line.split()[1:4]): " ".join(line.split()[4:]) for line in result.stdout.splitlines() if line.startswith("dns ")}


def test_clients_that_ignore_the_proxy_reach_an_allowed_host_through_the_filter(world: NetWorld) -> None:
    https_mark, http_mark = world.origins["https"].mark(), world.origins["http"].mark()
    node = shutil.which("node") is not None
    script = (
        UNSET
        + f"""
curl --noproxy '*' -sS --cacert "$CA" "https://allowed.test:$SP/curl"; printf "\\ncurl=%s\\n" $?
curl --noproxy '*' -sS "http://allowed.test:$HP/plain"; printf "\\nplain=%s\\n" $?
getent hosts allowed.test | sed 's/^/getent /'
"$PY" -c {q(RAW_TLS)} allowed.test "$SP" allowed.test "$CA"
"""
    )
    if node:
        script += """
export NODE_EXTRA_CA_CERTS="$CA"
node -e 'fetch("https://allowed.test:" + process.argv[1] + "/fetch").then(r => r.text()).then(t => console.log("fetch", t.trim()), e => console.log("fetch-error", e.cause && e.cause.code))' "$SP"
node -e 'require("https").get("https://allowed.test:" + process.argv[1] + "/get", r => { let b = ""; r.on("data", d => b += d); r.on("end", () => console.log("get", b.trim())); }).on("error", e => console.log("get-error", e.code))' "$SP"
"""
    result = world.run(script, tag="through", timeout=120)
    out = result.stdout
    assert "hello from allowed-https /curl" in out and tagged(result, "curl") == ["0"], result
    assert "hello from allowed-http /plain" in out and tagged(result, "plain") == ["0"], result
    assert any(line.startswith("getent 198.18.") and "allowed.test" in line for line in out.splitlines()), out
    assert "raw HTTP/1.1 200" in out, out
    if node:
        assert "fetch hello from allowed-https /fetch" in out and "get hello from allowed-https /get" in out, result
    seen_https, _ = world.origins["https"].since(https_mark)
    assert {"/curl", "/raw", *(["/fetch", "/get"] if node else [])} <= {s.path for s in seen_https}
    assert [s.path for s in world.origins["http"].since(http_mark)[0]] == ["/plain"]
    found = records(world.audit_path("through"))
    assert any(r["scheme"] == "dns" and r["host"] == "allowed.test" and r["decision"] == "allow" for r in found), found
    assert any(r["host"] == "allowed.test" and r["decision"] == "allow" and r["scheme"] in ("tls", "http") for r in found), found


def test_refused_names_addresses_and_record_types_get_nothing_and_each_is_recorded(world: NetWorld) -> None:
    denied_mark, tls_mark = world.origins["denied"].mark(), world.origins["denied_tls"].mark()
    queries_before = world.queries.read_text()
    script = (
        UNSET
        + f"""
curl --noproxy '*' -sS -m5 "http://denied.test:$DP/"; echo "denied_name=$?"
curl --noproxy '*' -sS -m5 "http://198.51.100.1:80/"; echo "ip_literal=$?"
curl --noproxy '*' -sS -m5 "http://198.18.200.200:80/"; echo "never_given=$?"
"$PY" -c {q(RAW_TLS)} allowed.test "$SP" denied.test "$CA"
"$PY" -c {q(DNS_QUERY)} allowed.test 16 udp
"$PY" -c {q(DNS_QUERY)} allowed.test 28 udp
"$PY" -c {q(DNS_QUERY)} tunnel.denied.test 16 udp
"$PY" -c {q(DNS_QUERY)} allowed.test 1 tcp
"$PY" -c {q(DNS_QUERY)} x.exfil.denied.test 1 tcp
"""
    )
    result = world.run(script, tag="refused", timeout=120)
    assert tagged(result, "denied_name") == ["6"], result  # curl: could not resolve host
    assert tagged(result, "ip_literal") != ["0"] and tagged(result, "never_given") != ["0"], result
    assert "raw HTTP" not in result.stdout, result  # an SNI other than the name connected to: cut
    dns = _dns(result)
    assert dns["allowed.test 16 udp"] == "rcode=0 answers=0" and dns["allowed.test 28 udp"] == "rcode=0 answers=0", dns
    assert dns["tunnel.denied.test 16 udp"] == "rcode=3 answers=0", dns
    assert dns["allowed.test 1 tcp"] == "rcode=0 answers=1" and dns["x.exfil.denied.test 1 tcp"] == "rcode=3 answers=0", dns
    assert "stockade allow denied.test" in result.stderr and "stockade allow 198.51.100.1" in result.stderr, result.stderr
    assert "network: the sandbox's resolver answered 1 name and refused 3;" in result.stderr, result.stderr  # counted too
    found = records(world.audit_path("refused"))
    denied = {(r["scheme"], r["host"]) for r in found if r["decision"] == "deny"}
    assert {("dns", "denied.test"), ("dns", "tunnel.denied.test"), ("dns", "x.exfil.denied.test")} <= denied, denied
    assert any(host == "198.51.100.1" for _scheme, host in denied) and any(host == "198.18.200.200" for _s, host in denied), denied
    # Nothing reached the refused origins, and no refused name was asked of any resolver.
    assert world.origins["denied"].since(denied_mark) == ([], 0) and world.origins["denied_tls"].since(tls_mark) == ([], 0)
    asked = world.queries.read_text()[len(queries_before) :]
    assert "denied.test" not in asked and "exfil" not in asked, asked


def test_a_program_that_never_uses_the_network_sees_the_same_sandbox(world: NetWorld) -> None:
    """Control: interception changes nothing for a command's own loopback servers."""
    script = (
        UNSET
        + """
"$PY" -c 'import socket; s = socket.create_server(("127.0.0.1", 0)); c = socket.create_connection(s.getsockname(), 3); a, _ = s.accept(); a.sendall(b"own"); print("loopback", c.recv(3).decode())'
"""
    )
    result = world.run(script, tag="own", timeout=60)
    assert "loopback own" in result.stdout and result.returncode == 0, result


def test_bytes_sent_behind_a_refused_connection_are_never_served(world: NetWorld) -> None:
    """Hostile review: a direct connection to a refused address that sends a CONNECT to an allowed
    host (and a request) at once; nothing of it may reach the allowed origin."""
    http_mark = world.origins["http"].mark()
    script = (
        UNSET
        + """
"$PY" - "$HP" <<'PY'
import socket, sys
s = socket.create_connection(("10.9.9.9", 80), 5)
s.sendall(f"CONNECT allowed.test:{sys.argv[1]} HTTP/1.1\\r\\n\\r\\nGET /smuggled HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n".encode())
s.settimeout(3)
try:
    print("got", s.recv(100))
except OSError as error:
    print("got", type(error).__name__)
PY
curl --noproxy '*' -sS "http://xn--bcher-kva.wild.test:$WP/idn"; printf "\\nidn=%s\\n" $?
"""
    )
    result = world.run(script, tag="smuggle", timeout=60)
    assert "got b''" in result.stdout or "got ConnectionResetError" in result.stdout, result
    assert "/smuggled" not in [s.path for s in world.origins["http"].since(http_mark)[0]]
    found = records(world.audit_path("smuggle"))
    assert any(r["host"] == "10.9.9.9" and r["decision"] == "deny" for r in found), found
    assert any(r["host"] == "xn--bcher-kva.wild.test" and r["scheme"] != "dns" for r in found), found  # judged, by its ASCII name


UDP_CLIENT = r"""
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
family = socket.AF_INET6 if ":" in host else socket.AF_INET
started = time.monotonic()
with socket.socket(family, socket.SOCK_DGRAM) as client:
    try:
        client.sendto(b"\xc0quic initial", (host, port))
        print("udp sent")
    except OSError as error:
        print("udp", type(error).__name__, round((time.monotonic() - started) * 1000))
"""

QUIC_FIRST = r"""
import sys
import niquests
host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with niquests.Session(quic_cache_layer={(host, port): ("", port)}, disable_ipv6=True, timeout=10) as session:
    response = session.get(f"https://{host}:{port}/quic-first", verify=ca)
    print("quic-first", response.status_code, response.http_version, response.text.strip())
"""


def test_udp_and_ping_are_refused_at_once_recorded_and_said(world: NetWorld) -> None:
    """UDP other than DNS, and ICMP echo, never leave the sandbox: the sender is refused at once (so a
    QUIC client falls back to TCP without waiting), each refusal is recorded and the summary says why."""
    script = (
        UNSET
        + """
"$PY" -c {udp} allowed.test "$SP"
"$PY" -c {udp} 203.0.113.9 4500
ping -c 1 -W 2 allowed.test >/dev/null 2>ping.err; printf "ping=%s\\n" $?; sed 's/^/ping-said /' ping.err
"$PY" -c {udp} 127.0.0.1 "$UDP_PORT"
""".format(udp=q(UDP_CLIENT))
    )
    result = world.run(script, tag="udp", timeout=120)
    out = result.stdout
    udp_lines = [line.split() for line in out.splitlines() if line.startswith("udp ")]
    assert [line[1] for line in udp_lines[:2]] == ["PermissionError", "PermissionError"], result
    assert all(int(line[2]) < 1000 for line in udp_lines[:2]), udp_lines  # at once: no timeout to wait out
    assert udp_lines[2] == ["udp", "sent"], result  # control: the sandbox's own loopback takes UDP
    if shutil.which("ping"):
        assert tagged(result, "ping") != ["0"] and "ping-said" in out, result
    found = records(world.audit_path("udp"))
    refused = {(r["scheme"], r["host"], r["port"]) for r in found if r["decision"] == "deny" and r["scheme"] in ("udp", "icmp")}
    assert ("udp", "allowed.test", int(world.origins["https"].port)) in refused and ("udp", "203.0.113.9", 4500) in refused, found
    assert ("icmp", "allowed.test", 0) in refused or not shutil.which("ping"), found
    assert "UDP does not leave the sandbox" in result.stderr and "network: denied 203.0.113.9:4500" in result.stderr, result.stderr
    if shutil.which("ping"):
        assert "network: denied allowed.test (ping (ICMP echo) does not leave the sandbox" in result.stderr, result.stderr


@pytest.fixture(scope="module")
def quic_python(world: NetWorld) -> str:
    """A Python with niquests, in a venv of its own: niquests' urllib3-future installs a .pth file that
    replaces urllib3 and imports shutil at every start of the interpreter it is installed in, so it
    stays out of the project's venv (tests/cli/test_lean_path.py would see it). It lives in the world's
    project, which every sandbox of the world sees (a checkout under /var/tmp is private inside)."""
    folder = world.box.project / ".quic-client"
    python = folder / "bin" / "python"
    if not python.exists():
        try:
            subprocess.run(["/usr/bin/python3", "-m", "venv", str(folder)], check=True, capture_output=True, timeout=120)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "niquests>=3.11"], check=True, capture_output=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as error:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip(f"niquests could not be installed from the package index: {error}")
    return str(python)


def test_a_quic_first_client_falls_back_to_tcp_through_the_filter(world: NetWorld, quic_python: str) -> None:
    """niquests told the host speaks HTTP/3 tries QUIC first; refused at once, it goes on over TCP."""
    mark = world.origins["https"].mark()
    script = UNSET + f'{q(quic_python)} -c {q(QUIC_FIRST)} allowed.test "$SP" "$CA"\n'
    result = world.run(script, tag="quic", timeout=120)
    assert "quic-first 200" in result.stdout and "hello from allowed-https /quic-first" in result.stdout, result
    assert "/quic-first" in {s.path for s in world.origins["https"].since(mark)[0]}
    found = records(world.audit_path("quic"))
    assert any(r["scheme"] == "udp" and r["host"] == "allowed.test" for r in found), found  # it did try QUIC first


def test_an_ipv6_literal_is_judged_and_refused_like_any_address(world: NetWorld) -> None:
    """No more ENETUNREACH and silence: an IPv6 address reaches the filter, which refuses what the policy
    does not list, with the same record and `stockade allow` line as an IPv4 one."""
    script = UNSET + """curl --noproxy '*' -sS -m 10 "http://[2001:db8::5]:8080/six" >/dev/null 2>&1; printf "six=%s\\n" $?\n"""
    result = world.run(script, tag="six", timeout=120)
    assert tagged(result, "six") != ["0"], result
    found = records(world.audit_path("six"))
    assert any(r["decision"] == "deny" and r["host"] in ("2001:db8::5", "[2001:db8::5]") and r["port"] == 8080 for r in found), found
    assert "2001:db8::5" in result.stderr and "stockade allow" in result.stderr, result.stderr
    assert "IPv6 address, which the sandbox has no route for" not in result.stderr, result.stderr


GO_CLIENT = """package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// A client with its own transport and no proxy at all, and Go's own resolver (CGO_ENABLED=0).
func main() {
	pem, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Println("go-error", err)
		return
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	response, err := client.Get(os.Args[1])
	if err != nil {
		fmt.Println("go-error", err)
		return
	}
	body, _ := io.ReadAll(response.Body)
	fmt.Println("go", response.StatusCode, strings.TrimSpace(string(body)))
}
"""


def test_a_go_client_with_its_own_transport_and_resolver_goes_through_the_filter(world: NetWorld) -> None:
    """Go's net/http with Proxy: nil and its pure-Go resolver: answered inside, judged by the filter; a
    refused host gets the same record and line as a proxied request."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed (Debian: golang-go; .ci/run installs it)")
    folder = world.box.project / ".go-probe"
    folder.mkdir(exist_ok=True)
    (folder / "main.go").write_text(GO_CLIENT)
    build_env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "GOCACHE": str(folder / "cache"), "GOPATH": str(folder / "path"), "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", "probe", "main.go"], cwd=folder, env=build_env, check=True, capture_output=True, timeout=300)
    mark = world.origins["https"].mark()
    script = UNSET + ('"$P/.go-probe/probe" "https://allowed.test:$SP/go" "$CA"\n"$P/.go-probe/probe" "https://denied.test:$DSP/go" "$CA"\n')
    result = world.run(script, tag="go", timeout=120)
    lines = [line for line in result.stdout.splitlines() if line.startswith("go")]
    assert lines[0] == "go 200 hello from allowed-https /go", result
    assert lines[1].startswith("go-error"), result  # refused: the connection is closed before any TLS
    assert "/go" in {s.path for s in world.origins["https"].since(mark)[0]}
    found = records(world.audit_path("go"))
    assert any(r["host"] == "denied.test" and r["decision"] == "deny" for r in found), found
    assert "denied.test" in result.stderr and "stockade allow denied.test" in result.stderr, result.stderr


def test_the_network_namespaces_settings_stay_read_only(world: NetWorld) -> None:
    """ESCAPES 95, hostile review 16: run as root, the command owned its network namespace's sysctls
    (it could let itself bind port 53 on any address); now /proc/sys is read-only inside."""
    script = (
        "(echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start) 2>/dev/null && echo WROTE-NET\ncat /proc/sys/net/ipv4/ip_unprivileged_port_start\n"
    )
    result = world.run(script, tag="sysctl", timeout=60)
    assert "WROTE-NET" not in result.stdout and result.stdout.split()[-1:] == ["1024"], result


FIRE_AND_FORGET = r"""
import socket, struct
server = next(line.split()[1] for line in open("/etc/resolv.conf") if line.split()[:1] == ["nameserver"])
question = b"".join(bytes([len(part)]) + part.encode() for part in "secret.denied.test".split(".")) + b"\0" + struct.pack("!HH", 1, 1)
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.sendto(struct.pack("!HHHHHH", 0x4321, 0x0100, 1, 0, 0, 0) + question, (server, 53))
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    try:
        s.sendto(b"beacon", ("203.0.113.5", 5))
    except OSError:
        pass
print("gone")
"""


def test_what_a_quick_command_did_before_a_cold_daemon_answered_is_recorded(world: NetWorld) -> None:
    """Hostile review 16: a command that sent a DNS query and a refused datagram and ended before the
    daemon it started answered left no record; the run now waits for the answer when anything is
    queued for the daemon, and the daemon reads what is left when the session ends."""
    box = world.fresh_box()
    result = world.run(UNSET + f'"$PY" -c {q(FIRE_AND_FORGET)}\n', tag="coldquick", box=box, timeout=120)
    assert "gone" in result.stdout, result
    found = records(world.audit_path("coldquick", box))
    denied = {(r["scheme"], r["host"]) for r in found if r["decision"] == "deny"}
    assert ("dns", "secret.denied.test") in denied and ("udp", "203.0.113.5") in denied, found
