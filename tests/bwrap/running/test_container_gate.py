"""A run's gate: what bwrap is given, the line without an engine, and the folders of dead runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.bwrap.running.container_gate import RunGate
from stockade.containers import engines


def test_the_gate_is_bound_at_the_usual_path_and_named_in_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr("stockade.bwrap.running.container_gate.runtime_folder", lambda env: str(tmp_path / "rt"))
    dead = engines.gate_folder(str(tmp_path / "rt"), "dead-run")
    os.makedirs(dead)
    Path(dead, engines.LOCK).write_text("")  # a run killed with -9: its folder, its lock free
    gate = RunGate(("docker", str(tmp_path / "no-engine.sock"), ["localhost/*"], False), ("", ""), {"session": "s1"})
    try:
        words = [word for piece in gate.pieces for word in piece.to_args()]
        assert words[:3] == ["--bind", os.path.join(gate.folder, engines.SOCKET), "/run/docker.sock"]
        assert "DOCKER_HOST" in words and "unix:///run/docker.sock" in words
        assert "no engine listens at" in gate.note and str(tmp_path / "no-engine.sock") in gate.note
        assert not os.path.exists(dead)  # swept
        assert engines.alive(str(tmp_path / "rt"), "s1")
    finally:
        gate.close()
    assert not os.path.exists(gate.folder)
