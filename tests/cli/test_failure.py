"""The last resort: an unforeseen error becomes one `stockade: error:` line naming the path and fix, the traceback only with --debug."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from stockade.cli.failure import HINTS, describe, report

GENERIC = "see the message, fix what it names, and run it again"


@pytest.mark.parametrize(
    ("error", "line"),
    [
        pytest.param(FileNotFoundError(), "the working directory no longer exists: cd to a folder that does, then run it again", id="cwd-gone"),
        pytest.param(FileNotFoundError(errno.ENOENT, "No such file or directory", "/p/x"),
                     f"No such file or directory (/p/x): {GENERIC}", id="missing-file"),
        pytest.param(OSError(errno.EROFS, "Read-only file system", "/state"), f"Read-only file system (/state): {HINTS[errno.EROFS]}", id="erofs"),
        pytest.param(OSError(errno.ENOSPC, "No space left on device"), f"No space left on device: {HINTS[errno.ENOSPC]}", id="enospc-no-path"),
        pytest.param(OSError(errno.EDQUOT, "Disk quota exceeded", "/q"), f"Disk quota exceeded (/q): {HINTS[errno.EDQUOT]}", id="edquot"),
        pytest.param(PermissionError(errno.EACCES, "Permission denied", "/root/x"),
                     f"Permission denied (/root/x): {HINTS[errno.EACCES]}", id="eacces"),
        pytest.param(PermissionError(errno.EPERM, "Operation not permitted"), f"Operation not permitted: {HINTS[errno.EPERM]}", id="eperm"),
        pytest.param(OSError(errno.EIO, "Input/output error", "/dev/x"), f"Input/output error (/dev/x): {GENERIC}", id="other-errno"),
        pytest.param(OSError("plain words"), f"plain words: {GENERIC}", id="no-errno"),
        pytest.param(ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), f"Connection reset by peer: {GENERIC}", id="subclass"),
        pytest.param(RecursionError("maximum recursion depth exceeded"), "the input is nested too deeply to read", id="recursion"),
        pytest.param(MemoryError(), "out of memory", id="memory"),
        pytest.param(ValueError("bad thing"),
                     "internal error (ValueError: bad thing); run with --debug for the traceback, and please report it", id="internal"),
        pytest.param(KeyError("k"), "internal error (KeyError: 'k'); run with --debug for the traceback, and please report it", id="key-error"),
    ],
)  # fmt: skip
def test_describe(error: BaseException, line: str) -> None:
    assert describe(error) == line


def test_every_hint_is_for_an_errno() -> None:
    assert set(HINTS) == {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM}
    assert all(hint and "\n" not in hint for hint in HINTS.values())


def test_report_says_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    report(OSError(errno.EROFS, "Read-only file system", "/state"), debug=False)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"stockade: error: Read-only file system (/state): {HINTS[errno.EROFS]}\n"


def test_a_message_over_several_lines_is_said_on_one(capsys: pytest.CaptureFixture[str]) -> None:
    report(ValueError("first\nsecond\nthird"), debug=False)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(ValueError: first second third)" in err


def test_control_characters_in_a_path_are_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    report(OSError(errno.EACCES, "Permission denied", "/p/\x1b]0;pwned\x07"), debug=False)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "(/p/\\x1b]0;pwned\\x07)" in err


def test_debug_prints_the_traceback_before_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        raise ValueError("boom")
    except ValueError as error:
        report(error, debug=True)
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "ValueError: boom" in err
    assert err.splitlines()[-1] == "stockade: error: internal error (ValueError: boom); run with --debug for the traceback, and please report it"


def test_without_debug_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        raise ValueError("boom")
    except ValueError as error:
        report(error, debug=False)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(("debug", "traceback"), [([], False), (["--debug"], True)])
def test_a_command_that_fails_unforeseen_ends_in_exit_2_and_the_line(project: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch, debug: list[str], traceback: bool) -> None:  # fmt: skip
    """The Typer commands' last resort (cli/app.run_app) says it through report."""
    from stockade.cli import check
    from stockade.cli.main import main

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/state/x")

    monkeypatch.setattr(check, "select", broken)
    assert main([*debug, "check"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == f"stockade: error: No space left on device (/state/x): {HINTS[errno.ENOSPC]}"
    assert ("Traceback" in captured.err) is traceback
