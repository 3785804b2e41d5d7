"""Full-screen and interactive programs at a real terminal, bare and under `stockade run`:
an interactive bash with its own job control, less, vim and the Python REPL."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.terminal.conftest import need
from tests.terminal.shell import PREFIXES, Shell, World


@pytest.mark.parametrize("way", list(PREFIXES))
def test_an_interactive_bash_inside_keeps_its_own_job_control(shell: Shell, way: str) -> None:
    shell.child.sendline(f"{PREFIXES[way]}bash --norc --noprofile -i")
    shell.child.expect("PROMPT\\$ ")  # the inner shell's prompt (same PS1)
    shell.child.sendline("sleep 30")
    time.sleep(1)
    shell.key("z")
    shell.child.expect("Stopped")  # the inner shell stopped its job and took the terminal back
    shell.child.expect("PROMPT\\$ ")
    shell.child.sendline("fg")
    time.sleep(0.5)
    shell.key("c")
    shell.child.expect("PROMPT\\$ ")
    shell.child.sendline("echo inner-$((40+2)); exit 5")
    said = shell.until_prompt()
    assert "inner-42" in said
    assert shell.status() == 5


@pytest.mark.parametrize("way", list(PREFIXES))
def test_less_shows_a_file_and_quits(shell: Shell, world: World, way: str) -> None:
    need("less")
    (world.project / "notes.txt").write_text("first line of the notes\n")
    shell.child.sendline(f"{PREFIXES[way]}less notes.txt")
    shell.child.expect("first line of the notes")
    shell.child.send("q")
    shell.until_prompt()
    assert shell.status() == 0


@pytest.mark.parametrize("way", list(PREFIXES))
def test_vim_edits_and_writes_a_file(shell: Shell, world: World, way: str) -> None:
    vim = "vim" if shutil.which("vim") else need("vi")
    target = world.project / "edit.txt"
    target.write_text("hello\n")
    shell.child.sendline(f"{PREFIXES[way]}{vim} -u NONE -N edit.txt")
    shell.child.expect("edit.txt")
    time.sleep(0.5)
    shell.child.send("ihi \x1b:wq\r")
    shell.until_prompt()
    assert shell.status() == 0
    assert target.read_text() == "hi hello\n"


@pytest.mark.parametrize("way", list(PREFIXES))
def test_the_python_repl_reads_lines_and_survives_ctrl_c(shell: Shell, way: str) -> None:
    shell.child.sendline(f"{PREFIXES[way]}python3 -q")
    shell.child.expect(">>> ")
    shell.child.sendline("print(6 * 7)")
    shell.child.expect("42")
    shell.child.expect(">>> ")
    shell.key("c")
    shell.child.expect("KeyboardInterrupt")
    shell.child.expect(">>> ")
    shell.child.sendline("raise SystemExit(9)")
    shell.until_prompt()
    assert shell.status() == 9
