from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stockade.proxy import control
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


def test_daemon_files_are_plain_strings() -> None:
    files = DaemonFiles(runtime="/r", state=str(Path("/s")))
    assert (files.socket, files.port_file, files.lock) == ("/r/proxy.sock", "/r/proxy.port", "/r/proxy.lock")
    assert (files.log, files.confdir) == ("/s/proxy.log", "/s/mitmproxy")
    assert files == DaemonFiles("/r", "/s") and files != DaemonFiles("/r", "/t")


def test_spec_is_immutable_and_compared_by_value() -> None:
    spec = SessionSpec(session_id="s", command=["a"], cwd="/", allow=["x.test"])  # type: ignore[arg-type]
    assert spec.allow == ("x.test",) and spec == SessionSpec("s", ["a"], "/", ("x.test",))
    assert spec != SessionSpec("s", ["a"], "/", ("y.test",))
    with pytest.raises(AttributeError):
        spec.mode = "open"  # type: ignore[misc]
    assert "x.test" in repr(spec)


MESSAGES = [
    {},
    {"op": "ping"},
    {"ok": True, "port": 41234, "exiting": False, "error": None, "ratio": 0.25, "big": 2**70, "neg": -3},
    {"spec": {"allow": ["pypi.org", "*.x.test"], "command": ["sh", "-c", 'echo "hi" \\ \t'], "nested": [[], [{}], {"a": [1]}]}},
    {"text": "é\n\u2028\x00\x7f\ud800 \U0001f600", 'quote"key': "\\"},
]


@pytest.mark.parametrize("message", MESSAGES)
def test_the_lean_codec_writes_what_json_writes_and_reads_it_back(message: dict[str, object]) -> None:
    line = encode(message)
    assert line == json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
    assert decode(line) == message == json.loads(line)


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
))  # fmt: skip
def test_the_lean_codec_agrees_with_json_on_any_value(value: object) -> None:
    message = {"value": value}
    line = encode(message)
    assert json.loads(line) == message
    assert decode(line) == message


@pytest.mark.parametrize(
    "line, error",
    [
        pytest.param(b"[1]\n", "must be a JSON object", id="a list"),
        pytest.param(b'{"a": NaN}\n', "NaN is not allowed", id="a constant"),
        pytest.param(b"{} {}\n", "extra data", id="two objects"),
        pytest.param(b'{"a": 1\n', "delimiter", id="cut short"),
        pytest.param(b"\xff\n", "not UTF-8", id="not utf-8"),
        pytest.param(b"[" * 100_000, "nested too deeply", id="deep"),
        pytest.param("\x85{}\n".encode(), "not JSON", id="whitespace json does not allow"),
    ],
)
def test_decode_refuses_what_is_not_one_object(line: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        decode(line)


def test_encode_refuses_what_json_cannot_say() -> None:
    with pytest.raises(ValueError):
        encode({"x": float("nan")})
    with pytest.raises(TypeError):
        encode({"x": {1: 2}})
    with pytest.raises(TypeError):
        encode({"x": object()})


def test_the_json_fallback_reads_and_writes_the_same() -> None:
    quote, parse = control._json_codec()
    assert quote("é\n") == control._quoted("é\n")
    assert parse('{"a": [1, "x"]}') == {"a": [1, "x"]}
    with pytest.raises(ValueError):
        parse('{"a": Infinity}')


def test_the_spec_carries_http_tables_and_checks_their_shape() -> None:
    spec = SessionSpec("s", ["true"], "/", ("api.test",), http=(("api.test", ("GET /a",), ("* /b",)),))
    data = decode(encode({"spec": spec.to_dict()}))["spec"]
    assert data["http"] == [["api.test", ["GET /a"], ["* /b"]]]
    assert SessionSpec.from_dict({**data, "audit_path": "/a"}).http == (("api.test", ("GET /a",), ("* /b",), ()),)
    pushing = SessionSpec("s", ["true"], "/", http=(("git.test", (), (), ("refs/heads/agent/*",)),))
    data = decode(encode({"spec": pushing.to_dict()}))["spec"]
    assert data["http"] == [["git.test", [], [], ["refs/heads/agent/*"]]]  # a fourth list only when there are push patterns
    assert SessionSpec.from_dict({**data, "audit_path": "/a"}).http == pushing.http
    for bad in ({"x": 1}, [["api.test", ["GET /a"]]], [["api.test", "GET /a", []]], [[1, [], []]]):
        with pytest.raises(ValueError, match="spec.http must be"):
            SessionSpec.from_dict({"session_id": "s", "audit_path": "/a", "http": bad})
