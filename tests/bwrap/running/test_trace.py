"""trace.py: how strace is started, and the FIFO reader that keeps a bounded trace."""

from __future__ import annotations

import os

import pytest

from stockade.bwrap.running import trace
from stockade.core.errors import SandboxSetupError


def test_strace_runs_bwrap_tracing_only_failed_path_syscalls() -> None:
    argv = trace.strace_argv("/usr/bin/strace", "/x/fifo", ["/usr/bin/bwrap", "--args", "3", "--", "true"])
    assert argv[0] == "/usr/bin/strace" and argv[-5:] == ["--", "/usr/bin/bwrap", "--args", "3", "--", "true"][-5:]
    for option in ("-f", "--seccomp-bpf", "-Z", "-qq"):
        assert option in argv
    assert argv[argv.index("-o") + 1] == "/x/fifo"
    traced = argv[argv.index("-e", argv.index("signal=none")) + 1]
    assert traced.startswith("trace=openat,") or "openat" in traced.split("=")[1].split(",")
    assert "newfstatat" not in traced  # every open's fstat would stop twice


def test_no_strace_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "SEARCH_PATH", "/nonexistent")
    with pytest.raises(SandboxSetupError, match="apt-get install strace"):
        trace.find_strace()


def test_the_reader_keeps_lines_until_the_end_mark_and_bounds_them(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setattr(trace, "find_strace", lambda: "/usr/bin/strace")
    monkeypatch.setattr(trace, "MAX_LINES", 3)
    tracer = trace.Tracer()
    folder = tracer.folder
    assert os.stat(folder).st_mode & 0o077 == 0
    writer = os.open(tracer.fifo, os.O_WRONLY)
    os.write(writer, b"1 a\n2 b\n" + b"3 " + b"c" * (trace.MAX_LINE + 10) + b"\n4 d\n5 partial")
    os.close(writer)
    lines = tracer.finish()
    assert lines[:2] == ["1 a", "2 b"] and len(lines) == 3 and len(lines[2]) == trace.MAX_LINE
    assert tracer.dropped == 2  # "4 d" and the unterminated last line, ended by the end mark
    assert not os.path.exists(folder)
