"""`stockade run` in front of a fake backend: options become one Invocation, the command's status passes through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.cli import run_command
from stockade.core.errors import ExitCode, UsageError
from stockade.core.invocation import Invocation, RunResult


class FakeBackend:
    """Records what it was handed; `run` returns a chosen status."""

    def __init__(self, status: int = 0) -> None:
        self.status = status
        self.ran: list[Invocation] = []
        self.explained: list[Invocation] = []

    def run(self, invocation: Invocation) -> RunResult:
        self.ran.append(invocation)
        result = RunResult(invocation.want_findings)
        result.status = self.status
        return result

    def explain(self, invocation: Invocation) -> str:
        self.explained.append(invocation)
        return "the plan\n"


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    fake = FakeBackend()
    platforms: list[str] = []

    def backend_for(platform: str) -> FakeBackend:
        platforms.append(platform)
        return fake

    monkeypatch.setattr(run_command, "backend_for", backend_for)
    fake.platforms = platforms  # type: ignore[attr-defined]
    return fake


@pytest.mark.parametrize("status", [0, 1, 3, 125, 126, 127, 130, 255])
def test_the_commands_own_status_passes_through(backend: FakeBackend, status: int) -> None:
    backend.status = status
    assert run_command.run(["--", "true"]) == status
    assert len(backend.ran) == 1


def test_the_invocation_carries_the_command_cwd_env_and_options(backend: FakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_command.run(["--policy", "p.toml", "--profile", "pypi", "-q", "--verbose", "--", "echo", "hi"]) == 0
    (invocation,) = backend.ran
    assert invocation.command == ["echo", "hi"]
    assert invocation.cwd == os.getcwd()
    assert invocation.env is os.environ
    assert invocation.policy_file == "p.toml" and invocation.profile == "pypi"
    assert invocation.quiet is True and invocation.verbose is True and invocation.dry_run is False
    assert invocation.reuse_plans is True


def test_dash_c_runs_a_shell_string(backend: FakeBackend) -> None:
    run_command.run(["-c", "echo hi | wc -c"])
    assert backend.ran[0].command == ["/bin/sh", "-c", "echo hi | wc -c"]


def test_dry_run_prints_the_plan_and_runs_nothing(backend: FakeBackend, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command.run(["--dry-run", "--", "true"]) == 0
    assert backend.ran == [] and len(backend.explained) == 1
    assert backend.explained[0].dry_run is True and backend.explained[0].reuse_plans is False
    assert capsys.readouterr().out == "the plan\n"


def test_dry_run_ignores_the_backends_status(backend: FakeBackend) -> None:
    backend.status = 7
    assert run_command.run(["--dry-run", "--", "false"]) == 0


def test_the_host_platform_picks_the_backend_unless_one_is_named(backend: FakeBackend) -> None:
    run_command.run(["--", "true"])
    other = "darwin" if run_command.host_platform() == "linux" else "linux"
    run_command.run(["--platform", other, "--dry-run", "--", "true"])
    assert backend.platforms == [run_command.host_platform(), other]  # type: ignore[attr-defined]
    assert backend.explained[0].reuse_plans is False  # a plan for another platform is never stored


def test_a_bad_max_output_is_a_usage_error_before_anything_runs(backend: FakeBackend) -> None:
    with pytest.raises(UsageError) as caught:
        run_command.run(["--max-output", "lots", "--", "true"])
    assert caught.value.exit_code == ExitCode.USAGE == 2
    assert backend.ran == [] and backend.platforms == []  # type: ignore[attr-defined]


def test_no_command_is_a_usage_error(backend: FakeBackend) -> None:
    with pytest.raises(UsageError):
        run_command.run(["--quiet"])
    assert backend.ran == []


def test_ci_and_report_go_through_run_ci_and_never_reuse_plans(backend: FakeBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.cli import ci

    calls: list[tuple[Invocation, str | None, bool, int]] = []

    def fake_run_ci(invocation: Invocation, execute, *, report: str | None, announce: bool) -> int:  # type: ignore[no-untyped-def]
        calls.append((invocation, report, announce, execute().status))
        return 42

    monkeypatch.setattr(ci, "run_ci", fake_run_ci)
    backend.status = 5
    assert run_command.run(["--ci", "--", "make"]) == 42
    assert run_command.run(["--report", "r.json", "--", "make"]) == 42
    assert run_command.run(["--ci", "--quiet", "--", "make"]) == 42
    assert [(r, a, s) for _, r, a, s in calls] == [(None, True, 5), ("r.json", False, 5), (None, False, 5)]
    assert all(invocation.reuse_plans is False for invocation, *_ in calls)


def test_the_plain_path_never_loads_ci(backend: FakeBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.cli import ci

    def boom(*_args: object, **_kwargs: object) -> int:
        raise AssertionError("run_ci on the plain path")

    monkeypatch.setattr(ci, "run_ci", boom)
    assert run_command.run(["--", "true"]) == 0


def test_backend_for_picks_linux_or_macos() -> None:
    from stockade.bwrap.run import LinuxBackend
    from stockade.seatbelt.run import MacOSBackend

    assert isinstance(run_command.backend_for("linux"), LinuxBackend)
    assert isinstance(run_command.backend_for("darwin"), MacOSBackend)
