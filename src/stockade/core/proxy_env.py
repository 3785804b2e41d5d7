"""The variables that send a sandbox's tools to the proxy: one table for both backends (the README lists it).

Linux points them at the sandbox's own door (127.0.0.1:3128 in its network
namespace) and lets loopback names go direct, to servers the command starts
inside. macOS has no namespace of its own: the URL names the daemon's port
and carries the session's credential, and nothing bypasses it, loopback
included.
"""

from __future__ import annotations

URL_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")


def proxy_environment(port: int, *, credential: str = "", no_proxy: tuple[str, ...] = ()) -> dict[str, str]:
    """The variables for a proxy at 127.0.0.1:`port`; `credential` goes into the URL as user:password."""
    url = f"http://{credential + '@' if credential else ''}127.0.0.1:{port}"
    bypass = ",".join(no_proxy)
    env = {name: url for name in URL_VARIABLES}
    env.update({name: bypass for name in NO_PROXY_VARIABLES})
    env.update(
        npm_config_proxy=url,  # npm, pnpm
        npm_config_https_proxy=url,
        YARN_HTTP_PROXY=url,  # yarn berry
        YARN_HTTPS_PROXY=url,
        CARGO_HTTP_PROXY=url,
        NODE_USE_ENV_PROXY="1",  # Node's built-in fetch (undici) honours *_PROXY only with this
        GIT_PROXY_COMMAND="",  # no ProxyCommand-style bypass from the host's git config
    )
    java = f"-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={port} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={port}"
    if no_proxy:
        java += " -Dhttp.nonProxyHosts=" + "|".join(host for host in no_proxy if ":" not in host)
    env["JAVA_TOOL_OPTIONS"] = java  # Java takes no credential here: on macOS its requests get a 407
    return env


# The variables that name a CA bundle, for the clients that read one (the README's table lists them).
# Set only when the daemon terminates TLS for some host (HTTP rules): the bundle is the system's roots
# and the daemon's CA (proxy/client/cabundle.py), so every other host verifies as it would outside.
CA_VARIABLES = (
    "SSL_CERT_FILE",  # OpenSSL: Python's ssl, Ruby, PHP, many C tools
    "REQUESTS_CA_BUNDLE",  # Python requests
    "CURL_CA_BUNDLE",  # curl, and pip's vendored requests
    "PIP_CERT",  # pip
    "NODE_EXTRA_CA_CERTS",  # Node.js adds these to its own roots
    "GIT_SSL_CAINFO",  # git over HTTPS
    "CARGO_HTTP_CAINFO",  # cargo
    "AWS_CA_BUNDLE",  # AWS CLI and SDKs
    "DENO_CERT",  # Deno
    "npm_config_cafile",  # npm
    "HTTPLIB2_CA_CERTS",  # httplib2 (Google's older client libraries)
)


def ca_environment(path: str) -> dict[str, str]:
    """Every CA variable pointing at the bundle at `path` inside the sandbox."""
    return dict.fromkeys(CA_VARIABLES, path)
