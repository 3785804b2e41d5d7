"""A question the user sees: while a held request is asked about at the terminal, the sandbox
is stopped, so a spinner cannot draw over the question, and the prompt counts down.

Seen failing before the hold (bwrap/foreground.py Hold): the spinner's output went on under
the question and the seconds never changed.
"""

from __future__ import annotations

import os
import pty
import re
import select
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.e2e.test_approve import PROMPT, QUESTION, approval_world, curl, project, stockade_words


@pytest.fixture(scope="module")
def asking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    with approval_world(tmp_path_factory.mktemp("question")) as made:
        yield made


SPINNER = "i=0; while :; do i=$((i+1)); printf '\\r%s spin-%s' '|' $i; sleep 0.02; done"


def _read_for(fd: int, seconds: float) -> bytes:
    out = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _w, _x = select.select([fd], [], [], 0.05)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
    return out


def _start(world: SimpleNamespace, folder: Path, script: str) -> tuple[int, int]:
    argv = stockade_words("run", "--", "/bin/sh", "-c", script)
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(folder)
            os.execve(argv[0], argv, world.box.env)
        finally:
            os._exit(127)
    return pid, fd


def test_a_spinner_stops_while_the_question_counts_down(asking: SimpleNamespace) -> None:
    world = asking
    folder = project(world, "spinner")
    script = f"({SPINNER}) & spinner=$!; sleep 0.5; {curl(world)}; kill $spinner; echo; echo spun-after"
    pid, fd = _start(world, folder, script)
    try:
        before = b""
        deadline = time.monotonic() + 60
        while QUESTION not in before or PROMPT not in before[before.find(QUESTION) :]:
            assert time.monotonic() < deadline, before
            before += _read_for(fd, 0.1)
        assert b"spin-" in before  # control: the spinner ran before the question
        during = before[before.find(QUESTION) :] + _read_for(fd, 1.3)
        os.kill(pid, 18)  # SIGCONT (a `fg` after a Ctrl-Z at the question): the question still holds the output
        during += _read_for(fd, 1.3)
        assert b"spin-" not in during, during  # held: nothing the sandbox writes draws over the question
        seconds = [int(n) for n in re.findall(rb"\((\d+) s\): ", during)]
        assert len(set(seconds)) >= 2 and seconds == sorted(seconds, reverse=True), seconds  # a countdown
        os.write(fd, b"o\r")
        after = _read_for(fd, 3)
        assert b"status=200" in after and b"spin-" in after, after  # resumed, and the answer was the user's
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)


def test_ctrl_c_at_the_question_refuses_and_interrupts_the_command(asking: SimpleNamespace) -> None:
    """As without the question: Ctrl-C goes to the command (130), and the request is refused."""
    world = asking
    folder = project(world, "interrupt")
    script = f'{curl(world)}; echo NOT""REACHED'
    pid, fd = _start(world, folder, script)
    try:
        seen = b""
        deadline = time.monotonic() + 60
        while PROMPT not in seen:
            assert time.monotonic() < deadline, seen
            seen += _read_for(fd, 0.1)
        os.write(fd, b"\x03")
        seen += _read_for(fd, 3)
    finally:
        _pid, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == -2, seen  # stockade ends by the SIGINT that ended its command
    assert b"NOTREACHED" not in seen and b"Traceback" not in seen and b"could not" not in seen, seen


def test_a_terminated_networked_run_still_checks_and_its_audit_is_complete(asking: SimpleNamespace) -> None:
    """SIGTERM mid-run: the command dies by it, and so does stockade, but only after its checks
    (a runs-later file the command made is named in the summary) and after its network session
    closed (the request's record is whole)."""
    import subprocess

    from tests.e2e.test_approve import HOST, audit

    world = asking
    folder = project(world, "terminated", f'[network]\nallow = ["{HOST}"]\n')
    script = f"{curl(world)}; echo x > conftest.py; echo ready; exec sleep 30"
    run = subprocess.Popen(
        stockade_words("run", "--", "/bin/sh", "-c", script), cwd=folder, env=world.box.env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert run.stdout is not None
    assert run.stdout.readline().strip() == "status=200"
    assert run.stdout.readline().strip() == "ready"
    run.terminate()
    _out, err = run.communicate(timeout=60)
    assert run.returncode == -15, err
    assert "conftest.py" in err and "Traceback" not in err and "error" not in err, err
    records = [r for r in audit(folder, world) if "echo x > conftest.py" in " ".join(str(word) for word in r.get("command") or [])]  # type: ignore[attr-defined]
    assert [r.get("decision") for r in records] == ["allow"], records
