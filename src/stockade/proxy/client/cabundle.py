"""The certificates a sandbox trusts when the daemon terminates TLS for hosts with HTTP rules.

For a host with `[network.http."HOST"]` rules the daemon (mitmproxy) answers
the sandbox's TLS with a certificate it signs with this user's own CA, kept
in the daemon's confdir under stockade's state folder: 0700, hidden in every
sandbox, its key never readable inside. The sandbox gets one file, the
system's roots followed by that CA's certificate, bound read-only at
SANDBOX_PATH and named by the variables of `core.proxy_env.CA_VARIABLES`,
so common clients trust it with no action of the user's.

The CA is made here when a plan first needs it (the daemon may not have
started yet: runs do not wait for it), under the daemon's start lock, the
way the daemon itself would make it, so both always use the same one. The
bundle is written once under a name made from its content.
"""

from __future__ import annotations

import os

from stockade.proxy.control import DaemonFiles, system_roots

SANDBOX_PATH = "/run/stockade/ca-bundle.pem"
CA_BASENAME = "mitmproxy"  # mitmproxy's own name for the files in its confdir
KEY_SIZE = 2048  # mitmproxy's default key_size


def ca_certificate(files: DaemonFiles) -> bytes:
    """The daemon's CA certificate (PEM), making the CA first if there is none."""
    path = f"{files.confdir}/{CA_BASENAME}-ca-cert.pem"
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        pass
    from stockade.proxy.client.launch import start_lock

    lock = start_lock(files)  # a daemon starting now makes its CA under this very lock
    try:
        if not os.path.exists(path):
            from mitmproxy.certs import CertStore  # only the first time: it loads cryptography

            os.makedirs(files.confdir, mode=0o700, exist_ok=True)
            previous = os.umask(0o077)
            try:
                CertStore.from_store(files.confdir, CA_BASENAME, KEY_SIZE)
            finally:
                os.umask(previous)
    finally:
        os.close(lock)
    with open(path, "rb") as handle:
        return handle.read()


def bundle(files: DaemonFiles, cache: str) -> str:
    """The path of the bundle (system roots, then the daemon's CA) a sandbox binds at SANDBOX_PATH."""
    roots_path = system_roots()
    roots = b""
    if roots_path is not None:
        with open(roots_path, "rb") as handle:
            roots = handle.read()
    content = roots.rstrip(b"\n") + b"\n" + ca_certificate(files) if roots else ca_certificate(files)
    from stockade.core.cachefiles import write_once

    return write_once(os.path.join(cache, "ca"), "bundle", content, 0o644, suffix=".pem")
