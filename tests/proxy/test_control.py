from __future__ import annotations

from pathlib import Path

import pytest

from stockade.proxy.control import DaemonFiles, SessionSpec, decode, encode


def test_spec_round_trip() -> None:
    spec = SessionSpec(
        session_id="s1", command=["npm", "install"], cwd="/p", allow=("pypi.org", "*.pythonhosted.org"), deny=("x.test",),
        audit_path="/state/audit.jsonl", origin="/p/.stockade.toml", mode="open",
    )  # fmt: skip
    assert SessionSpec.from_dict(decode(encode({"spec": spec.to_dict()}))["spec"]) == spec


@pytest.mark.parametrize(
    "data, message",
    [
        pytest.param([], "must be an object", id="not an object"),
        pytest.param({"audit_path": "/a"}, "session_id", id="no id"),
        pytest.param({"session_id": "s"}, "audit_path", id="no audit path"),
        pytest.param({"session_id": "s", "audit_path": "/a", "allow": "x.test"}, "allow must be a list", id="allow not a list"),
        pytest.param({"session_id": "s", "audit_path": "/a", "command": [1]}, "command must be a list", id="command not strings"),
        pytest.param({"session_id": 5, "audit_path": "/a"}, "session_id", id="id not a string"),
    ],
)
def test_spec_validation(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionSpec.from_dict(data)


def test_spec_defaults() -> None:
    spec = SessionSpec.from_dict({"session_id": "s", "audit_path": "/a"})
    assert (spec.mode, spec.allow, spec.command, spec.origin) == ("allowlist", (), [], "")


def test_wire_format() -> None:
    line = encode({"op": "ping", "text": "é\n"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()
    assert decode(line) == {"op": "ping", "text": "é\n"}
    with pytest.raises(ValueError):
        decode(b"[1]\n")
    with pytest.raises(ValueError):
        decode(b"{" * (2 << 20))


def test_daemon_files() -> None:
    files = DaemonFiles(runtime=Path("/r"), state=Path("/s"))
    assert (files.socket, files.port_file, files.lock) == (Path("/r/proxy.sock"), Path("/r/proxy.port"), Path("/r/proxy.lock"))
    assert (files.log, files.confdir) == (Path("/s/proxy.log"), Path("/s/mitmproxy"))
