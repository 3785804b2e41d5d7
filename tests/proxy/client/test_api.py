from __future__ import annotations

import subprocess
import sys

from stockade.proxy import summary
from stockade.proxy.client import api, launch, sessionclient


def test_client_import_is_lean() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter(); import stockade.proxy.client.api; t = time.perf_counter() - t\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mitmproxy', 'rich', 'typer', 'psutil', 'subprocess'))\n"
        "print(heavy, t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ")
    assert out[0] == "[]"
    assert float(out[1]) < 0.2


def test_client_reexports_what_backends_use() -> None:
    """Backends and the CLI import these names from `client`; each is the one its module defines."""
    assert api.ensure_daemon is launch.ensure_daemon and api.ProxyDaemonError is launch.ProxyDaemonError
    assert api.open_session_with is sessionclient.open_session_with and api.close_session is sessionclient.close_session
    assert api.attach_listener is sessionclient.attach_listener and api.session_rules is sessionclient.session_rules
    assert api.daemon_status is sessionclient.daemon_status and api.describe_denial is summary.describe_denial
    assert all(hasattr(api, name) for name in api.__all__)
