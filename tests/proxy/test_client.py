from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stockade.core.errors import SandboxSetupError
from stockade.core.locations import Locations
from stockade.proxy import client
from stockade.proxy.control import SessionSpec


def test_client_import_is_lean() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter(); import stockade.proxy.client; t = time.perf_counter() - t\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mitmproxy', 'rich', 'typer', 'psutil', 'subprocess'))\n"
        "print(heavy, t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ")
    assert out[0] == "[]"
    assert float(out[1]) < 0.2


def test_ticket_repr_hides_the_token() -> None:
    assert "tok" not in repr(client.SessionTicket(port=1, token="tok", session_id="s"))


def test_errors_are_setup_errors_and_oserrors() -> None:
    error = client.ProxyDaemonError("x")
    assert isinstance(error, SandboxSetupError) and isinstance(error, OSError)
    assert error.exit_code == 125


def test_runtime_dir_of_another_user_is_refused(fresh_locations: Callable[[str], Locations]) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to chown")
    locations = fresh_locations("stolen")
    locations.runtime.mkdir(parents=True)
    os.chown(locations.runtime, 65534, 65534)
    with pytest.raises(client.ProxyDaemonError, match="belongs to another user"):
        client.ensure_daemon(locations)


def test_loose_runtime_dir_is_tightened(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("loose")
    locations.runtime.mkdir(parents=True, mode=0o755)
    os.chmod(locations.runtime, 0o755)
    client.ensure_daemon(locations, idle_timeout=30)
    assert os.stat(locations.runtime).st_mode & 0o777 == 0o700


def test_register_end_and_errors(fresh_locations: Callable[[str], Locations], tmp_path: Path) -> None:
    locations = fresh_locations("api")
    port = client.ensure_daemon(locations, idle_timeout=30)
    spec = SessionSpec(session_id="one", command=["true"], cwd="/", allow=("allowed.test",), audit_path=str(tmp_path / "a.jsonl"))
    ticket = client.register_session(locations, spec)  # registration starts nothing new
    assert (ticket.port, ticket.session_id) == (port, "one") and ticket.token
    with pytest.raises(client.ProxyDaemonError, match="already registered"):
        client.register_session(locations, spec)
    with pytest.raises(client.ProxyDaemonError, match="wildcard"):
        client.register_session(locations, SessionSpec(session_id="bad", command=[], cwd="/", allow=("*",), audit_path=str(tmp_path / "b.jsonl")))
    assert client.end_session(locations, "one") == []
    with pytest.raises(client.ProxyDaemonError, match="unknown session"):
        client.end_session(locations, "one")


def test_register_starts_a_daemon_when_none_answers(fresh_locations: Callable[[str], Locations], tmp_path: Path) -> None:
    locations = fresh_locations("cold")
    spec = SessionSpec(session_id="cold", command=["true"], cwd="/", allow=(), audit_path=str(tmp_path / "a.jsonl"))
    ticket = client.register_session(locations, spec)
    assert ticket.port == client.ensure_daemon(locations)
    client.end_session(locations, "cold")


def test_stale_port_file_is_not_trusted(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("stale")
    locations.runtime.mkdir(parents=True, mode=0o700)
    (locations.runtime / "proxy.port").write_text('{"port": 1, "pid": 999999}')
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(locations.runtime / "proxy.sock"))  # a socket nobody answers on
    listener.close()
    port = client.ensure_daemon(locations, idle_timeout=30)
    assert port != 1


def test_read_ready() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"4242\n")
    assert client._read_ready(read_end) == b"4242"
    os.close(write_end)
    assert client._read_ready(read_end) == b""  # the daemon died before it was ready
    os.close(read_end)
