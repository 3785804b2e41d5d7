"""The gate against a small fake engine: what reaches the engine, and exactly that."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stockade.containers import gate as gate_module
from stockade.containers import wire
from stockade.containers.gate import LABEL, Gate


class FakeEngine:
    """Records each request (method, target, headers, body) and answers as `answer` says."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.containers: list[dict[str, object]] = []
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(path)
        self.server.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            reader = wire.Reader(conn)
            raw = reader.head()
            if raw is None:
                return
            head = wire.Head(raw)
            method, target = wire.request_line(head)
            body = wire.read_body(reader, head, 1 << 20)
            self.requests.append((method, target, {k.lower(): v for k, v in head.headers}, body))
            if target.endswith("/start") and head.get("Upgrade") == "tcp":
                conn.sendall(b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n" + reader.take().upper())
                while data := conn.recv(4096):
                    conn.sendall(data.upper())
                return
            if target.startswith("/containers/json"):
                conn.sendall(wire.json_response(200, "OK", self.containers))
            elif target.startswith("/volumes?"):
                conn.sendall(wire.json_response(200, "OK", {"Volumes": []}))
            elif method == "POST" and "/containers/create" in target:
                conn.sendall(wire.json_response(201, "Created", {"Id": "c" * 64, "Warnings": []}))
            elif method == "GET" and target.startswith("/images/"):
                conn.sendall(wire.json_response(404, "Not Found", {"message": "no such image"}))
            elif method == "GET" and target.startswith("/containers/") and target.endswith("/json"):
                conn.sendall(wire.json_response(200, "OK", {"State": {"Running": True}}))
            elif method == "DELETE":
                conn.sendall(wire.encode_head("HTTP/1.1 204 No Content", [("Connection", "close")]))
            else:
                conn.sendall(wire.json_response(200, "OK", {"ok": True}))

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[FakeEngine, Gate]]:
    engine = FakeEngine(str(tmp_path / "engine.sock"))
    gate = Gate(engine.path, str(tmp_path / "gate" / "docker.sock"), "sess1", ("localhost/*",), False)
    gate.start()
    yield engine, gate
    gate.close()
    engine.close()


def _send(gate: Gate, data: bytes, then: bytes = b"") -> bytes:
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(10)
    folder = os.open(os.path.dirname(gate.listen), os.O_RDONLY | os.O_DIRECTORY)
    try:  # a path past AF_UNIX's bound, reached as the gate bound it
        client.connect(f"/proc/self/fd/{folder}/{os.path.basename(gate.listen)}")
    finally:
        os.close(folder)
    client.sendall(data)
    if then:
        client.sendall(then)
    client.shutdown(socket.SHUT_WR) if not then else None
    found = b""
    while chunk := client.recv(4096):
        found += chunk
    client.close()
    return found


def test_a_second_request_on_one_connection_never_reaches_the_engine(setup: tuple[FakeEngine, Gate]) -> None:
    engine, gate = setup
    answer = _send(gate, b"GET /_ping HTTP/1.1\r\nHost: d\r\n\r\nDELETE /containers/foreign?force=1 HTTP/1.1\r\nHost: d\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200")
    assert [(method, target) for method, target, _h, _b in engine.requests] == [("GET", "/_ping")]
    assert engine.requests[0][2]["connection"] == "close"


