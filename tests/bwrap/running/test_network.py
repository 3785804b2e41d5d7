"""The run's Bridge to the proxy daemon, with a fake handover: open, attach the sandbox's listener, close."""

from __future__ import annotations

import os
import socket
import struct
from types import SimpleNamespace
from typing import Any

import pytest

from stockade.bwrap.parts.netns import PROXY_PORT
from stockade.bwrap.running import network
from stockade.proxy.client import handover


class FakeHandover:
    """Stands in for proxy.client.handover.Handover: records each call, no daemon."""

    made: list[FakeHandover] = []
    ending = SimpleNamespace(always=[], denials=[{"host": "evil.example"}], trouble="the daemon died", refused="2 refused", names=(4, 1), exported="")

    def __init__(self, files: Any, spec: dict[str, Any]) -> None:
        self.files, self.spec = files, spec
        self.calls: list[str] = []
        self.sent: list[tuple[int, socket.AddressFamily]] = []
        FakeHandover.made.append(self)

    def reach(self) -> None:
        self.calls.append("reach")

    def send(self, listeners: list[Any]) -> None:
        self.calls.append("send")
        for listener in listeners:
            self.sent.append((listener.fileno(), socket.AddressFamily(listener.family)))
            listener.close()

    def end(self) -> Any:
        self.calls.append("end")
        return self.ending


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeHandover]:
    FakeHandover.made = []
    monkeypatch.setattr(handover, "Handover", FakeHandover)
    return FakeHandover


def bridge() -> network.Bridge:
    rules = {"allow": ["pypi.org"], "deny": [], "audit_path": "/s/audit.jsonl", "origin": "/p/.stockade.toml", "mode": "allowlist"}
    return network.Bridge("abc123abc123", rules, "/run/u/stockade", "/state", ("pip", "install", "x"), "/p")


def fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_open_reaches_the_daemon_with_the_sessions_spec_and_makes_the_channel(fake: type[FakeHandover]) -> None:
    b = bridge()
    b.open()
    try:
        (made,) = fake.made
        assert made.calls == ["reach"]
        assert (made.files.runtime, made.files.state) == ("/run/u/stockade", "/state")
        assert made.spec == {
            "session_id": "abc123abc123", "command": ["pip", "install", "x"], "cwd": "/p", "allow": ["pypi.org"], "deny": [],
            "audit_path": "/s/audit.jsonl", "origin": "/p/.stockade.toml", "mode": "allowlist", "http": [], "credentials": [], "approve": 0, "mcp": "",
            "forwards": [],
        }  # fmt: skip
        assert b.channel is not None and b.channel.family == socket.AF_UNIX
        assert b.child_channel_fd >= 0 and fd_is_open(b.child_channel_fd)
        os.write(b.child_channel_fd, b"x")  # the two ends are one pair
        assert b.channel.recv(1) == b"x"
    finally:
        assert b.channel is not None
        b.channel.close()
        os.close(b.child_channel_fd)


def test_attach_sends_the_sandboxs_listener_and_keeps_no_channel(fake: type[FakeHandover]) -> None:
    b = bridge()
    b.open()
    child_fd = b.child_channel_fd
    sandbox_end = socket.socket(fileno=os.dup(child_fd))  # what netns.py does inside the sandbox
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sandbox_end.sendmsg([b"L"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", listener.fileno()))])
    sandbox_end.close()
    listener.close()
    b.attach()
    (made,) = fake.made
    assert made.calls == ["reach", "send"]
    ((fd_during, family),) = made.sent
    assert fd_during >= 0 and family == socket.AF_INET
    assert b.channel is not None and b.channel.fileno() == -1
    assert not fd_is_open(child_fd) or child_fd == fd_during  # our copy of the child's end is closed


def test_attach_without_a_listener_from_the_sandbox_is_an_error(fake: type[FakeHandover]) -> None:
    b = bridge()
    b.open()
    with pytest.raises(OSError, match="did not hand over its listener"):
        b.attach()  # the child's end closes and nothing came: no hang, nothing sent
    assert fake.made[0].calls == ["reach"]
    assert b.channel is not None and b.channel.fileno() == -1


def test_close_takes_the_sessions_denials_trouble_and_refusals(fake: type[FakeHandover]) -> None:
    b = bridge()
    assert (b.denials, b.trouble, b.refused) == ([], "", "")
    b.open()
    assert b.channel is not None
    b.channel.close()
    os.close(b.child_channel_fd)
    b.close()
    assert fake.made[0].calls == ["reach", "end"]
    assert b.denials == [{"host": "evil.example"}] and b.trouble == "the daemon died" and b.refused == "2 refused" and b.names == (4, 1)
    b.close()  # a second close (the retried start's) asks nothing more
    assert fake.made[0].calls == ["reach", "end"]


def test_a_bridge_never_opened_closes_quietly(fake: type[FakeHandover]) -> None:
    b = bridge()
    b.close()
    assert fake.made == [] and (b.denials, b.trouble, b.refused) == ([], "", "")


def test_the_spec_message_takes_the_rules_a_plan_stored() -> None:
    rules = {"allow": ("a.test",), "deny": ["b.test"], "audit_path": "/a", "origin": "builtin:default", "mode": "open"}
    spec = handover.spec_message("s1", ["true"], "/p", rules)
    assert spec["allow"] == ["a.test"] and spec["mode"] == "open" and spec["command"] == ["true"]


def test_the_proxy_variables_point_at_the_sandboxs_port_and_spare_loopback() -> None:
    env = network.proxy_environment()
    assert env["HTTPS_PROXY"] == env["http_proxy"] == f"http://127.0.0.1:{PROXY_PORT}"
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1"
