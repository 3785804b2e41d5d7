"""`stockade doctor`: a row per check (ok, FAIL or warn, with the fix when it matters), exit 125 only when a required check fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stockade.bwrap.parts.probe import Check
from stockade.cli import doctor
from stockade.cli.main import main
from stockade.core.errors import ExitCode

CAN = "stockade: this machine can sandbox\n"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│")]


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Check]:
    """The machine's checks, as the test sets them; no agent hook checks unless a test adds some."""
    from stockade.bwrap.parts import probe
    from stockade.cli.agents import checks as hook_checks

    machine: list[Check] = []
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(probe, "linux_checks", lambda: list(machine))
    monkeypatch.setattr(hook_checks, "hook_checks", lambda home, project: [])
    monkeypatch.setattr(doctor, "_baseline", lambda: [])
    return machine


def test_all_checks_pass(project: Path, capsys: pytest.CaptureFixture[str], checks: list[Check]) -> None:
    checks += [Check("bubblewrap", True, "/usr/bin/bwrap 0.9.0", "apt install bubblewrap"), Check("libseccomp", True, "2.5.5")]
    code, out, err = run_cli(capsys, "doctor")
    assert code == 0 and err == ""
    assert rows(out) == [["bubblewrap", "ok", "/usr/bin/bwrap 0.9.0", ""], ["libseccomp", "ok", "2.5.5", ""]]
    assert out.endswith(CAN)


@pytest.mark.parametrize(
    ("check", "row"),
    [
        pytest.param(Check("a", True, "fine", "do x"), ["a", "ok", "fine", ""], id="required-ok-hides-the-fix"),
        pytest.param(Check("a", False, "missing", "do x"), ["a", "FAIL", "missing", "do x"], id="required-failed"),
        pytest.param(Check("a", False, "missing", "do x", required=False), ["a", "warn", "missing", "do x"], id="optional-failed"),
        pytest.param(Check("a", True, "fine", "for y, do x", required=False), ["a", "ok", "fine", "for y, do x"], id="optional-ok-keeps-its-hint"),
    ],
)
def test_a_row_per_check(project: Path, capsys: pytest.CaptureFixture[str], checks: list[Check], check: Check, row: list[str]) -> None:
    checks.append(check)
    code, out, _ = run_cli(capsys, "doctor")
    assert rows(out) == [row]
    assert code == (ExitCode.SETUP if check.required and not check.ok else 0)


def test_the_header(project: Path, capsys: pytest.CaptureFixture[str], checks: list[Check]) -> None:
    out = run_cli(capsys, "doctor")[1]
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert [cell.strip() for cell in header.strip("┃").split("┃")] == ["check", "status", "detail", "how to fix"]
    assert rows(out) == [] and out.endswith(CAN)  # no checks at all: nothing failed


@pytest.mark.parametrize("failed", [1, 2])
def test_a_failed_required_check_exits_125(project: Path, capsys: pytest.CaptureFixture[str], checks: list[Check], failed: int) -> None:
    checks += [Check(f"need{i}", False, "missing", "install it") for i in range(failed)]
    checks += [Check("fine", True, "ok"), Check("nice", False, "missing", "maybe", required=False)]
    code, out, err = run_cli(capsys, "doctor")
    assert code == ExitCode.SETUP == 125
    assert err == f"stockade: {failed} check(s) failed: sandboxing will not work until fixed\n"
    assert "can sandbox" not in out and len(rows(out)) == failed + 2


def test_only_warnings_still_sandbox(project: Path, capsys: pytest.CaptureFixture[str], checks: list[Check]) -> None:
    checks += [Check("bubblewrap", True, "ok"), Check("nice", False, "missing", "maybe", required=False)]
    code, out, err = run_cli(capsys, "doctor")
    assert code == 0 and err == "" and out.endswith(CAN)


