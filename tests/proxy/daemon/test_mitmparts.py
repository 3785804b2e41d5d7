"""The daemon imports the six mitmproxy addons it runs and not the package's other thirty, and nothing breaks for it.

Each case runs in a fresh interpreter: in this one mitmproxy.addons may have been imported for real already.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from stockade.proxy.daemon import mitmparts
loaded = [name for name in sys.modules if name.startswith("mitmproxy.addons.")]
result = {"loaded": sorted(loaded), "flask": "flask" in sys.modules, "ldap3": "ldap3" in sys.modules}
import mitmproxy.addons
result["default_addons"] = len(mitmproxy.addons.default_addons())  # mitmproxy's own tools still get the whole package
result["flask_after"] = "flask" in sys.modules
from mitmproxy.addons import save  # a submodule imports as usual, before and after
result["save"] = save.__name__
print(json.dumps(result))
"""


def run(code: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout))


def test_only_the_filters_addons_are_imported_and_the_package_completes_when_asked() -> None:
    result = run(PROBE)
    assert result["loaded"] == [f"mitmproxy.addons.{name}" for name in ("block", "core", "disable_h2c", "next_layer", "proxyserver", "tlsconfig")]
    assert result["flask"] is False and result["ldap3"] is False  # onboarding's web app, proxyauth's LDAP
    assert isinstance(result["default_addons"], int) and result["default_addons"] > 20
    assert result["flask_after"] is True
    assert result["save"] == "mitmproxy.addons.save"


def test_a_package_imported_for_real_first_is_left_alone() -> None:
    result = run("import mitmproxy.addons\n" + PROBE)
    assert result["flask"] is True and len(result["loaded"]) > 20  # type: ignore[arg-type]
