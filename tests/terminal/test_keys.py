"""Ctrl-C, Ctrl-\\, Ctrl-Z, fg, bg and window sizes at a real terminal: under `stockade run`
exactly as bare (each scenario runs both ways), with no line from stockade.

Seen failing before the signal contract (supervise.py): Ctrl-C gave "bwrap could not finish
setting up the sandbox" and 125, a trapped Ctrl-C lost the command's status, and the shell's
loop went on after Ctrl-C.
"""

from __future__ import annotations

import time

import pytest

from tests.terminal.shell import PREFIXES, Shell, World

TRAP_INT = 'sh -c \'trap "echo trapped-INT; exit 3" INT; echo RE""ADY; while :; do sleep 0.05; done\''
READY = "READY"  # typed as RE""ADY: only the command's own output matches


@pytest.mark.parametrize("way", list(PREFIXES))
def test_ctrl_c_ends_the_command_with_130_and_stops_the_list(shell: Shell, way: str) -> None:
    prefix = PREFIXES[way]
    shell.start_line(f"{prefix}sleep 30; echo after-the-list", settle=1.5)
    shell.key("c")
    said = shell.until_prompt()
    assert shell.status() == 130
    assert "after-the-list" not in said  # bash saw a job killed by SIGINT: the rest of the list is dropped
    assert "stockade" not in said.replace("stockade run --", "")


@pytest.mark.parametrize("way", list(PREFIXES))
def test_a_command_that_traps_ctrl_c_keeps_its_own_status(shell: Shell, way: str) -> None:
    shell.start_line(PREFIXES[way] + TRAP_INT, ready=READY)
    shell.key("c")
    said = shell.until_prompt()
    assert said.count("trapped-INT") == 1  # once, not once from the terminal and once more from stockade
    assert shell.status() == 3
    assert "stockade:" not in said


@pytest.mark.parametrize("way", list(PREFIXES))
def test_ctrl_backslash_is_sigquit_131_without_an_error(shell: Shell, way: str) -> None:
    shell.start_line(f"{PREFIXES[way]}sleep 30", settle=1.5)
    shell.key("\\")
    said = shell.until_prompt()
    assert shell.status() == 131
    assert "stockade:" not in said


@pytest.mark.parametrize("way", list(PREFIXES))
def test_a_loop_in_a_script_stops_at_ctrl_c(shell: Shell, way: str) -> None:
    """A script (no job control) sees the Ctrl-C itself, as bash needs to stop its loop."""
    shell.start_line(f"bash -c 'for i in 1 2 3; do {PREFIXES[way]}sleep 30; echo loop-$i; done; echo end'", settle=1.5)
    shell.key("c")
    said = shell.until_prompt()
    assert "loop-1" not in said and "end" not in said
    assert shell.status() == 130


@pytest.mark.parametrize("way", list(PREFIXES))
def test_ctrl_z_stops_one_job_fg_resumes_it(shell: Shell, way: str) -> None:
    shell.start_line(f"{PREFIXES[way]}sh -c 'echo RE\"\"ADY; sleep 2; echo finished'", ready=READY)
    shell.key("z")
    said = shell.until_prompt()
    assert "Stopped" in said
    jobs = shell.run("jobs")
    assert jobs.count("Stopped") == 1 and jobs.count("[") == 1  # one job in the shell's table
    time.sleep(2.5)  # stopped: it must not finish meanwhile
    assert "finished" not in shell.run("true")
    shell.child.sendline("fg")
    done = shell.until_prompt()
    assert "finished" in done
    assert shell.status() == 0
    assert "stockade:" not in done


@pytest.mark.parametrize("way", list(PREFIXES))
def test_bg_runs_a_stopped_job_in_the_background(shell: Shell, way: str) -> None:
    shell.start_line(f"{PREFIXES[way]}sh -c 'echo RE\"\"ADY; sleep 1; echo finished-in-bg'", ready=READY)
    shell.key("z")
    shell.until_prompt()
    shell.run("bg")
    waited = shell.run("wait; echo waited=$?", timeout=20)
    assert "finished-in-bg" in waited or "finished-in-bg" in shell.child.before
    assert "waited=0" in waited


@pytest.mark.parametrize("way", list(PREFIXES))
def test_the_command_owns_the_foreground_and_gets_window_sizes(shell: Shell, way: str) -> None:
    probe = (
        "python3 -c 'import os, signal, sys; "
        'print("FORE" "GROUND", os.tcgetpgrp(0) == os.getpgrp(), flush=True); '
        'signal.signal(signal.SIGWINCH, lambda *a: (print("size", os.get_terminal_size(0)), sys.exit(0))); '
        "signal.pause()'"
    )
    shell.start_line(PREFIXES[way] + probe, ready="FOREGROUND")
    shell.child.expect(["True", "False"])
    assert shell.child.after == "True"
    shell.child.setwinsize(30, 120)
    said = shell.until_prompt()
    assert "columns=120, lines=30" in said
    assert shell.status() == 0


