"""Where the host's engine listens, and the lock that says a run is alive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stockade.containers import engines


def test_the_policy_s_socket_then_the_user_s_variable_then_the_usual_place(monkeypatch: pytest.MonkeyPatch) -> None:
    assert engines.engine_socket("docker", "/srv/d.sock", {"DOCKER_HOST": "unix:///x.sock"}) == "/srv/d.sock"
    assert engines.engine_socket("docker", None, {"DOCKER_HOST": "unix:///x.sock"}) == "/x.sock"
    assert engines.engine_socket("docker", None, {"DOCKER_HOST": "tcp://10.0.0.1:2375"}) == "/var/run/docker.sock"  # only a socket file
    assert engines.engine_socket("podman", None, {"CONTAINER_HOST": "unix:///p.sock"}) == "/p.sock"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    assert engines.engine_socket("podman", None, {"XDG_RUNTIME_DIR": "/run/user/1000"}) == "/run/user/1000/podman/podman.sock"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert engines.engine_socket("podman", None, {}) == "/run/podman/podman.sock"


def test_a_run_is_alive_while_its_process_holds_the_lock(tmp_path: Path) -> None:
    runtime = str(tmp_path)
    assert not engines.alive(runtime, "nobody")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from stockade.containers import engines; engines.hold(sys.argv[1]); print('held', flush=True); time.sleep(60)",
         engines.gate_folder(runtime, "s1")], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert engines.alive(runtime, "s1")
    finally:
        holder.kill()
        holder.wait()
    assert not engines.alive(runtime, "s1")  # killed with -9: its lock went with it
