"""The Linux backend issue's acceptance line, as a test."""

from __future__ import annotations

from tests.e2e.boxes import Box


def test_home_write_and_ssh_read_fail_while_project_write_works(vbox: Box) -> None:
    """The issue's line, with the real home shown (so failures are the walls, not ENOENT); the
    private home's version is tests/e2e/test_private_home.py."""
    host_home = vbox.policy('extends = ["default"]\n[filesystem]\nhome = "host"\n')
    attack = vbox.run("echo x > ~/probe; echo home=$?; cat ~/.ssh/id_*; echo ssh=$?", options=["--policy", str(host_home)])
    assert "home=1" in attack.stdout or "home=2" in attack.stdout, attack
    assert "CANARY-SSH" not in attack.stdout and "ssh=1" in attack.stdout
    assert "Read-only file system" in attack.stderr and "Permission denied" in attack.stderr, attack.stderr
    assert not (vbox.home / "probe").exists()
    control = vbox.run("echo x > ./probe", options=["--policy", str(host_home)])
    assert control.returncode == 0, control.stderr
    assert (vbox.project / "probe").read_text() == "x\n"


def test_exit_status_and_signals_pass_through(box: Box) -> None:
    assert box.run("exit 7").returncode == 7
    assert box.run("kill -TERM $$").returncode == 128 + 15
    assert box.run(argv=["no-such-command-xyz"]).returncode == 127
    assert box.run(argv=[str(box.project)]).returncode == 126