def test_agent_hook_checks_follow_the_machines(project: Path, home: Path, capsys: pytest.CaptureFixture[str],
                                               checks: list[Check], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from stockade.cli.agents import checks as hook_checks

    asked: list[tuple[Path, Path]] = []

    def hooks(home_folder: Path, project_folder: Path) -> list[Check]:
        asked.append((home_folder, project_folder))
        return [Check("claude hook", False, "~/.claude/settings.json names /gone/stockade", "stockade install claude")]

    monkeypatch.setattr(hook_checks, "hook_checks", hooks)
    checks.append(Check("bubblewrap", True, "ok"))
    code, out, err = run_cli(capsys, "doctor")
    assert asked == [(home, project)]
    assert [row[0] for row in rows(out)] == ["bubblewrap", "claude hook"]
    assert code == ExitCode.SETUP and err.startswith("stockade: 1 check(s) failed")


@pytest.mark.parametrize(("present", "row"), [
    (True, ["sandbox-exec", "ok", "/usr/bin/sandbox-exec", ""]),
    (False, ["sandbox-exec", "FAIL", "not found", "sandbox-exec ships with macOS; check that /usr/bin is intact"]),
])  # fmt: skip
def test_on_macos_it_checks_sandbox_exec(project: Path, capsys: pytest.CaptureFixture[str], checks: list[Check],
                                         monkeypatch: pytest.MonkeyPatch, present: bool, row: list[str]) -> None:  # fmt: skip
    import os

    from stockade.bwrap.parts import probe

    monkeypatch.setattr(probe, "linux_checks", lambda: pytest.fail("the Linux checks ran on macOS"))
    monkeypatch.setattr(probe, "check_folders", lambda: Check("stockade's folders", True, "mine"))
    monkeypatch.setattr(os, "access", lambda path, mode: present and path == "/usr/bin/sandbox-exec")
    monkeypatch.setattr(sys, "platform", "darwin")
    code, out, _ = run_cli(capsys, "doctor")
    assert rows(out) == [row, ["stockade's folders", "ok", "mine", ""]]
    assert code == (0 if present else ExitCode.SETUP)


def test_doctor_reports(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "doctor")
    assert "bubblewrap" in out and "libseccomp" in out
    assert code in (0, ExitCode.SETUP)


def test_doctor_takes_no_arguments(project: Path, capsys: pytest.CaptureFixture[str], checks: list[Check]) -> None:
    code, out, err = run_cli(capsys, "doctor", "extra")
    assert code == ExitCode.USAGE and out == "" and "unexpected extra argument" in err


def test_the_system_baseline_check_says_whether_there_is_one_and_whether_it_reads(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = project.parent / "admin.toml"
    admin.write_text('required = true\n[network]\nallow = ["pypi.org"]\n')
    monkeypatch.setenv("STOCKADE_SYSTEM_POLICY", str(admin))
    (check,) = doctor._baseline()
    assert check.ok and check.required and check.detail == f"{admin}; required: every policy is narrowed by it"
    admin.write_text("[network\n")
    (check,) = doctor._baseline()
    assert not check.ok and check.required and "not valid TOML" in check.detail
    monkeypatch.delenv("STOCKADE_SYSTEM_POLICY")
    (check,) = doctor._baseline()
    assert not check.ok and "is required and is gone" in check.detail  # it was read as required: its absence stops runs
    from stockade.core.locations import locate
    from stockade.profiles.baseline import REMEMBERED

    (locate().state / REMEMBERED).unlink()
    (check,) = doctor._baseline()
    assert check.ok and not check.required and check.detail.startswith("none")


def test_the_policy_s_container_engine_is_checked_where_it_names_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from stockade.cli import doctor as doctor_module
    from stockade.profiles.model import ContainerRules

    rules = ContainerRules(engine="docker", socket=str(tmp_path / "no-engine.sock"))
    monkeypatch.setattr("stockade.cli.selection.select", lambda *a, **k: SimpleNamespace(policy=SimpleNamespace(containers=rules)))
    (found,) = doctor_module._containers()
    assert not found.ok and not found.required and "not answering" in found.detail and "podman system service" in found.fix
    monkeypatch.setattr("stockade.cli.selection.select", lambda *a, **k: SimpleNamespace(policy=SimpleNamespace(containers=ContainerRules())))
    assert doctor_module._containers() == []
