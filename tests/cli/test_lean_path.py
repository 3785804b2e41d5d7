"""What a `stockade run` that uses its stored plan imports: the lean discipline, held by a test.

`stockade run` sits in front of every command an agent runs, so a cached run
must load only what it needs; one careless import (json, dataclasses,
pathlib, typing, re) costs milliseconds on every command. A real cached run
is made here, offline and with an allowlist, and the modules it loaded are
compared with what each path may load. A heavy module that appears where it
was not allowed fails the test; so does one that is allowed and no longer
loaded (the list must shrink with the code).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.netkit import stop_daemon
from tests.sandboxed import require_sandbox
from tests.visible import force_rmtree, visible_root

# Modules that cost a cached run noticeable time to import; none may load on a cached path unless
# allowed below, with the reason.
HEAVY = (
    "dataclasses", "enum", "typing", "pathlib", "json", "re", "subprocess", "inspect", "ast", "asyncio",
    "ctypes", "socket", "selectors", "ipaddress", "urllib", "tomllib", "hashlib", "tempfile", "shutil",
    "mitmproxy", "typer", "rich", "psutil", "seccomp", "tomlkit", "idna", "publicsuffixlist",
)  # fmt: skip

ALLOWED: dict[str, dict[str, str]] = {
    "offline": {},
    # The control connection is `_socket` and the protocol `_json` (proxy/control.py), the records
    # plain classes, the folders strings; ctypes is bound in the forked child only (bwrap/parts/netns.py).
    "allowlist": {},
}

# Only the host sockets under this test's own folder count: other tests beside it (a socket made and
# removed every 10 ms) change the machine's list, which makes a stored plan stale by design
# (plan_cache.py). host_sockets is on the cached path anyway: importing it first adds nothing.
PROBE = (
    "import os, sys\n"
    "from stockade.bwrap.parts import host_sockets\n"
    "everywhere, mine = host_sockets.scoped, os.environ['STOCKADE_PROBE_BOX'] + '/'\n"
    "host_sockets.scoped = lambda scope: tuple(p for p in everywhere(scope) if p.startswith(mine))\n"
    "from stockade.cli.main import main\n"
    "code = main(['run', '--', 'true'])\n"
    "loaded = sorted(sys.modules)\n"
    "import json\n"
    "print(json.dumps(loaded), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@pytest.fixture(scope="module")
def world() -> Iterator[Path]:
    require_sandbox()
    root = visible_root("lean")
    (root / "home").mkdir()
    yield root
    stop_daemon(root / "home" / ".local" / "state" / "stockade" / "run")
    force_rmtree(root)


def _cached_modules(world: Path, kind: str) -> set[str]:
    project = world / kind
    project.mkdir()
    env = {"HOME": str(world / "home"), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(sys.path),
           "STOCKADE_PROBE_BOX": str(world)}  # fmt: skip
    if kind == "allowlist":
        (project / ".stockade.toml").write_text('[network]\nallow = ["example.test"]\n')
        subprocess.run([sys.executable, "-m", "stockade.cli.main", "trust"], cwd=project, env=env, check=True, capture_output=True)
    runs = [subprocess.run([sys.executable, "-c", PROBE], cwd=project, env=env, capture_output=True, text=True, timeout=120) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr
    first, second = (set(json.loads(done.stderr.strip().splitlines()[-1])) for done in runs)
    assert "stockade.bwrap.plan.planner" in first and "stockade.bwrap.plan.planner" not in second, "the second run did not use its stored plan"
    return second


@pytest.mark.parametrize("kind", ["offline", "allowlist"])
def test_a_cached_run_loads_only_what_its_path_allows(world: Path, kind: str) -> None:
    loaded = _cached_modules(world, kind)
    heavy = {name for name in HEAVY if name in loaded}
    allowed = set(ALLOWED[kind])
    assert heavy - allowed == set(), f"new heavy imports on the cached {kind} path: {sorted(heavy - allowed)}"
    assert allowed - heavy == set(), f"no longer loaded on the cached {kind} path, take them out of ALLOWED: {sorted(allowed - heavy)}"
