"""The request-head cap wraps one method of mitmproxy's HTTP/1 server layer: it must still be there."""

from __future__ import annotations

import inspect

from mitmproxy.proxy.layers.http import _http1

from stockade.proxy.daemon import headlimit


def test_the_wrapped_method_exists_and_is_wrapped_once() -> None:
    assert inspect.isgeneratorfunction(_http1.Http1Server.read_headers), "mitmproxy moved read_headers: re-check headlimit.py"
    assert callable(_http1.make_error_response)
    headlimit.install()
    wrapped = _http1.Http1Server.read_headers
    headlimit.install()
    assert _http1.Http1Server.read_headers is wrapped and wrapped.__module__ == headlimit.__name__
    assert inspect.isgeneratorfunction(_http1.Http1Connection.wait), "mitmproxy moved wait: re-check headlimit.py"
    assert _http1.Http1Server.wait.__module__ == headlimit.__name__


def test_a_complete_head_within_the_limit_is_never_cut() -> None:
    head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    assert headlimit._head_complete(head + b"x" * (2 * headlimit.MAX_REQUEST_HEAD))  # a big body or pipelined requests after it
    assert not headlimit._head_complete(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 20000)
