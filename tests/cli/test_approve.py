"""`stockade approve` without a waiting run: one line each, never a traceback (the live answers are in tests/e2e/test_approve.py)."""

from __future__ import annotations

import pytest

from stockade.cli.main import main


def test_nothing_waits_when_no_daemon_runs(project: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["approve"]) == 0
    assert "no request is waiting" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "says"), [(["approve", "ab12"], "give the answer after the id"),
                                             (["approve", "ab12", "maybe"], "unknown answer 'maybe'"),
                                             (["approve", "ab12", "once"], "no request waits under id 'ab12'")])  # fmt: skip
def test_a_bad_call_is_one_line_with_2(project: object, capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
