"""The administrator's baseline in real runs: a user's wider policy is bounded inside the sandbox,
a broken baseline stops the run with one line, and `check` and `explain` show it as its own layer."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

from tests.e2e.boxes import Box


def _stockade(box: Box, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", *args],
        cwd=box.project,
        env={**box.env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_user_s_wider_policy_is_bounded_inside_the_sandbox(vbox: Box) -> None:
    config = vbox.home / ".config" / "stockade" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{vbox.outside}"]\n')
    script = f"echo one > {vbox.outside}/planted && echo two > {vbox.project}/work.txt"
    control = vbox.run(script)
    assert control.returncode == 0 and (vbox.outside / "planted").exists(), control.stderr  # the user's own policy allows it
    (vbox.outside / "planted").unlink()

    admin = vbox.root / "admin-policy.toml"
    admin.write_text('[filesystem]\nallow_write = ["."]\n')
    bounded = vbox.run(script, env={"STOCKADE_SYSTEM_POLICY": str(admin)})
    assert bounded.returncode != 0 and not (vbox.outside / "planted").exists(), bounded
    assert vbox.run(f"echo two > {vbox.project}/work.txt", env={"STOCKADE_SYSTEM_POLICY": str(admin)}).returncode == 0  # the project still
    assert "left out or lowered: allow_write" in bounded.stderr and str(vbox.outside) in bounded.stderr, bounded.stderr


def test_a_broken_baseline_stops_the_run_with_one_line_and_exit_2(vbox: Box) -> None:
    admin = vbox.root / "admin-policy.toml"
    admin.write_text('[network]\nallow = "pypi.org"\n')
    broken = vbox.run(f"echo ran > {vbox.project}/ran.txt", env={"STOCKADE_SYSTEM_POLICY": str(admin)})
    assert broken.returncode == 2 and not (vbox.project / "ran.txt").exists(), broken
    assert broken.stderr.count("\n") == 1 and f"{admin}:2:" in broken.stderr and "Traceback" not in broken.stderr, broken.stderr
    admin.unlink()
    missing = vbox.run("true", env={"STOCKADE_SYSTEM_POLICY": str(admin)})
    assert missing.returncode == 2 and "the system baseline cannot be read" in missing.stderr, missing


def test_check_and_explain_show_the_baseline_as_its_own_layer(vbox: Box) -> None:
    admin = vbox.root / "admin-policy.toml"
    admin.write_text('[network]\nallow = ["pypi.org"]\n[limits]\npids = 64\n')
    config = vbox.home / ".config" / "stockade" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('extends = ["default"]\n[network]\nallow = ["pypi.org", "example.com"]\n')
    env = {"STOCKADE_SYSTEM_POLICY": str(admin)}
    check = _stockade(vbox, "check", env=env)
    assert check.returncode == 0 and "left out or lowered: network allow example.com; [limits] pids lowered to the baseline's" in check.stderr, check
    shown = tomllib.loads(check.stdout)
    assert shown["network"]["allow"] == ["pypi.org"] and shown["limits"]["pids"] == 64, check.stdout
    data = json.loads(_stockade(vbox, "check", "--json", env=env).stdout)
    assert data["baseline"]["files"] == [str(admin)] and data["network"]["allow"] == ["pypi.org"], data["baseline"]
    explain = _stockade(vbox, "explain", env={**env, "COLUMNS": "200"})
    assert explain.returncode == 0 and f"Within the system baseline: {admin}" in explain.stdout, explain.stdout
    plain = _stockade(vbox, "check")
    assert "baseline" not in plain.stderr and tomllib.loads(plain.stdout)["network"]["allow"] == ["pypi.org", "example.com"]  # the control
