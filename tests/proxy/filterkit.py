"""The daemon's filter addons under mitmproxy's test helpers, and the flows the filter tests send through them.

`FilterChain` calls each hook on every addon in the daemon's order
(daemon.Filter.chain), as mitmproxy does, so a test sees what the daemon
would; a unit test of one addon uses `taddons.context(addon)` instead.
"""

from __future__ import annotations

import base64
import ipaddress
from types import SimpleNamespace
from typing import Any

from mitmproxy import connection, ctx, dns, http, tcp, tls
from mitmproxy.connection import Client, Server
from mitmproxy.options import Options
from mitmproxy.proxy import layer, server_hooks
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layers import dns as dns_layer
from mitmproxy.proxy.layers import http as http_layer
from mitmproxy.proxy.layers import tcp as tcp_layer
from mitmproxy.proxy.layers import tls as tls_layer
from mitmproxy.test import taddons, tflow, tutils
from mitmproxy.tls import ClientHelloData

from stockade.proxy.control import SessionSpec
from stockade.proxy.daemon.main import Filter
from stockade.proxy.filter.resolver import Resolved, Resolver

ip = ipaddress.ip_address
UPSTREAM = ip("127.0.0.1")


class FilterChain:
    """The filter addons of one daemon, with no own addresses (tests dial 127.0.0.1)."""

    def __init__(self) -> None:
        self.filter = Filter()
        self.filter.lookup.own_addresses = lambda: frozenset()  # type: ignore[method-assign]
        self.registry = self.filter.registry
        self.connections = self.filter.connections

    @property
    def resolver(self) -> Resolver:
        return self.filter.lookup.resolver

    @resolver.setter
    def resolver(self, resolver: Resolver) -> None:
        self.filter.lookup.resolver = resolver

    def context(self) -> taddons.context:
        return taddons.context(*self.filter.chain())

    # Hooks, through mitmproxy's own dispatch: each addon in order, exceptions logged and swallowed.

    async def http_connect(self, flow: http.HTTPFlow) -> None:
        await ctx.master.addons.trigger_event(http_layer.HttpConnectHook(flow))

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        await ctx.master.addons.trigger_event(http_layer.HttpRequestHeadersHook(flow))

    async def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        await ctx.master.addons.trigger_event(server_hooks.ServerConnectHook(data))

    def request(self, flow: http.HTTPFlow) -> None:
        ctx.master.addons.trigger(http_layer.HttpRequestHook(flow))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        ctx.master.addons.trigger(http_layer.HttpResponseHeadersHook(flow))

    def response(self, flow: http.HTTPFlow) -> None:
        ctx.master.addons.trigger(http_layer.HttpResponseHook(flow))

    def error(self, flow: http.HTTPFlow) -> None:
        ctx.master.addons.trigger(http_layer.HttpErrorHook(flow))

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        ctx.master.addons.trigger(layer.NextLayerHook(nextlayer))

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        ctx.master.addons.trigger(tls_layer.TlsClienthelloHook(data))

    def tls_start_client(self, data: tls.TlsData) -> None:
        ctx.master.addons.trigger(tls_layer.TlsStartClientHook(data))

    def client_disconnected(self, client: connection.Client) -> None:
        ctx.master.addons.trigger(server_hooks.ClientDisconnectedHook(client))

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        ctx.master.addons.trigger(tcp_layer.TcpStartHook(flow))

    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        ctx.master.addons.trigger(tcp_layer.TcpMessageHook(flow))

    def tcp_end(self, flow: tcp.TCPFlow) -> None:
        ctx.master.addons.trigger(tcp_layer.TcpEndHook(flow))

    def dns_request(self, flow: dns.DNSFlow) -> None:
        ctx.master.addons.trigger(dns_layer.DnsRequestHook(flow))

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        ctx.master.addons.trigger(server_hooks.ServerConnectedHook(data))


def credential(token: str, user: str = "stockade") -> str:
    """The Proxy-Authorization value the relay inserts."""
    return "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


class FakeResolver:
    """Answers from a table; every test upstream is 127.0.0.1:8443; records what was asked."""

    def __init__(self, names: dict[str, list[str]] | None = None) -> None:
        self.names = names or {
            "allowed.test": ["127.0.0.1"],
            "a.wild.test": ["127.0.0.1"],
            "rebind.wild.test": ["127.0.0.1"],
            "meta.wild.test": ["169.254.169.254"],
            "public.wild.test": ["93.184.216.34"],
        }
        self.queries: list[str] = []

    async def __call__(self, host: str, port: int) -> Resolved:
        self.queries.append(host)
        try:
            return Resolved((ip(host),), frozenset({(UPSTREAM, 8443)}))
        except ValueError:
            pass
        return Resolved(tuple(ip(a) for a in self.names.get(host.lower().rstrip("."), [])), frozenset({(UPSTREAM, 8443)}))


def register(addon: Any, spec: SessionSpec) -> str:
    """Register `spec` with the registry of `addon` (a FilterChain or a SessionAuth); its token."""
    token, _session = addon.registry.register(spec)
    return str(token)


def connect_flow(host: str, port: int = 8443, token: str | None = None, client: Client | None = None) -> http.HTTPFlow:
    f = tflow.tflow(req=tutils.treq(method=b"CONNECT", host=host, port=port, path=b"", headers=http.Headers(), content=b""))
    if client is not None:
        f.client_conn = client
    if token is not None:
        f.request.headers["Proxy-Authorization"] = credential(token)
    return f


def get_flow(
    host: str,
    port: int = 8443,
    token: str | None = None,
    host_header: str | None = "",
    path: bytes = b"/p?q=1&token=s3cret",
    client: Client | None = None,
) -> http.HTTPFlow:
    headers = http.Headers()
    if host_header == "":
        host_header = host if port == 80 else f"{host}:{port}"
    if host_header is not None:
        headers["Host"] = host_header
    f = tflow.tflow(req=tutils.treq(host=host, port=port, path=path, headers=headers, content=b""))
    if client is not None:
        f.client_conn = client
    if token is not None:
        f.request.headers["Proxy-Authorization"] = credential(token)
    return f


def hello(client: Client, sni: str | None) -> ClientHelloData:
    return ClientHelloData(Context(client, Options()), SimpleNamespace(sni=sni))  # type: ignore[arg-type]


def hook_data(client: Client, address: tuple[str, int]) -> server_hooks.ServerConnectionHookData:
    return server_hooks.ServerConnectionHookData(client=client, server=Server(address=address))


def boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom")
