from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from stockade.core.errors import SandboxSetupError
from stockade.core.locations import Locations
from stockade.proxy.client import launch
from stockade.proxy.control import MAX_LINE, DaemonFiles


def test_errors_are_setup_errors_and_oserrors() -> None:
    error = launch.ProxyDaemonError("x")
    assert isinstance(error, SandboxSetupError) and isinstance(error, OSError)
    assert error.exit_code == 125


def test_runtime_dir_of_another_user_is_refused(fresh_locations: Callable[[str], Locations]) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to chown")
    locations = fresh_locations("stolen")
    locations.runtime.mkdir(parents=True)
    os.chown(locations.runtime, 65534, 65534)
    with pytest.raises(launch.ProxyDaemonError, match="belongs to another user"):
        launch.ensure_daemon(locations)


def test_loose_runtime_dir_is_tightened(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("loose")
    locations.runtime.mkdir(parents=True, mode=0o755)
    os.chmod(locations.runtime, 0o755)
    launch.ensure_daemon(locations, idle_timeout=30)
    assert os.stat(locations.runtime).st_mode & 0o777 == 0o700


def test_stale_port_file_is_not_trusted(fresh_locations: Callable[[str], Locations]) -> None:
    locations = fresh_locations("stale")
    locations.runtime.mkdir(parents=True, mode=0o700)
    (locations.runtime / "proxy.port").write_text('{"port": 1, "pid": 999999}')
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(locations.runtime / "proxy.sock"))  # a socket nobody answers on
    listener.close()
    port = launch.ensure_daemon(locations, idle_timeout=30)
    assert port != 1


def test_read_ready() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"4242\n")
    assert launch._read_ready(read_end) == b"4242"
    os.close(write_end)
    assert launch._read_ready(read_end) == b""  # the daemon died before it was ready
    os.close(read_end)


def test_ping_without_a_daemon_is_none(tmp_path: Path) -> None:
    files = DaemonFiles(runtime=str(tmp_path / "run"), state=str(tmp_path / "state"))
    assert launch.ping_or_hung(files) == (None, False)
    os.mkdir(files.runtime)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(files.socket))
    listener.listen(1)  # accepts, never answers: hung
    with listener:
        assert launch.ping_or_hung(files) == (None, True)


@pytest.mark.parametrize(
    "sent, error",
    [
        pytest.param(b'{"ok": true}\n', None, id="one object"),
        pytest.param(b"[1]\n", "malformed reply", id="not an object"),
        pytest.param(b"x" * (MAX_LINE + 1), "oversized reply", id="too long"),
        pytest.param(b'{"ok": tr', "closed the control connection", id="cut short"),
    ],
)
def test_read_reply(sent: bytes, error: str | None) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:

        def write() -> None:
            with contextlib.suppress(OSError):  # the reader may stop before the end of a long reply
                theirs.sendall(sent)
                theirs.shutdown(socket.SHUT_WR)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()  # a long reply does not fit the socket buffer: written while it is read
        if error is None:
            assert launch.read_reply(ours) == {"ok": True}
        else:
            with pytest.raises(OSError, match=error):
                launch.read_reply(ours)


def test_read_reply_takes_one_line_and_leaves_the_next() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b'{"n": 1}\n{"n": 2}\n')
        assert launch.read_reply(ours) == {"n": 1}  # type: ignore[arg-type]
        assert launch.read_reply(ours) == {"n": 2}  # type: ignore[arg-type]
