"""`stockade run --max-output`: the head and the tail pass, the middle is drained and counted, the exit status is kept (ESCAPES 73)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stockade.cli.output_limit import OutputLimit
from tests.cli.integration_support import World


def _child(code: str) -> int:
    return subprocess.run([sys.executable, "-c", code]).returncode


def test_limit_keeps_the_head_and_the_tail_of_both_streams_and_the_exit_status(capfd: pytest.CaptureFixture[str]) -> None:
    with OutputLimit(20) as limit:
        code = _child(
            "import sys, time; sys.stdout.write('a' * 6); sys.stdout.flush(); sys.stderr.write('b' * 6); sys.stderr.flush(); "
            "time.sleep(0.3); sys.stdout.write('c' * 50000 + '\\nlast'); sys.exit(7)"
        )
        print("stockade: held until the output is drained", file=sys.stderr)
    out, err = capfd.readouterr()
    assert code == 7
    passed_err = err[: err.index("stockade: output cut")]
    head = out[: len(out) - len("last")]
    assert out.endswith("last") and set(head) <= {"a"} and set(passed_err) <= {"b"}  # the tail: its last whole line
    assert len(head) + len(passed_err) == 10  # the head: 10 bytes of both streams, as they came
    assert f"output cut: {50000 + 3} bytes dropped here (--max-output 20 keeps the first 10 and the last 10 bytes)" in err
    assert err.index("output cut") < err.index("held until the output is drained")
    assert limit.forwarded == 14


def test_a_tail_cut_mid_line_starts_at_its_first_whole_line(capfd: pytest.CaptureFixture[str]) -> None:
    with OutputLimit(200):
        _child("import sys\nfor n in range(1000): print(f'line {n:04d}')\nprint('5 passed in 0.1s')")
    out, err = capfd.readouterr()
    head, tail = out[:100], out[100:]
    assert head.startswith("line 0000\n") and tail.endswith("line 0999\n5 passed in 0.1s\n")
    assert tail.split("\n")[0].startswith("line ")  # a whole line first
    assert "output cut:" in err


def test_under_the_limit_nothing_is_said(capfd: pytest.CaptureFixture[str]) -> None:
    with OutputLimit(1000):
        _child("print('hello'); import sys; print('err', file=sys.stderr)")
    out, err = capfd.readouterr()
    assert out == "hello\n" and err == "err\n"


def test_a_flood_is_drained_not_buffered(capfd: pytest.CaptureFixture[str]) -> None:
    with OutputLimit(100) as limit:
        code = _child("import os\nblock = b'y' * 65536\nfor _ in range(3200): os.write(1, block)")  # 200 MiB
    out, err = capfd.readouterr()
    assert code == 0 and out == "y" * 100 and limit.discarded == 3200 * 65536 - 100
    assert "output cut: " in err


def test_fds_are_restored(capfd: pytest.CaptureFixture[str]) -> None:
    before = os.fstat(1).st_ino, os.fstat(2).st_ino
    with OutputLimit(5):
        pass
    assert (os.fstat(1).st_ino, os.fstat(2).st_ino) == before


@pytest.mark.sandbox
def test_a_sandboxed_flood_is_cut_with_a_note(sandbox: None, world: World) -> None:
    result = world.stockade("run", "--max-output", "1000", "--", "/bin/sh", "-c", "yes | head -c 50000000; echo the-summary >&2; exit 3")
    assert result.returncode == 3
    assert result.stdout.startswith("y\n" * 250) and len(result.stdout) <= 1000
    assert "stockade: output cut: " in result.stderr and "(--max-output 1000 keeps the first 500 and the last 500 bytes)" in result.stderr
    assert result.stderr.rstrip().endswith("the-summary") or "the-summary" in result.stderr  # the end is kept
