"""The console entry point's dispatch: --version, run and hook routing, one error line and the exit codes."""

from __future__ import annotations

import sys

import pytest

from stockade.cli import app, hook, main, run_command
from stockade.cli.version import VERSION
from stockade.core.errors import (
    CannotExecuteError,
    CommandNotFoundError,
    ExitCode,
    SandboxSetupError,
    StockadeError,
    UsageError,
)


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[list[str]]]:
    """Record where main sends its words: the lean run path, the hook, or Typer."""
    seen: dict[str, list[list[str]]] = {"run": [], "hook": [], "app": []}

    def fake_run(argv: list[str]) -> int:
        seen["run"].append(argv)
        return 0

    def fake_hook(argv: list[str]) -> int:
        seen["hook"].append(argv)
        return 0

    def fake_app(argv: list[str]) -> int:
        seen["app"].append(list(argv))
        return 0

    monkeypatch.delenv("STOCKADE_SANDBOX", raising=False)
    monkeypatch.setattr(run_command, "run", fake_run)
    monkeypatch.setattr(hook, "main", fake_hook)
    monkeypatch.setattr(app, "run_app", fake_app)
    return seen


def raising(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    def fake_run(argv: list[str]) -> int:
        raise error

    monkeypatch.setattr(run_command, "run", fake_run)


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stockade: error: "), err
    return lines[0].removeprefix("stockade: error: ")


def test_version_is_answered_alone(routes: dict[str, list[list[str]]], capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["--version"]) == 0
    assert capsys.readouterr().out == f"stockade {VERSION}\n"
    assert routes == {"run": [], "hook": [], "app": []}


def test_version_with_more_words_goes_to_typer(routes: dict[str, list[list[str]]]) -> None:
    main.main(["--version", "x"])
    assert routes["app"] == [["--version", "x"]]


def test_argv_defaults_to_sys_argv(routes: dict[str, list[list[str]]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["stockade", "run", "--", "ls"])
    assert main.main() == 0
    assert routes["run"] == [["--", "ls"]]


@pytest.mark.parametrize(
    ("argv", "where", "words"),
    [
        (["run", "--", "ls", "-l"], "run", ["--", "ls", "-l"]),
        (["run", "--", "ls", "--help"], "run", ["--", "ls", "--help"]),  # the command's own --help
        (["run", "-c", "x --help"], "run", ["-c", "x --help"]),
        (["run", "--policy", "-h", "--", "ls"], "run", ["--policy", "-h", "--", "ls"]),  # a value, not a flag
        (["run", "--help"], "app", ["run", "--help"]),
        (["run", "-q", "-h", "--", "ls"], "app", ["run", "-q", "-h", "--", "ls"]),
        (["hook", "claude"], "hook", ["claude"]),
        (["hook", "--help"], "app", ["hook", "--help"]),
        (["check", "--json"], "app", ["check", "--json"]),
        ([], "app", []),
        (["--debug", "check"], "app", ["check"]),  # main keeps --debug: it prints every failure
        (["--debug", "--debug", "run", "--", "ls"], "run", ["--", "ls"]),
    ],
)
def test_routing(routes: dict[str, list[list[str]]], argv: list[str], where: str, words: list[str]) -> None:
    assert main.main(argv) == 0
    assert routes[where] == [words]
    assert sum(len(calls) for calls in routes.values()) == 1


@pytest.mark.parametrize("status", [0, 1, 2, 125, 126, 127, 137])
def test_the_commands_status_passes_through(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    monkeypatch.delenv("STOCKADE_SANDBOX", raising=False)
    monkeypatch.setattr(run_command, "run", lambda argv: status)
    assert main.main(["run", "--", "x"]) == status


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UsageError("run: no command given"), 2),
        (SandboxSetupError("bwrap failed"), 125),
        (CommandNotFoundError("nosuch: not found"), 127),
        (CannotExecuteError("x: permission denied"), 126),
        (StockadeError("plain"), 2),
    ],
)
def test_a_stockade_error_is_one_line_and_its_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: StockadeError, code: int
) -> None:
    raising(monkeypatch, error)
    assert main.main(["run", "--", "x"]) == code
    out, err = capsys.readouterr()
    assert out == "" and one_error_line(err) == str(error)


