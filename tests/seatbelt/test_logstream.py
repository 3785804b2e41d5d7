"""The log-stream collector, run against a stand-in `log` program: argv, lines, start and stop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stockade.seatbelt.logstream import LOG_COMMAND, LogStream, predicate


def fake_log(tmp_path: Path, body: str) -> str:
    script = tmp_path / "log"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_predicate_matches_the_tag() -> None:
    assert predicate("stockade-ab12_CD") == 'eventMessage CONTAINS "stockade-ab12_CD"'


def test_argv() -> None:
    assert LogStream("t1").argv() == [LOG_COMMAND, "stream", "--style", "ndjson", "--predicate", 'eventMessage CONTAINS "t1"']
    assert LOG_COMMAND == "/usr/bin/log"
    assert LogStream("t1", command="/x/log").argv()[0] == "/x/log"


def test_lines_arrive_and_a_still_running_stream_is_stopped(tmp_path: Path) -> None:
    command = fake_log(tmp_path, 'echo "Filtering the log data using \\"$5\\""\necho \'{"eventMessage":"deny t1"}\'\nexec sleep 30\n')
    stream = LogStream("t1", command=command)
    assert stream.start(ready_timeout=5) is True
    started = time.monotonic()
    lines = stream.stop(settle=0.01)
    assert time.monotonic() - started < 2  # terminated, not waited out
    assert lines == ['Filtering the log data using "eventMessage CONTAINS "t1""\n', '{"eventMessage":"deny t1"}\n']
    assert stream.stop() == lines  # stopping again changes nothing


def test_a_stream_that_ended_by_itself(tmp_path: Path) -> None:
    stream = LogStream("t1", command=fake_log(tmp_path, "echo one\nprintf 'two \\377\\n'\n"))
    assert stream.start(ready_timeout=5) is True
    deadline = time.monotonic() + 5
    while stream._proc is not None and stream._proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.stop() == ["one\n", "two \ufffd\n"]  # undecodable bytes replaced


def test_start_waits_for_the_first_line_only_as_long_as_told(tmp_path: Path) -> None:
    stream = LogStream("t1", command=fake_log(tmp_path, "exec sleep 30\n"))  # never says anything
    started = time.monotonic()
    assert stream.start(ready_timeout=0.1) is True
    assert time.monotonic() - started < 1
    assert stream.stop(settle=0) == []


@pytest.mark.parametrize("command", ["/nonexistent/log", "/etc"])
def test_a_log_that_cannot_run_is_reported(command: str) -> None:
    stream = LogStream("t1", command=command)
    assert stream.start() is False
    assert stream.stop() == []


def test_stop_before_start() -> None:
    assert LogStream("t1").stop() == []
