"""The sandbox cannot reach the user's terminal: it has a pty of stockade's own (bwrap/running/console.py).

The attack (a hostile review's): a process started in the background ignores SIGTTOU and
SIGTTIN, makes itself the terminal's foreground group and reads what the user types next to
another program (a password). Bare, it steals it: that is the control. Under stockade it only
reaches its own pty, which gets the user's keys only while stockade's job has the terminal.
"""

from __future__ import annotations

import time

import pytest

from tests.terminal.shell import PREFIXES, Shell, World

STEAL = """
import os, signal, sys, time
for number in (signal.SIGTTOU, signal.SIGTTIN, signal.SIGHUP):
    signal.signal(number, signal.SIG_IGN)
os.setpgid(0, 0)
fd = os.open("/dev/tty", os.O_RDWR)
print("R" "EADY", flush=True)
got = b""
deadline = time.monotonic() + 6
while time.monotonic() < deadline:
    try:
        os.tcsetpgrp(fd, os.getpgrp())
    except OSError:
        pass
    os.set_blocking(fd, False)
    try:
        got += os.read(fd, 100)
    except OSError:
        pass
    time.sleep(0.01)
with open(sys.argv[1], "wb") as out:
    out.write(got)
"""


@pytest.mark.parametrize("way", list(PREFIXES))
def test_a_background_process_cannot_read_what_the_user_types_next(shell: Shell, world: World, way: str) -> None:
    (world.project / "steal.py").write_text(STEAL)
    stolen = world.project / "stolen.log"
    shell.run(f"{PREFIXES[way]}python3 steal.py {stolen} &")
    shell.child.expect("READY")
    time.sleep(0.5)
    shell.child.sendline("read -r secret; echo got-it=$secret")
    time.sleep(0.5)
    shell.child.sendline("hunter2")
    deadline = time.monotonic() + 20
    while not stolen.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    taken = stolen.read_bytes() if stolen.exists() else b""
    if way == "bare":
        assert b"hunter2" in taken  # the control: the attack is real
    else:
        assert b"hunter2" not in taken and b"unter" not in taken, taken


def test_the_command_cannot_change_the_users_terminal_modes(shell: Shell) -> None:
    """It sets its own terminal raw and leaves it so: the user's terminal is as it was."""
    shell.run("stockade run -- sh -c 'stty raw -echo; stty -a | grep -c -- -icanon'")
    modes = shell.run("stty -a")
    assert " icanon" in modes and " echo " in modes


def test_a_sigkill_of_stockade_at_a_terminal_leaves_nothing_running(shell: Shell) -> None:
    """The holder of the sandbox's session dies with stockade, and bwrap with the holder."""
    import os
    import subprocess

    tag = f"31.{os.getpid() % 1000}7"
    shell.start_line(f"stockade run -- sleep {tag}", settle=1.5)
    stockade = subprocess.run(["pgrep", "-f", f"stockade run -- sleep {tag}"], capture_output=True, text=True).stdout.split()
    assert stockade, "the run did not start"
    before = subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True, text=True).stdout.split()
    assert len(before) >= 4  # stockade, its session's holder, bwrap (two) and the command: all show the words
    os.kill(int(stockade[0]), 9)
    shell.until_prompt()
    deadline = time.monotonic() + 5
    while subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, subprocess.run(["pgrep", "-af", f"sleep {tag}"], capture_output=True, text=True).stdout
        time.sleep(0.05)
    modes = shell.run("stty -a")
    assert " icanon" in modes and " echo " in modes


def test_a_background_run_ends_when_its_terminal_hangs_up(world: World) -> None:
    """As the kernel would: the command's terminal sends it SIGHUP when the user's hangs up."""
    import os
    import subprocess

    opened = Shell.start(world)
    tag = f"4.{os.getpid() % 1000}9"
    opened.run(f"stockade run -- sh -c 'read x; sleep {tag}' &")
    time.sleep(1.0)
    assert subprocess.run(["pgrep", "-f", f"bin/stockade run -- sh -c read x; sleep {tag}"], capture_output=True).returncode == 0
    opened.child.close(force=True)  # the terminal goes away under the shell
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, subprocess.run(["pgrep", "-af", f"sleep {tag}"], capture_output=True, text=True).stdout
        time.sleep(0.1)
