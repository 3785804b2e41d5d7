"""`stockade run --max-output`: the first BYTES pass, the rest is drained and counted, the exit status is kept (ESCAPES 73)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stockade.cli.output_limit import OutputLimit
from tests.cli.integration_support import World


def _child(code: str) -> int:
    return subprocess.run([sys.executable, "-c", code]).returncode


def test_limit_cuts_both_streams_together_and_keeps_the_exit_status(capfd: pytest.CaptureFixture[str]) -> None:
    with OutputLimit(10) as limit:
        code = _child(
            "import sys; sys.stdout.write('a' * 6); sys.stdout.flush(); sys.stderr.write('b' * 6); sys.stderr.flush(); sys.stdout.write('c' * 50000); sys.exit(7)"
        )
        print("stockade: held until the output is drained", file=sys.stderr)
    out, err = capfd.readouterr()
    assert code == 7
    passed_err = err[: err.index("stockade: output cut")]
    assert len(out) + len(passed_err) == 10 and out.startswith("aaaaaa") and set(passed_err) <= {"b"}
    assert f"output cut after 10 bytes; {50002} more bytes were discarded (--max-output 10)" in err
    assert err.index("output cut after") < err.index("held until the output is drained")
    assert limit.forwarded == 10 and limit.discarded == 50002


def test_under_the_limit_nothing_is_said(capfd: pytest.CaptureFixture[str]) -> None:
    with OutputLimit(1000):
        _child("print('hello'); import sys; print('err', file=sys.stderr)")
    out, err = capfd.readouterr()
    assert out == "hello\n" and err == "err\n"


def test_a_flood_is_drained_not_buffered(capfd: pytest.CaptureFixture[str]) -> None:
    with OutputLimit(100) as limit:
        code = _child("import os\nblock = b'y' * 65536\nfor _ in range(3200): os.write(1, block)")  # 200 MiB
    out, err = capfd.readouterr()
    assert code == 0 and len(out) == 100 and limit.discarded == 3200 * 65536 - 100
    assert "output cut after 100 bytes" in err


def test_fds_are_restored(capfd: pytest.CaptureFixture[str]) -> None:
    before = os.fstat(1).st_ino, os.fstat(2).st_ino
    with OutputLimit(5):
        pass
    assert (os.fstat(1).st_ino, os.fstat(2).st_ino) == before


@pytest.mark.sandbox
def test_a_sandboxed_flood_is_cut_with_a_note(sandbox: None, world: World) -> None:
    result = world.stockade("run", "--max-output", "1000", "--", "/bin/sh", "-c", "yes | head -c 50000000; echo tail >&2; exit 3")
    assert result.returncode == 3
    assert result.stdout == "y\n" * 500
    assert "stockade: output cut after 1000 bytes; 49999005 more bytes were discarded" in result.stderr
    assert "tail" not in result.stderr
