"""The run's Bridge to the proxy daemon, with a fake client module: open, attach the sandbox's listener, close."""

from __future__ import annotations

import os
import socket
import struct
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

import stockade.proxy
from stockade.bwrap import network
from stockade.bwrap.netns import PROXY_PORT


class FakeClient(ModuleType):
    """Stands in for stockade.proxy.client: records each call, no daemon."""

    def __init__(self) -> None:
        super().__init__("stockade.proxy.client")
        self.calls: list[tuple[Any, ...]] = []
        self.attached: list[tuple[str, socket.socket, int]] = []
        self.ending = SimpleNamespace(denials=[{"host": "evil.example"}], trouble="the daemon died", refused="2 refused")

    def open_session_with(self, locations: object, session_id: str, command: list[str], cwd: str, rules: dict[str, object]) -> None:
        self.calls.append(("open", locations, session_id, command, cwd, rules))

    def attach_listener(self, session_id: str, listener: socket.socket) -> None:
        self.attached.append((session_id, listener, listener.fileno()))

    def close_session(self, locations: object, session_id: str) -> SimpleNamespace:
        self.calls.append(("close", locations, session_id))
        return self.ending


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    fake = FakeClient()
    monkeypatch.setitem(sys.modules, "stockade.proxy.client", fake)
    monkeypatch.setattr(stockade.proxy, "client", fake, raising=False)
    return fake


def bridge() -> network.Bridge:
    return network.Bridge("abc123abc123", {"allow": ["pypi.org"]}, "locs", ("pip", "install", "x"), "/p")  # type: ignore[arg-type]


def fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_open_registers_the_session_and_makes_the_channel(client: FakeClient) -> None:
    b = bridge()
    b.open()
    try:
        assert client.calls == [("open", "locs", "abc123abc123", ["pip", "install", "x"], "/p", {"allow": ["pypi.org"]})]
        assert isinstance(client.calls[0][3], list)
        assert b.channel is not None and b.channel.family == socket.AF_UNIX
        assert b.child_channel_fd >= 0 and fd_is_open(b.child_channel_fd)
        os.write(b.child_channel_fd, b"x")  # the two ends are one pair
        assert b.channel.recv(1) == b"x"
    finally:
        assert b.channel is not None
        b.channel.close()
        os.close(b.child_channel_fd)


def test_attach_hands_the_sandboxs_listener_to_the_daemon_and_keeps_no_copy(client: FakeClient) -> None:
    b = bridge()
    b.open()
    child_fd = b.child_channel_fd
    sandbox_end = socket.socket(fileno=os.dup(child_fd))  # what netns.py does inside the sandbox
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sandbox_end.sendmsg([b"L"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", listener.fileno()))])
    sandbox_end.close()
    listener.close()
    b.attach()
    ((session_id, received, fd_during),) = client.attached
    assert session_id == "abc123abc123"
    assert fd_during >= 0 and received.family == socket.AF_INET
    assert received.fileno() == -1  # closed once the daemon has it
    assert b.channel is not None and b.channel.fileno() == -1
    assert not fd_is_open(child_fd) or child_fd == fd_during  # our copy of the child's end is closed


def test_attach_without_a_listener_from_the_sandbox_is_an_error(client: FakeClient) -> None:
    b = bridge()
    b.open()
    with pytest.raises(OSError, match="did not hand over its listener"):
        b.attach()  # the child's end closes and nothing came: no hang, no attach
    assert client.attached == []
    assert b.channel is not None
    b.channel.close()


def test_close_takes_the_sessions_denials_trouble_and_refusals(client: FakeClient) -> None:
    b = bridge()
    assert (b.denials, b.trouble, b.refused) == ([], "", "")
    b.close()
    assert client.calls == [("close", "locs", "abc123abc123")]
    assert b.denials == [{"host": "evil.example"}] and b.trouble == "the daemon died" and b.refused == "2 refused"


def test_a_clean_close_leaves_no_trouble(client: FakeClient) -> None:
    client.ending = SimpleNamespace(denials=[], trouble="", refused="")
    b = bridge()
    b.close()
    assert (b.denials, b.trouble, b.refused) == ([], "", "")


def test_the_proxy_variables_point_at_the_sandboxs_port_and_spare_loopback() -> None:
    env = network.proxy_environment()
    assert env["HTTPS_PROXY"] == env["http_proxy"] == f"http://127.0.0.1:{PROXY_PORT}"
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1"
