"""The proxy variables: every tool's spelling points at 127.0.0.1:PORT, with the credential and bypass list."""

from __future__ import annotations

import pytest

from stockade.core.proxy_env import NO_PROXY_VARIABLES, URL_VARIABLES, proxy_environment

TOOL_URLS = ("npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", "CARGO_HTTP_PROXY")


def test_every_url_variable_names_the_proxy() -> None:
    env = proxy_environment(3128)
    for name in (*URL_VARIABLES, *TOOL_URLS):
        assert env[name] == "http://127.0.0.1:3128", name
    assert set(URL_VARIABLES) == {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}


def test_the_fixed_variables() -> None:
    env = proxy_environment(3128)
    assert env["NODE_USE_ENV_PROXY"] == "1"
    assert env["GIT_PROXY_COMMAND"] == ""
    assert env["NO_PROXY"] == env["no_proxy"] == ""
    assert env["JAVA_TOOL_OPTIONS"] == "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128"
    assert set(env) == {*URL_VARIABLES, *NO_PROXY_VARIABLES, *TOOL_URLS, "NODE_USE_ENV_PROXY", "GIT_PROXY_COMMAND", "JAVA_TOOL_OPTIONS"}


def test_the_credential_goes_into_every_url_but_not_java() -> None:
    env = proxy_environment(4321, credential="stockade:t0ken")
    for name in (*URL_VARIABLES, *TOOL_URLS):
        assert env[name] == "http://stockade:t0ken@127.0.0.1:4321", name
    assert "t0ken" not in env["JAVA_TOOL_OPTIONS"] and "-Dhttp.proxyPort=4321" in env["JAVA_TOOL_OPTIONS"]


@pytest.mark.parametrize(
    ("no_proxy", "joined", "java"),
    [
        pytest.param(("localhost",), "localhost", "localhost", id="one"),
        pytest.param(("localhost", "127.0.0.1", "::1"), "localhost,127.0.0.1,::1", "localhost|127.0.0.1", id="ipv6-left-out-of-java"),
        pytest.param(("localhost:8080", "a.test"), "localhost:8080,a.test", "a.test", id="ports-left-out-of-java"),
    ],
)
def test_the_bypass_list(no_proxy: tuple[str, ...], joined: str, java: str) -> None:
    env = proxy_environment(3128, no_proxy=no_proxy)
    assert env["NO_PROXY"] == env["no_proxy"] == joined
    assert env["JAVA_TOOL_OPTIONS"].endswith(f" -Dhttp.nonProxyHosts={java}")


def test_no_bypass_list_gives_java_none() -> None:
    assert "nonProxyHosts" not in proxy_environment(3128)["JAVA_TOOL_OPTIONS"]


def test_every_ca_variable_names_the_bundle() -> None:
    from stockade.core.proxy_env import CA_VARIABLES, ca_environment

    env = ca_environment("/run/stockade/ca-bundle.pem")
    assert set(env) == set(CA_VARIABLES) and set(env.values()) == {"/run/stockade/ca-bundle.pem"}
    assert {
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "PIP_CERT",
        "GIT_SSL_CAINFO",
        "CARGO_HTTP_CAINFO",
        "AWS_CA_BUNDLE",
    } <= set(env)
