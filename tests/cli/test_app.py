"""run_app's exit codes: Typer's own exits pass through, Click's errors become stockade's; main() prints every failure once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import typer

from stockade.cli import app as app_module
from stockade.cli import main, run_command
from stockade.core.errors import CommandNotFoundError, ExitCode, SandboxSetupError, UsageError


def replace_app(monkeypatch: pytest.MonkeyPatch, body: Callable[[], None]) -> list[list[str]]:
    """A stand-in for the Typer app: records its args, then runs `body`."""
    seen: list[list[str]] = []

    def fake_app(*, args: list[str], prog_name: str, standalone_mode: bool) -> None:
        assert prog_name == "stockade" and standalone_mode is False
        seen.append(args)
        body()

    monkeypatch.setattr(app_module, "app", fake_app)
    return seen


def raise_(error: BaseException) -> Callable[[], None]:
    def body() -> None:
        raise error

    return body


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stockade: error: "), err
    return lines[0].removeprefix("stockade: error: ")


@pytest.mark.parametrize(("exit_with", "code"), [(0, 0), (1, 1), (2, 2), (125, 125), (None, 0), ("a message", ExitCode.USAGE)])
def test_a_system_exit_gives_its_code(monkeypatch: pytest.MonkeyPatch, exit_with: int | str | None, code: int) -> None:
    replace_app(monkeypatch, raise_(SystemExit(exit_with)))
    assert app_module.run_app(["x"]) == code


def test_returning_normally_is_0(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = replace_app(monkeypatch, lambda: None)
    assert app_module.run_app(["check", "--json"]) == 0
    assert seen == [["check", "--json"]]


@pytest.mark.parametrize(
    ("error", "code"),
    [(UsageError("bad policy"), 2), (SandboxSetupError("no bwrap"), 125), (CommandNotFoundError("nosuch"), 127)],
)
def test_a_stockade_error_passes_through_to_main_which_prints_one_line_and_its_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception, code: int
) -> None:
    replace_app(monkeypatch, raise_(error))
    with pytest.raises(type(error)):
        app_module.run_app(["check"])
    assert capsys.readouterr().err == ""  # run_app prints nothing: one error path
    assert main.main(["check"]) == code
    out, err = capsys.readouterr()
    assert out == "" and one_error_line(err) == str(error)


def test_an_unexpected_exception_is_one_line_and_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    replace_app(monkeypatch, raise_(KeyError("k")))
    assert main.main(["check"]) == ExitCode.USAGE == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("internal error (KeyError: 'k')") and "Traceback" not in line


def test_ctrl_c_is_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    replace_app(monkeypatch, raise_(KeyboardInterrupt()))
    assert main.main(["check"]) == 130
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("args", [["--debug", "check"], ["check", "--debug"]])
def test_debug_prints_the_traceback_first(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    replace_app(monkeypatch, raise_(SandboxSetupError("no bwrap")))
    assert main.main(args) == 125
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.endswith("stockade: error: no bwrap\n")
    replace_app(monkeypatch, raise_(KeyError("k")))
    assert main.main(args) == 2
    assert "Traceback" in capsys.readouterr().err


def test_without_debug_no_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    replace_app(monkeypatch, raise_(SandboxSetupError("no bwrap")))
    main.main(["check"])
    assert "Traceback" not in capsys.readouterr().err


def test_through_a_real_typer_app(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Typer's exits give their code; errors from a command still reach run_app; its usage errors are one line."""
    small = typer.Typer()

    @small.command()
    def ok(code: int = 0) -> None:
        raise typer.Exit(code)

    @small.command()
    def fails() -> None:
        raise SandboxSetupError("could not set up")

    @small.command()
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(app_module, "app", small)
    assert app_module.run_app(["ok"]) == 0
    assert app_module.run_app(["ok", "--code", "7"]) == 7
    assert main.main(["fails"]) == 125
    assert main.main(["interrupted"]) == 130
    capsys.readouterr()
    with pytest.raises(UsageError, match="no such command 'nosuch'"):  # Click's own, raised as stockade's
        app_module.run_app(["nosuch"])
    assert main.main(["nosuch"]) == 2
    assert capsys.readouterr().err == "stockade: error: no such command 'nosuch'; `stockade --help` lists the commands\n"


def test_the_real_app_version_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert app_module.run_app(["--version"]) == 0
    assert capsys.readouterr().out.startswith("stockade ")
    assert app_module.run_app(["run", "--help"]) == 0
    assert "-- COMMAND" in capsys.readouterr().out
    assert main.main(["no-such-command"]) == 2
    capsys.readouterr()
    assert app_module.run_app([]) == 2  # no_args_is_help: the help, on stderr
    assert "Usage: stockade" in capsys.readouterr().err


def test_typers_run_command_hands_the_lean_parser_the_same_words(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def lean(argv: list[str]) -> int:
        seen.append(argv)
        return 42

    monkeypatch.setattr(run_command, "run", lean)
    assert app_module.run_app(["--debug", "run", "-q", "--profile", "pypi", "--", "ls", "-l"]) == 42
    assert app_module.run_app(["run", "-c", "echo hi"]) == 42
    assert seen == [
        ["--profile", "pypi", "--quiet", "--", "ls", "-l"],
        ["-c", "echo hi", "--"],
    ]