def test_a_create_is_judged_labelled_and_remembered(setup: tuple[FakeEngine, Gate]) -> None:
    engine, gate = setup
    body = json.dumps({"Image": "localhost/x:1", "Cmd": ["true"], "HostConfig": {"NetworkMode": "default"}}).encode()
    answer = _send(gate, b"POST /v1.41/containers/create?name=web HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert answer.startswith(b"HTTP/1.1 201")
    sent = json.loads(engine.requests[-1][3])
    assert sent["Labels"] == {LABEL: "sess1"} and sent["HostConfig"]["NetworkMode"] == "none"
    assert gate.containers == {"c" * 64: "web"}
    engine.containers = [{"Id": "c" * 64}, {"Id": "d" * 64}]  # the host's own is left out of the list
    listed = _send(gate, b"GET /containers/json?all=1 HTTP/1.1\r\nHost: d\r\n\r\n")
    assert json.loads(listed.split(b"\r\n\r\n", 1)[1]) == [{"Id": "c" * 64}]
    gate.close()
    assert ("DELETE", f"/containers/{'c' * 64}?force=true&v=true") in [(m, t) for m, t, _h, _b in engine.requests]


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1]", json.dumps({"Image": "localhost/x", "HostConfig": {"SecurityOpt": 1}}).encode(),
     json.dumps({"Image": "localhost/x", "Labels": ["a"]}).encode(), json.dumps({"Image": "localhost/x", "HostConfig": []}).encode()],
)  # fmt: skip
def test_a_malformed_create_is_refused_and_never_forwarded(setup: tuple[FakeEngine, Gate], body: bytes) -> None:
    engine, gate = setup
    answer = _send(gate, b"POST /containers/create HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert answer.startswith(b"HTTP/1.1 403") and b'"message": "stockade: ' in answer
    assert not any("/containers/create" in target for _m, target, _h, _b in engine.requests)


def test_a_chunked_body_is_forwarded_framed_and_whole(setup: tuple[FakeEngine, Gate]) -> None:
    engine, gate = setup
    gate.containers["a" * 64] = "box"
    request = b"PUT /containers/box/archive?path=/ HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ntar!\r\n3\r\nred\r\n0\r\n\r\n"
    assert _send(gate, request).startswith(b"HTTP/1.1 200")
    method, target, headers, body = engine.requests[-1]
    assert (method, target, body) == ("PUT", f"/containers/{'a' * 64}/archive?path=/", b"tar!red") and headers["transfer-encoding"] == "chunked"


def test_an_exec_start_becomes_a_stream_both_ways(setup: tuple[FakeEngine, Gate]) -> None:
    engine, gate = setup
    gate.execs.add("e1")
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(10)
    client.connect(gate.listen)
    body = b'{"Detach":false}'
    client.sendall(
        b"POST /exec/e1/start HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    client.sendall(b"hello")
    found = b""
    while b"HELLO" not in found:
        found += client.recv(4096)
    client.close()
    assert found.startswith(b"HTTP/1.1 101")


def test_calls_on_what_the_run_did_not_make_are_not_found(setup: tuple[FakeEngine, Gate]) -> None:
    engine, gate = setup
    for request in (b"POST /containers/other/start", b"GET /exec/x/json", b"DELETE /volumes/v", b"POST /containers/ccc/kill"):
        assert _send(gate, request + b" HTTP/1.1\r\nHost: d\r\n\r\n").startswith(b"HTTP/1.1 404")
    assert engine.requests == []


def test_an_engine_that_is_not_there_is_a_502_with_a_line(tmp_path: Path) -> None:
    gate = Gate(str(tmp_path / "missing.sock"), str(tmp_path / "g" / "docker.sock"), "s", (), False)
    gate.start()
    try:
        answer = _send(gate, b"GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n")
    finally:
        gate.close()
    assert answer.startswith(b"HTTP/1.1 502") and b"not answering at" in answer


def test_sweep_removes_only_what_dead_runs_left(tmp_path: Path) -> None:
    engine = FakeEngine(str(tmp_path / "engine.sock"))
    try:
        engine.containers = [{"Id": "1" * 64, "Labels": {LABEL: "dead"}}, {"Id": "2" * 64, "Labels": {LABEL: "alive"}}]
        assert gate_module.sweep(engine.path, lambda session: session == "alive") == 1
        deleted = [target for method, target, _h, _b in engine.requests if method == "DELETE"]
        assert deleted == [f"/containers/{'1' * 64}?force=true&v=true"]
    finally:
        engine.close()


def test_podman_s_containers_join_the_sandbox_s_network_and_show_their_ports_on_its_loopback(tmp_path: Path) -> None:
    engine = FakeEngine(str(tmp_path / "engine.sock"))
    deep = tmp_path / ("d" * 60) / ("e" * 60)  # past AF_UNIX's 108 bytes: bound through the folder's descriptor
    gate = Gate(engine.path, str(deep / "docker.sock"), "s", ("localhost/*",), False, kind="podman")
    gate.start()
    gate.attach(4242)
    try:
        body = json.dumps(
            {"Image": "localhost/web", "ExposedPorts": {"80/tcp": {}}, "HostConfig": {"PortBindings": {"5432/tcp": [{"HostPort": ""}]}}}
        ).encode()
        assert _send(gate, b"POST /containers/create HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)).startswith(
            b"HTTP/1.1 201"
        )
        sent = json.loads(engine.requests[-1][3])["HostConfig"]
        assert sent["NetworkMode"] == "ns:/proc/4242/ns/net" and "PortBindings" not in sent
        inspected = gate._inspected({"Id": "c" * 64, "Config": {"ExposedPorts": {"80/tcp": {}}}, "NetworkSettings": {"Ports": {}}})
        assert inspected["NetworkSettings"]["Ports"] == {
            "80/tcp": [{"HostIp": "127.0.0.1", "HostPort": "80"}], "5432/tcp": [{"HostIp": "127.0.0.1", "HostPort": "5432"}],
        }  # fmt: skip
    finally:
        gate.close()
        engine.close()


def test_docker_s_containers_have_no_network_and_published_ports_are_refused(setup: tuple[FakeEngine, Gate]) -> None:
    engine, gate = setup
    body = json.dumps({"Image": "localhost/web", "HostConfig": {"PortBindings": {"80/tcp": [{"HostPort": "8080"}]}}}).encode()
    answer = _send(gate, b"POST /containers/create HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert answer.startswith(b"HTTP/1.1 403") and b"published ports" in answer


def test_a_request_hidden_behind_a_bare_line_feed_never_reaches_the_engine(setup: tuple[FakeEngine, Gate]) -> None:
    engine, gate = setup
    body = b'{"Image":"localhost/x","HostConfig":{"Privileged":true}}'
    hidden = b"POST /v1.41/containers/create HTTP/1.1\nHost: d\nContent-Type: application/json\nContent-Length: %d\n\n%s" % (len(body), body)
    answer = _send(gate, b"GET /_ping HTTP/1.1\r\nX: a\n\n" + hidden + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400") and engine.requests == []


def test_after_a_refused_exec_start_nothing_more_reaches_the_engine(tmp_path: Path) -> None:
    """The client's bytes after its request go to the engine only once the engine switched to a stream."""
    received: list[bytes] = []
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "engine.sock"))
    server.listen(4)

    def engine() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            conn.sendall(wire.json_response(400, "Bad Request", {"message": "bad exec"}))
            try:
                while more := conn.recv(4096):
                    received.append(more)
            except OSError:
                pass

    thread = threading.Thread(target=engine, daemon=True)
    thread.start()
    gate = Gate(str(tmp_path / "engine.sock"), str(tmp_path / "g" / "docker.sock"), "s", (), False)
    gate.start()
    gate.execs.add("e1")
    try:
        answer = _send(
            gate, b"POST /exec/e1/start HTTP/1.1\r\nHost: d\r\nContent-Length: 2\r\n\r\n{}GET /containers/hostctr/json HTTP/1.1\r\nHost: d\r\n\r\n"
        )
    finally:
        gate.close()
        thread.join(timeout=10)
        server.close()
    assert answer.startswith(b"HTTP/1.1 400") and b"hostctr" not in b"".join(received)


def test_idle_connections_cannot_take_the_gate_down(setup: tuple[FakeEngine, Gate], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, gate = setup
    monkeypatch.setattr(gate_module, "REQUEST_TIMEOUT", 0.5)
    idle = []
    for _ in range(gate_module.MAX_CALLS + 20):
        client = socket.socket(socket.AF_UNIX)
        client.connect(gate.listen)
        idle.append(client)
    try:
        assert _send(gate, b"GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n").startswith(b"HTTP/1.1 200")  # once the idle ones timed out
    finally:
        for client in idle:
            client.close()


def test_a_create_still_in_flight_when_the_run_ends_is_removed(tmp_path: Path) -> None:
    engine = FakeEngine(str(tmp_path / "engine.sock"))
    original = engine._one

    def slow(conn: socket.socket) -> None:
        time.sleep(0.5)  # every answer late: the run ends while the create waits
        original(conn)

    engine._one = slow  # type: ignore[method-assign]
    gate = Gate(engine.path, str(tmp_path / "g" / "docker.sock"), "s", ("localhost/*",), False)
    gate.start()
    body = json.dumps({"Image": "localhost/x:1"}).encode()
    sender = threading.Thread(
        target=_send, args=(gate, b"POST /containers/create HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    )
    sender.start()
    time.sleep(0.8)  # the image looked up (late), the create sent and not answered yet
    gate.close()
    sender.join(timeout=10)
    engine.close()
    assert ("DELETE", f"/containers/{'c' * 64}?force=true&v=true") in [(m, t) for m, t, _h, _b in engine.requests]


def test_a_kept_container_gets_no_network(tmp_path: Path) -> None:
    """Started again after the run, it would join the namespace of a pid long gone, perhaps another's."""
    engine = FakeEngine(str(tmp_path / "engine.sock"))
    gate = Gate(engine.path, str(tmp_path / "g" / "docker.sock"), "s", ("localhost/*",), True, kind="podman")
    gate.start()
    gate.attach(4242)
    try:
        body = json.dumps({"Image": "localhost/x:1"}).encode()
        assert _send(gate, b"POST /containers/create HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)).startswith(
            b"HTTP/1.1 201"
        )
        sent = json.loads(engine.requests[-1][3])
        assert sent["HostConfig"]["NetworkMode"] == "none" and sent["Labels"] == {"io.stockade.kept": "s"}
    finally:
        gate.close()
        engine.close()


def test_top_s_ps_arguments_are_not_forwarded(setup: tuple[FakeEngine, Gate]) -> None:
    """Docker runs ps on the host with them."""
    engine, gate = setup
    gate.containers["a" * 64] = "box"
    assert _send(gate, b"GET /containers/box/top?ps_args=-ef HTTP/1.1\r\nHost: d\r\n\r\n").startswith(b"HTTP/1.1 403")
    assert _send(gate, b"GET /containers/box/top HTTP/1.1\r\nHost: d\r\n\r\n").startswith(b"HTTP/1.1 200")  # control
    assert [target for _m, target, _h, _b in engine.requests] == [f"/containers/{'a' * 64}/top"]


def test_a_run_makes_a_bounded_number_of_execs(setup: tuple[FakeEngine, Gate], monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine leaves a process on the host for each exec (podman 4.3): a loop of them is bounded."""
    engine, gate = setup
    monkeypatch.setattr(gate_module, "MAX_EXECS", 1)
    gate.containers["a" * 64] = "box"
    gate.execs.add("e0")
    body = b'{"Cmd": ["true"]}'
    answer = _send(gate, b"POST /containers/box/exec HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert answer.startswith(b"HTTP/1.1 403") and b"at most 1 execs" in answer and engine.requests == []
