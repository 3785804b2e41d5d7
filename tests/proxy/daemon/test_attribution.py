"""Which process opened a connection: found among a process tree through /proc, its arguments bounded
and credentials redacted; nothing found where the socket is not the tree's."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from stockade.proxy.daemon import attribution

CLIENT = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(s.getsockname()[1], flush=True)
time.sleep(30)
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def _tree(port: int, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """sh -> python (the client), the shell being the tree's root; the client's own port."""
    script = f"{sys.executable} -c '{CLIENT}' {port} {' '.join(extra)}; true"
    root = subprocess.Popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE, text=True)
    assert root.stdout is not None
    return root, int(root.stdout.readline())


def test_the_process_holding_the_client_socket_is_named_with_its_parents(listener: socket.socket) -> None:
    root, port = _tree(listener.getsockname()[1], "--token=s3cret", "--password", "hunter2", "plain")
    try:
        conn, peer = listener.accept()
        found = attribution.Attributor(root.pid).who(peer)
        assert found is not None, "the client was not found"
        assert found["exe"] == __import__("os").path.realpath(sys.executable) and found["argv"][0] == sys.executable
        assert found["argv"][-4:] == ["--token=REDACTED", "--password", "REDACTED", "plain"]
        assert found["parents"] == [] or all("pid" in parent for parent in found["parents"])
        conn.close()
        outsider = socket.create_connection(listener.getsockname())  # this test's own socket: not the tree's
        conn, peer = listener.accept()
        assert attribution.Attributor(root.pid).who(peer) is None
        conn.close()
        outsider.close()
    finally:
        root.kill()
        root.wait()


def test_nothing_is_said_for_a_tree_that_is_gone(listener: socket.socket) -> None:
    root, port = _tree(listener.getsockname()[1])
    conn, peer = listener.accept()
    root.kill()
    subprocess.run(["pkill", "-f", f"create_connection.*{listener.getsockname()[1]}"], check=False)
    root.wait()
    time.sleep(0.2)
    assert attribution.Attributor(root.pid).who(peer) is None
    assert attribution.Attributor(4_000_000).who(("127.0.0.1", port)) is None
    conn.close()


def test_an_address_is_written_as_the_kernel_writes_it() -> None:
    assert attribution._hex_endpoint(socket.AF_INET, "127.0.0.1", 3128) == b"0100007F:0C38"
    assert attribution._hex_endpoint(socket.AF_INET6, "::1", 80) == b"00000000000000000000000001000000:0050"


def test_a_tree_past_the_budget_gets_no_process_and_costs_a_bounded_read(listener: socket.socket, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of descriptors: the lookup stops at BUDGET entries of /proc and names nothing."""
    root, port = _tree(listener.getsockname()[1])
    try:
        conn, peer = listener.accept()
        assert attribution.Attributor(root.pid).who(peer) is not None  # the control: within the budget, found
        reads = []
        real = attribution.os.readlink
        monkeypatch.setattr(attribution.os, "readlink", lambda path: reads.append(path) or real(path))
        monkeypatch.setattr(attribution, "BUDGET", 1)  # the tree alone is two entries
        assert attribution.Attributor(root.pid).who(peer) is None
        assert reads == []
        conn.close()
    finally:
        root.kill()
        root.wait()