def test_an_unexpected_exception_in_run_is_one_line_and_125(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    raising(monkeypatch, ValueError("surprise"))
    assert main.main(["run", "--", "x"]) == ExitCode.SETUP == 125
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("internal error (ValueError: surprise)") and "--debug" in line


def test_an_os_error_in_run_names_the_path(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    raising(monkeypatch, PermissionError(13, "Permission denied", "/state/x"))
    assert main.main(["run", "--", "x"]) == 125
    assert one_error_line(capsys.readouterr().err).startswith("Permission denied (/state/x): permission denied")


def test_ctrl_c_is_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    raising(monkeypatch, KeyboardInterrupt())
    assert main.main(["run", "--", "x"]) == 130
    assert capsys.readouterr().err == ""


def test_debug_adds_the_traceback_before_the_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    raising(monkeypatch, SandboxSetupError("bwrap failed"))
    assert main.main(["--debug", "run", "--", "x"]) == 125
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.endswith("stockade: error: bwrap failed\n")
    raising(monkeypatch, ValueError("surprise"))
    assert main.main(["--debug", "run", "--", "x"]) == 125
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: surprise" in err and err.splitlines()[-1].startswith("stockade: error: internal")


def test_without_debug_there_is_no_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    raising(monkeypatch, ValueError("surprise"))
    main.main(["run", "--", "x"])
    assert "Traceback" not in capsys.readouterr().err


def test_an_exception_escaping_typer_is_one_line_and_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(argv: list[str]) -> int:
        raise RuntimeError("typer broke")

    monkeypatch.setattr(app, "run_app", broken)
    assert main.main(["check"]) == ExitCode.USAGE == 2
    assert one_error_line(capsys.readouterr().err).startswith("internal error (RuntimeError: typer broke)")


def test_the_app_and_hooks_status_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "run_app", lambda argv: 3)
    monkeypatch.setattr(hook, "main", lambda argv: 4)
    assert main.main(["check"]) == 3 and main.main(["hook", "claude"]) == 4


def test_inside_a_stockade_sandbox_the_command_runs_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.cli import nested

    if not sys.platform.startswith("linux"):
        pytest.skip("nested runs are a Linux path")
    ran: list[tuple[list[str], bool, bool]] = []
    monkeypatch.setenv("STOCKADE_SANDBOX", "1")
    monkeypatch.setattr(nested, "inside_stockade", lambda: True)
    monkeypatch.setattr(nested, "run_as_is", lambda command, quiet, dry_run: (ran.append((command, quiet, dry_run)), 8)[1])
    monkeypatch.setattr(run_command, "run", lambda argv: pytest.fail("the backend ran inside a sandbox"))
    assert main.main(["run", "-q", "--", "ls"]) == 8
    assert ran == [(["ls"], True, False)]


def test_a_lone_variable_does_not_make_a_nested_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.cli import nested

    monkeypatch.setenv("STOCKADE_SANDBOX", "1")
    monkeypatch.setattr(nested, "inside_stockade", lambda: False)
    monkeypatch.setattr(run_command, "run", lambda argv: 5)
    assert main.main(["run", "--", "ls"]) == 5


# -- the process's exit (the console script's exit_with) --------------------------------------------------


EXITS = """
import sys
from stockade.cli import main
main._ran = {ran}
print("x" * {size}, end="")  # buffered: must reach the pipe before the process ends
atexit_marker = {marker!r}
import atexit
atexit.register(lambda: sys.stderr.write(atexit_marker))
main.exit_with({code})
"""


@pytest.mark.parametrize("code, status", [(0, 0), (7, 7), (125, 125), (300, 44)])
def test_after_a_run_the_process_ends_at_once_with_its_output_flushed(code: int, status: int) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", EXITS.format(ran=True, marker="teardown ran", code=code, size=100_000)], capture_output=True, text=True
    )
    assert done.returncode == status
    assert len(done.stdout) == 100_000  # flushed by hand
    assert "teardown ran" not in done.stderr  # the interpreter's teardown (atexit included) was skipped


def test_other_commands_exit_the_usual_way() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", EXITS.format(ran=False, marker="teardown ran", code=3, size=100_000)], capture_output=True, text=True
    )
    assert done.returncode == 3 and len(done.stdout) == 100_000 and "teardown ran" in done.stderr


def test_a_closed_stdout_after_a_run_is_no_noise() -> None:
    import subprocess

    reader, writer = subprocess.os.pipe()  # type: ignore[attr-defined]  # ten bytes stay in stdout's buffer until the exit
    subprocess.os.close(reader)  # type: ignore[attr-defined]
    done = subprocess.run([sys.executable, "-c", EXITS.format(ran=True, marker="", code=0, size=10)], stdout=writer, stderr=subprocess.PIPE, text=True,
                          env={k: v for k, v in subprocess.os.environ.items() if k != "PYTHONUNBUFFERED"})  # type: ignore[attr-defined]  # fmt: skip
    subprocess.os.close(writer)  # type: ignore[attr-defined]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_error_line_shows_control_characters_escaped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A policy's path is outside text: an escape sequence in it is shown, never sent to the terminal."""
    from stockade.core.errors import UsageError

    def refusing(argv: list[str]) -> int:
        raise UsageError("policy /p/\x1b[31mx.toml not found")

    monkeypatch.setattr(app, "run_app", refusing)
    assert main.main(["check"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "stockade: error: policy /p/\\x1b[31mx.toml not found\n"
