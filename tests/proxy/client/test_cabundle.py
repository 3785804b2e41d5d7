"""The CA bundle a sandbox trusts for inspected hosts: made once, under the daemon's lock, the system's roots first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.proxy import control
from stockade.proxy.client import cabundle
from stockade.proxy.control import DaemonFiles


@pytest.fixture
def files(tmp_path: Path) -> DaemonFiles:
    return DaemonFiles(str(tmp_path / "run"), str(tmp_path / "state"))


def test_the_ca_is_made_once_where_the_daemon_keeps_it_and_its_key_stays_private(files: DaemonFiles) -> None:
    first = cabundle.ca_certificate(files)
    assert first.startswith(b"-----BEGIN CERTIFICATE-----")
    key = Path(files.confdir) / "mitmproxy-ca.pem"
    assert b"PRIVATE KEY" in key.read_bytes() and os.stat(key).st_mode & 0o077 == 0
    assert os.stat(files.state).st_mode & 0o077 == 0 and os.stat(files.runtime).st_mode & 0o077 == 0
    assert cabundle.ca_certificate(files) == first  # kept, not made again


def test_the_bundle_is_the_system_roots_then_the_ca_under_a_name_from_its_content(
    files: DaemonFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = tmp_path / "roots.pem"
    roots.write_bytes(b"-----BEGIN CERTIFICATE-----\nROOT\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(control, "SYSTEM_ROOTS", (str(tmp_path / "absent.pem"), str(roots)))
    path = cabundle.bundle(files, str(tmp_path / "cache"))
    content = Path(path).read_bytes()
    assert content.startswith(roots.read_bytes()) and content.endswith(cabundle.ca_certificate(files))
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert cabundle.bundle(files, str(tmp_path / "cache")) == path  # same content, same file
    roots.write_bytes(roots.read_bytes() + b"-----BEGIN CERTIFICATE-----\nTWO\n-----END CERTIFICATE-----\n")
    assert cabundle.bundle(files, str(tmp_path / "cache")) != path  # new roots, new bundle


def test_without_system_roots_the_bundle_is_the_ca_alone(files: DaemonFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "SYSTEM_ROOTS", (str(tmp_path / "absent.pem"),))
    assert control.system_roots() is None
    assert Path(cabundle.bundle(files, str(tmp_path / "cache"))).read_bytes() == cabundle.ca_certificate(files)
