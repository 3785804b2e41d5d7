"""The bodies around a swap, through the daemon's own addon chain: request bodies watched, answers masked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mitmproxy import http
from mitmproxy.test import tutils

from stockade.proxy.control import SessionCredential, SessionSpec
from stockade.proxy.filter.state import SWAPPED
from tests.proxy.filterkit import FakeResolver, FilterChain, get_flow, register

PLACEHOLDER = "stockade-placeholder-t-" + "cd" * 20
VALUE = "the-real-value-7"


def spec_with_credential(make_spec: Callable[..., SessionSpec]) -> SessionSpec:
    return make_spec(credentials=(SessionCredential("T", PLACEHOLDER, VALUE, ("allowed.test",), "Authorization"),))


def audit(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_swapped_request_has_its_answer_masked(chain: FilterChain, make_spec: Callable[..., SessionSpec], tmp_path: Path) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, spec_with_credential(make_spec))
    with chain.context():
        f = get_flow("allowed.test", 8443, token, path=b"/user")
        f.client_conn.tls = True  # the tunnel's TLS, terminated by the daemon
        f.request.headers["Authorization"] = f"Bearer {PLACEHOLDER}"
        await chain.requestheaders(f)
        assert f.response is None and f.request.headers["Authorization"] == f"Bearer {VALUE}"
        assert f.metadata[SWAPPED] == [VALUE]
        f.response = tutils.tresp(headers=http.Headers(x_echo=VALUE), content=b"", reason=f"Bearer {VALUE}".encode())
        chain.responseheaders(f)
        assert VALUE not in f.response.headers["x-echo"]
        assert VALUE not in f.response.reason and f.response.reason.startswith("Bearer ")  # the status line's own words too
        assert callable(f.response.stream)
        body = b"".join([*f.response.stream(b"echo: " + VALUE.encode() + b"!"), *f.response.stream(b"")])  # type: ignore[operator, misc]
        assert VALUE.encode() not in body and len(body) == len(b"echo: " + VALUE.encode() + b"!")
    starts = [r for r in audit(tmp_path) if r.get("phase") == "start"]
    assert "credential T swapped in" in str(starts[-1]["rule"])
    assert VALUE not in (tmp_path / "audit.jsonl").read_text()


async def test_a_placeholder_in_a_body_stops_the_request(chain: FilterChain, make_spec: Callable[..., SessionSpec], tmp_path: Path) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, spec_with_credential(make_spec))
    with chain.context():
        f = get_flow("allowed.test", 8443, token, path=b"/upload")
        f.request.method = "POST"  # a GET's body is refused at its first byte (bodies.py)
        f.client_conn.tls = True
        await chain.requestheaders(f)
        assert callable(f.request.stream)
        first = f.request.stream(b"harmless start " * 5 + b"\n")  # type: ignore[operator]
        second = f.request.stream(PLACEHOLDER.encode())  # type: ignore[operator]
        assert list(first) == [b"harmless start " * 5 + b"\n"] and list(second) == []  # its first line known: it went on
    denials = [r for r in audit(tmp_path) if r.get("decision") == "deny"]
    assert denials and "credential T in the request body" in str(denials[-1]["rule"])


async def test_a_session_without_credentials_is_left_alone(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, make_spec())
    with chain.context():
        f = get_flow("allowed.test", 8443, token, path=b"/x")
        f.request.headers["Authorization"] = f"Bearer {PLACEHOLDER}"
        await chain.requestheaders(f)
        assert f.response is None and f.request.headers["Authorization"] == f"Bearer {PLACEHOLDER}" and SWAPPED not in f.metadata


async def test_trailers_are_masked_and_a_placeholder_in_request_trailers_stops_it(
    chain: FilterChain, make_spec: Callable[..., SessionSpec], tmp_path: Path
) -> None:
    chain.resolver = FakeResolver()
    token = register(chain, spec_with_credential(make_spec))
    with chain.context():
        f = get_flow("allowed.test", 8443, token, path=b"/user")
        f.client_conn.tls = True
        f.request.headers["Authorization"] = f"Bearer {PLACEHOLDER}"
        await chain.requestheaders(f)
        chain.request(f)  # no trailers: goes on
        assert f.metadata[SWAPPED] == [VALUE] and not f.error
        f.response = tutils.tresp(content=b"")
        f.response.trailers = http.Headers(x_echo=f"Bearer {VALUE}")
        chain.responseheaders(f)
        chain.response(f)
        assert VALUE not in str(f.response.trailers) and f.response.trailers["x-echo"].startswith("Bearer stockade-masked-")
        g = get_flow("allowed.test", 8443, token, path=b"/upload")
        g.client_conn.tls = True
        await chain.requestheaders(g)
        g.request.trailers = http.Headers(x_checksum=PLACEHOLDER)
        chain.request(g)
        assert g.request.trailers is None
    denials = [r for r in audit(tmp_path) if r.get("decision") == "deny"]
    assert denials and "credential T in the request trailers" in str(denials[-1]["rule"])


async def test_every_answer_of_a_credential_host_is_masked(chain: FilterChain, make_spec: Callable[..., SessionSpec]) -> None:
    """Not only the answer to a request that carried the value: the host may show what it kept."""
    chain.resolver = FakeResolver()
    token = register(chain, spec_with_credential(make_spec))
    with chain.context():
        f = get_flow("allowed.test", 8443, token, path=b"/last")
        f.client_conn.tls = True
        await chain.requestheaders(f)
        assert f.metadata[SWAPPED] == [VALUE] and f.request.headers["Accept-Encoding"] == "identity"
        g = get_flow("other.test", 8443, token, path=b"/x")  # a host the credential never goes to: left alone
        g.client_conn.tls = True
        await chain.requestheaders(g)
        assert SWAPPED not in g.metadata and "Accept-Encoding" not in g.request.headers


def test_codings_the_mask_cannot_read_are_named() -> None:
    from stockade.proxy.filter.swapping import unreadable_coding

    def coding(*fields: tuple[str, str]) -> str:
        return unreadable_coding(http.Headers([(name.encode(), value.encode()) for name, value in fields]))

    assert coding() == "" and coding(("Content-Encoding", " Identity "), ("Transfer-Encoding", "chunked")) == ""
    assert coding(("Transfer-Encoding", "gzip, chunked")) == "gzip"
    assert coding(("Content-Encoding", "GZIP")) == "gzip"
    assert coding(("Content-Encoding", "identity"), ("Content-Encoding", "br")) == "br"
    assert coding(("Content-Encoding", "identity,x-gzip")) == "x-gzip"
