"""The signal matrix, from every kind of parent: `timeout`, `setsid`, a shell script, a CI
runner that kills the process group, an agent that kills only stockade, and a SIGKILL of
stockade. Each case runs bare and under `stockade run`, and both must end the same way: the
command gets the signal once, its own status (or death by the signal) comes back, stockade
prints no line, and nothing is left running.

Seen failing before the signal contract (supervise.py): `timeout` and a group kill gave
"bwrap could not finish setting up" with 125, and a trapped TERM lost its status.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.integration_support import STOCKADE
from tests.terminal.shell import World

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT]
WAYS = ["bare", "stockade"]


def _words(way: str, command: list[str]) -> list[str]:
    return command if way == "bare" else [STOCKADE, "run", "--", *command]


def _trapping(marker: Path, number: int, status: int) -> list[str]:
    """A command that records each delivery of `number` in `marker` and exits `status` at the first."""
    name = signal.Signals(number).name.removeprefix("SIG")
    return ["/bin/sh", "-c", f"trap 'echo got >> {marker}; exit {status}' {name}; echo ready; while :; do sleep 0.05; done"]


def _untrapped(tag: str) -> list[str]:
    return ["/bin/sh", "-c", f"echo ready; exec sleep 30.{tag}"]


def _start(world: World, words: list[str], *, session: bool) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        words, cwd=world.project, env=world.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=session,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _left(tag: str) -> list[str]:
    """Processes still running the marked sleep."""
    found = subprocess.run(["pgrep", "-f", f"sleep 30.{tag}"], capture_output=True, text=True).stdout.split()
    return found


def _gone(tag: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _left(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _left(tag)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("number", SIGNALS, ids=lambda n: signal.Signals(n).name)
def test_an_agent_that_kills_only_stockade(world: World, way: str, number: int) -> None:
    marker = world.project / f"got-{way}"
    proc = _start(world, _words(way, _trapping(marker, number, 4)), session=False)
    os.kill(proc.pid, number)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 4
    assert marker.read_text() == "got\n"  # once
    assert "stockade" not in err


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("number", SIGNALS, ids=lambda n: signal.Signals(n).name)
def test_a_ci_runner_that_kills_the_process_group(world: World, way: str, number: int) -> None:
    marker = world.project / f"got-{way}"
    proc = _start(world, _words(way, _trapping(marker, number, 5)), session=True)
    os.killpg(proc.pid, number)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 5
    assert marker.read_text() == "got\n"  # once, though stockade and the command were both signalled
    assert "stockade" not in err


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("number", SIGNALS, ids=lambda n: signal.Signals(n).name)
def test_an_untrapped_signal_kills_the_command_and_stockade_by_it(world: World, way: str, number: int) -> None:
    tag = f"{number}{WAYS.index(way)}{os.getpid() % 1000}"
    proc = _start(world, _words(way, _untrapped(tag)), session=True)
    os.kill(proc.pid, number)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == -number  # as a parent sees a child killed by the signal
    assert "stockade" not in err and "core dumped" not in err
    assert _gone(tag)


@pytest.mark.parametrize("way", WAYS)
def test_timeout_with_a_command_that_traps_term(world: World, way: str) -> None:
    """timeout signals its child, then its own group (stockade's): the command still traps it once."""
    marker = world.project / f"got-{way}"
    words = ["timeout", "--preserve-status", "-s", "TERM", "1", *_words(way, _trapping(marker, signal.SIGTERM, 3))]
    done = subprocess.run(words, cwd=world.project, env=world.env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 3
    assert marker.read_text() == "got\n"
    assert "stockade" not in done.stderr


@pytest.mark.parametrize("way", WAYS)
def test_timeout_kills_a_command_without_a_word(world: World, way: str) -> None:
    tag = f"7{WAYS.index(way)}{os.getpid() % 1000}"
    words = ["timeout", "1", *_words(way, _untrapped(tag))]
    done = subprocess.run(words, cwd=world.project, env=world.env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 124
    assert done.stderr == ""
    assert _gone(tag)


@pytest.mark.parametrize("way", WAYS)
def test_under_setsid_a_term_to_stockade_reaches_the_command(world: World, way: str) -> None:
    marker = world.project / f"got-{way}"
    proc = _start(world, ["setsid", "-w", *_words(way, _trapping(marker, signal.SIGTERM, 6))], session=False)
    os.kill(_below_setsid(proc.pid), signal.SIGTERM)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 6
    assert marker.read_text() == "got\n"
    assert "stockade" not in err


def _below_setsid(pid: int) -> int:
    """setsid forks only when it must (a group leader): the command is setsid's process or its child."""
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        if not handle.read().startswith(b"setsid"):
            return pid
    return int(subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()[0])


@pytest.mark.parametrize("way", WAYS)
def test_a_shell_script_parent_passes_term_on(world: World, way: str) -> None:
    marker = world.project / f"got-{way}"
    command = shlex.join(_words(way, _trapping(marker, signal.SIGTERM, 8)))
    # The trap is set before the child starts: the child's "ready" could otherwise reach the test
    # (and its TERM reach bash) before bash had run `trap`, killing bash and leaving the child.
    # bash says "assigned" once $child is set: the child's "ready" alone could reach the test (and its
    # TERM reach bash) before that, and the trap would then kill no one (seen under load).
    script = f"trap 'kill -TERM $child' TERM; {command} & child=$!; echo assigned; wait $child; wait $child; echo status=$?"
    proc = subprocess.Popen(["/bin/bash", "-c", script], cwd=world.project, env=world.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    try:
        assert {proc.stdout.readline().strip(), proc.stdout.readline().strip()} == {"ready", "assigned"}
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:  # nothing of a failed attempt is left looping
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "status=8" in out
    assert marker.read_text() == "got\n"
    assert "stockade" not in err


def test_sigkill_of_stockade_leaves_nothing_running_and_the_next_run_works(world: World) -> None:
    tag = f"9{os.getpid() % 1000}"
    proc = _start(world, _words("stockade", _untrapped(tag)), session=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGKILL
    assert _gone(tag)  # --die-with-parent took the sandbox with it
    again = subprocess.run(
        [STOCKADE, "run", "--", "/bin/sh", "-c", "echo fine"], cwd=world.project, env=world.env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0 and again.stdout == "fine\n"


@pytest.mark.parametrize("way", WAYS)
def test_signals_ignored_by_the_parent_stay_ignored_in_the_command(world: World, way: str) -> None:
    """nohup, or a script's `trap '' INT QUIT`: the command inherits them ignored, as bare."""
    probe = ["grep", "SigIgn", "/proc/self/status"]
    words = ["/bin/sh", "-c", 'trap "" INT QUIT; exec nohup "$@" 2>/dev/null', "sh", *_words(way, probe)]
    done = subprocess.run(words, cwd=world.project, env=world.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    ignored = int((world.project / "nohup.out").read_text().split()[1], 16) if not done.stdout else int(done.stdout.split()[1], 16)
    for number in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        assert ignored & (1 << (number - 1)), (way, hex(ignored))


@pytest.mark.parametrize("way", WAYS)
def test_a_nohup_run_survives_its_sessions_hangup(world: World, way: str) -> None:
    marker = world.project / f"survived-{way}"
    command = ["/bin/sh", "-c", f"sleep 1; echo yes > {marker}"]
    proc = subprocess.Popen(["nohup", *_words(way, command)], cwd=world.project, env=world.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGHUP)
    assert proc.wait(timeout=30) == 0
    assert marker.read_text() == "yes\n"


@pytest.mark.parametrize("way", WAYS)
def test_a_first_word_with_an_equals_sign_keeps_its_trap_and_status(world: World, way: str) -> None:
    script = world.project / "a=b"
    marker = world.project / f"got-{way}"
    script.write_text(f"#!/bin/sh\ntrap 'echo got >> {marker}; exit 7' TERM\necho ready\nwhile :; do sleep 0.05; done\n")
    script.chmod(0o755)
    proc = _start(world, _words(way, ["./a=b"]), session=True)
    os.kill(proc.pid, signal.SIGTERM)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 7, err
    assert marker.read_text() == "got\n"


def test_a_closed_stdout_is_no_traceback(world: World) -> None:
    done = subprocess.run(
        ["/bin/sh", "-c", f"'{STOCKADE}' run -q -- true >&-"], cwd=world.project, env=world.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done
