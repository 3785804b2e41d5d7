"""Network test pieces shared by the proxy, e2e and integration suites."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path


def make_certificate(directory: Path, names: Iterable[str]) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for `names` and 127.0.0.1; EC, so fast to make."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stockade test origin")])
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "origin.pem", directory / "origin.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    os.chmod(cert_path, 0o644)  # the sandboxed client reads it as another user in the unprivileged run
    return cert_path, key_path


def stop_daemon(runtime: Path) -> None:
    """SIGTERM the proxy daemon whose port file is in `runtime`, wait for it, SIGKILL after 10 s."""
    try:
        pid = int(json.loads((runtime / "proxy.port").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it is our child
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
