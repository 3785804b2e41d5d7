"""`stockade run` inside a stockade sandbox: the command is exec'd as it is, with one line, its own exit status, and 127/126 as usual."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stockade.bwrap.parts import marker
from stockade.cli import nested
from stockade.cli.nested import run_as_is
from stockade.core.errors import CannotExecuteError, CommandNotFoundError

SAID = "stockade: already inside a stockade sandbox: running the command in it as is (the outer policy applies)\n"


class Execd(BaseException):
    """What the stand-in execve raises: the process would have been replaced here (past main's last resort, like an exec)."""


@pytest.fixture
def execve(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str], dict[str, str]]]:
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def fake(program: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((program, list(argv), dict(env)))
        raise Execd

    monkeypatch.setattr(os, "execve", fake)
    return calls


@pytest.fixture
def tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable `tool` on a PATH of its own."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "tool"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return program


def test_it_execs_the_program_found_on_path_with_the_environment(tool: Path, execve: list, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("NESTED_TEST_VALUE", "kept")
    with pytest.raises(Execd):
        run_as_is(["tool", "a b", "--flag"], quiet=False, dry_run=False)
    [(program, argv, env)] = execve
    assert program == str(tool) and argv == ["tool", "a b", "--flag"]
    assert env == dict(os.environ) and env["NESTED_TEST_VALUE"] == "kept"
    captured = capsys.readouterr()
    assert captured.err == SAID and captured.out == ""


def test_quiet_says_nothing(tool: Path, execve: list, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Execd):
        run_as_is(["tool"], quiet=True, dry_run=False)
    assert capsys.readouterr() == ("", "") and len(execve) == 1


def test_a_path_with_a_slash_is_taken_as_it_is(tool: Path, execve: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(Execd):
        run_as_is([str(tool), "x"], quiet=True, dry_run=False)
    assert execve[0][:2] == (str(tool), [str(tool), "x"])


@pytest.mark.parametrize("quiet", [False, True])
def test_a_dry_run_says_what_it_would_do_and_execs_nothing(tool: Path, execve: list, capsys: pytest.CaptureFixture[str], quiet: bool) -> None:
    assert run_as_is(["tool", "arg"], quiet=quiet, dry_run=True) == 0
    assert execve == []
    assert capsys.readouterr() == ("# stockade plan: already inside a stockade sandbox; would run tool in it as is\n", "")


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_missing_command_is_127_before_anything_is_said(tool: Path, execve: list, capsys: pytest.CaptureFixture[str], dry_run: bool) -> None:
    with pytest.raises(CommandNotFoundError, match="nope: command not found") as caught:
        run_as_is(["nope"], quiet=False, dry_run=dry_run)
    assert caught.value.exit_code == 127
    with pytest.raises(CommandNotFoundError, match="/no/such/tool: no such file"):
        run_as_is(["/no/such/tool"], quiet=False, dry_run=dry_run)
    assert execve == [] and capsys.readouterr() == ("", "")


@pytest.mark.parametrize("kind", ["not-executable", "folder"])
def test_a_file_that_cannot_run_is_126(tmp_path: Path, execve: list, kind: str) -> None:
    target = tmp_path / "thing"
    if kind == "folder":
        target.mkdir()
    else:
        target.write_text("data\n")
        target.chmod(0o644)
    with pytest.raises(CannotExecuteError, match="a folder, not a program$" if kind == "folder" else "not executable \\(chmod \\+x it") as caught:
        run_as_is([str(target)], quiet=False, dry_run=False)
    assert caught.value.exit_code == 126 and execve == []


def test_the_commands_own_exit_status_is_the_runs(tmp_path: Path) -> None:
    """A real exec, in a child: what it prints, with the line before it, and its status."""
    code = "from stockade.cli.nested import run_as_is; run_as_is(['sh', '-c', 'echo out; exit 7'], False, False)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 7
    assert done.stdout == "out\n" and done.stderr == SAID


def test_the_module_offers_the_marker_check() -> None:
    assert nested.inside_stockade is marker.inside_stockade


# -- through `stockade run` ------------------------------------------------------------------------


@pytest.fixture
def inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The marker link, at a place of the test's own."""
    place = tmp_path / "stockade-sandbox"
    place.symlink_to(marker.MARKER_TARGET)
    monkeypatch.setattr(marker, "MARKER_PATH", str(place))
    return place


LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="nesting is told on Linux")


@LINUX_ONLY
def test_run_inside_a_sandbox_runs_as_is(project: Path, inside: Path, tool: Path, execve: list,
                                         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from stockade.cli.main import main

    monkeypatch.setenv("STOCKADE_SANDBOX", "1")
    assert main(["run", "--dry-run", "--", "tool", "x"]) == 0
    assert capsys.readouterr().out == "# stockade plan: already inside a stockade sandbox; would run tool in it as is\n"
    with pytest.raises(Execd):
        main(["run", "-q", "--", "tool", "x"])
    assert execve[0][:2] == (str(tool), ["tool", "x"])


@LINUX_ONLY
def test_a_missing_command_inside_is_127_in_one_line(project: Path, inside: Path, tool: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from stockade.cli.main import main

    monkeypatch.setenv("STOCKADE_SANDBOX", "1")
    assert main(["run", "--", "nope"]) == 127
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("stockade: error: nope: command not found")


@LINUX_ONLY
@pytest.mark.parametrize(("variable", "marked"), [("1", False), ("", True), ("0", True)])
def test_both_signs_are_needed(project: Path, tmp_path: Path, tool: Path, execve: list, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str], variable: str, marked: bool) -> None:  # fmt: skip
    """The variable alone (anyone can set it) or the marker alone does not skip the sandbox."""
    from stockade.cli import run_command
    from stockade.cli.main import main

    place = tmp_path / "stockade-sandbox"
    if marked:
        place.symlink_to(marker.MARKER_TARGET)
    monkeypatch.setattr(marker, "MARKER_PATH", str(place))
    monkeypatch.setenv("STOCKADE_SANDBOX", variable)
    monkeypatch.setattr(run_command, "run", lambda argv: 42)  # the sandboxed run, as a stand-in
    assert main(["run", "--", "tool"]) == 42
    assert execve == [] and "already inside" not in capsys.readouterr().err