@pytest.mark.parametrize("way", list(PREFIXES))
def test_terminal_modes_are_back_after_a_command_killed_in_raw_mode(shell: Shell, way: str) -> None:
    shell.start_line(f"{PREFIXES[way]}python3 -c 'import os, tty; tty.setraw(0); print(\"raw\", flush=True); os.kill(os.getpid(), 9)'")
    shell.until_prompt()
    modes = shell.run("stty -a")
    assert " icanon" in modes and " echo " in modes


@pytest.mark.parametrize("way", list(PREFIXES))
def test_ctrl_c_to_a_command_named_with_an_equals_sign_keeps_its_status(shell: Shell, world: World, way: str) -> None:
    script = world.project / "a=b"
    script.write_text("#!/bin/sh\ntrap 'echo trapped-INT; exit 7' INT\necho RE\"\"ADY\nwhile :; do sleep 0.05; done\n")
    script.chmod(0o755)
    shell.start_line(f"{PREFIXES[way]}./a=b", ready=READY)
    shell.key("c")
    said = shell.until_prompt()
    assert said.count("trapped-INT") == 1
    assert shell.status() == 7


def test_a_burst_of_sigcont_does_not_break_the_run(shell: Shell) -> None:
    """SIGCONT's handler only wakes the console's thread: a burst cannot nest it and deadlock."""
    import os
    import subprocess

    tag = f"2.{os.getpid() % 1000}3"
    shell.start_line(f"stockade run -- sh -c 'sleep {tag}; echo fin\"\"ished'", settle=0.8)
    found = subprocess.run(["pgrep", "-f", f"stockade run -- sh -c sleep {tag}"], capture_output=True, text=True).stdout.split()
    assert found
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        for pid in found:
            try:
                os.kill(int(pid), 18)  # SIGCONT
            except ProcessLookupError:
                pass
    said = shell.until_prompt()
    assert "finished" in said and "stockade:" not in said
    assert shell.status() == 0


@pytest.mark.parametrize("way", list(PREFIXES))
def test_started_in_the_background_then_fg_gets_the_keys(shell: Shell, way: str) -> None:
    """`fg` sends no signal to a job that runs: the console notices it has the terminal anyway."""
    shell.run(f"{PREFIXES[way]}sh -c 'read x; echo got=$x' &")
    time.sleep(1.0)
    shell.child.sendline("fg")
    time.sleep(1.0)
    shell.child.sendline("typed")
    said = shell.until_prompt()
    assert "got=typed" in said


@pytest.mark.parametrize("way", list(PREFIXES))
def test_a_pipeline_partner_writes_whole_lines_to_the_terminal(shell: Shell, way: str) -> None:
    """The user's terminal is raw for the keys only: `cat` after a pipe keeps its carriage returns."""
    shell.child.sendline(f"{PREFIXES[way]}sh -c 'sleep 0.5; echo one; echo two' | cat")
    shell.child.expect("PROMPT\\$ ")
    assert "one\r\ntwo\r\n" in shell.child.before


def test_a_pipeline_partner_keeps_the_modes_it_set(shell: Shell) -> None:
    """A pager after a pipe sets the modes it wants while stockade runs: stockade does not undo them."""
    shell.child.sendline("stockade run -- sleep 1 | (sleep 0.4; stty tostop; sleep 1.5; stty -a | grep -o -- ' tostop')")
    shell.child.expect("PROMPT\\$ ")
    assert " tostop" in shell.child.before
    shell.run("stty -tostop")


def test_an_alarm_sent_to_stockade_ends_the_command_and_leaves_the_terminal_as_it_was(shell: Shell) -> None:
    import os
    import subprocess

    tag = f"3.{os.getpid() % 1000}1"
    shell.start_line(f"sh -c 'stockade run -- sleep {tag}; echo status=$?; stty -a | grep -o -- \" icanon\"'", settle=1.0)
    found = subprocess.run(["pgrep", "-f", f"bin/stockade run -- sleep {tag}"], capture_output=True, text=True).stdout.split()
    assert found
    os.kill(int(found[0]), 14)  # SIGALRM: passed on to the command, whose death by it stockade shares
    said = shell.until_prompt()
    assert "status=142" in said and " icanon" in said


def test_the_sandbox_cannot_choose_which_keys_signal_stockades_job(shell: Shell) -> None:
    """The sandbox sets its pty's Ctrl-C to Enter: an Enter interrupts the command (its pty's
    business) but is no Ctrl-C for the script that runs stockade."""
    script = 'trap "echo PARENT-GOT-INT" INT; stockade run -- sh -c "stty intr ^M; echo RE""ADY; read x"; echo parent-goes-on'
    shell.start_line(f"bash -c '{script}'", ready=READY)
    time.sleep(0.3)
    shell.child.send("\r")  # Enter
    said = shell.until_prompt()
    assert "parent-goes-on" in said and "PARENT-GOT-INT" not in said
