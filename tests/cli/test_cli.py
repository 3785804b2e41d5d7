"""Each command through the real entry point, in-process; exit codes per DESIGN.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stockade.cli import app as app_module
from stockade.cli.main import main
from stockade.cli.run_options import RUN_OPTIONS
from stockade.core.errors import ExitCode


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.startswith("stockade ")


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "-h")
    assert code == 0
    for command in ("run", "check", "explain", "init", "doctor", "trust"):
        assert command in out


def test_run_help_goes_to_typer(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", "--help")
    assert code == 0 and "--dry-run" in out and "--profile" in out


def test_trust_and_revoke(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".stockade.toml").write_text('extends = ["default"]\n[network]\nmode = "open"\n')
    code, _, err = run_cli(capsys, "run", "--dry-run", "--", "true")
    assert code == 0 and "is not trusted" in err and f"stockade trust {project}/.stockade.toml" in err
    assert run_cli(capsys, "trust")[0] == 0
    code, out, err = run_cli(capsys, "check", "--json")
    assert json.loads(out)["network"]["mode"] == "open" and "not trusted" not in err
    code, out, _ = run_cli(capsys, "trust", "--revoke", str(project / ".stockade.toml"))
    assert code == 0 and "no longer trusting" in out


def test_unknown_command_is_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "frobnicate")
    assert code == ExitCode.USAGE and err == "stockade: error: no such command 'frobnicate'; `stockade --help` lists the commands\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["allow"], "allow: missing argument 'host'; `stockade allow --help` lists the options"),
        (["audit", "--since"], "option '--since' requires an argument; `stockade COMMAND --help` lists a command's options"),
        (["doctor", "--x"], "doctor: no such option: --x; `stockade doctor --help` lists the options"),
    ],
)
def test_every_usage_error_is_one_line_naming_the_help(capsys: pytest.CaptureFixture[str], args: list[str], line: str) -> None:
    code, out, err = run_cli(capsys, *args)
    assert code == ExitCode.USAGE and out == "" and err == f"stockade: error: {line}\n"


def test_run_without_command_is_usage(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "run")
    assert code == ExitCode.USAGE and "no command given" in err


def test_run_bad_policy_is_usage(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "run", "--policy", "missing.toml", "--", "true")
    assert code == ExitCode.USAGE and "missing.toml: policy file not found" in err


def test_debug_shows_traceback(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "--debug", "run", "--policy", "missing.toml", "--", "true")
    assert code == ExitCode.USAGE and "Traceback" in err


def test_dry_run_prints_the_plan(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", "--dry-run", "--", "echo", "a b")
    assert code == 0 and "--bind " + str(project) in out and "-- echo 'a b'" in out


def test_shell_string(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", "--dry-run", "-c", "echo $HOME | wc")
    assert code == 0 and "-- /bin/sh -c 'echo $HOME | wc'" in out


def test_typer_run_command_matches_the_lean_option_table() -> None:
    import typer.main

    group = typer.main.get_command(app_module.app)
    run = group.commands["run"]  # type: ignore[attr-defined]
    typer_flags = {tuple(sorted(p.opts)): p.is_flag for p in run.params if p.param_type_name == "option"}
    table_flags = {tuple(sorted(o.flags)): not o.takes_value for o in RUN_OPTIONS}
    assert typer_flags == table_flags


def test_run_path_imports_nothing_heavy(tmp_path: Path) -> None:
    """`stockade run` must not pay for Typer, Rich, psutil, pyseccomp or mitmproxy."""
    code = (
        "import sys, stockade.cli.main, stockade.cli.run_command, stockade.bwrap.plan.planner, stockade.bwrap.running.execute;"
        "heavy = [m for m in ('typer', 'click', 'rich', 'psutil', 'seccomp', 'pyseccomp', 'mitmproxy') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        pytest.param(["--version"], 0, "stockade ", id="version"),
        pytest.param(["check", "--profile", "offline"], 0, "[filesystem]", id="check"),
        pytest.param(["check", "--profile", "nope"], 2, "no built-in profile named 'nope'", id="check-bad-profile"),
        pytest.param(["explain", "--json"], 0, '"floor"', id="explain"),
        pytest.param(["init", "--kind", "go"], 0, "for a go project", id="init"),
        pytest.param(["init", "--kind", "cobol"], 2, "--kind must be one of", id="init-bad-kind"),
        pytest.param(["trust"], 2, "no .stockade.toml", id="trust-nothing"),
        pytest.param(["audit", "--log", "/nonexistent/audit.jsonl"], 2, "no audit log at /nonexistent/audit.jsonl", id="audit-missing"),
    ],
)
def test_typer_app_through_clirunner(project: Path, args: list[str], code: int, expected: str) -> None:
    """The Typer application as Typer's own CliRunner sees it (errors are raised through run_app to main, which maps them)."""
    from typer.testing import CliRunner

    from stockade.cli.app import app
    from stockade.cli.main import main

    if code == 0:
        result = CliRunner().invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 0 and expected in result.output, result.output
    else:
        from stockade.core.errors import StockadeError

        with pytest.raises(StockadeError, match=expected):
            CliRunner().invoke(app, args, catch_exceptions=False)
        assert main(args) == code


def test_version_matches_pyproject() -> None:
    import tomllib

    from stockade.cli.version import VERSION

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if not pyproject.exists():
        pytest.skip("running from an installed copy without pyproject.toml")
    assert tomllib.loads(pyproject.read_text())["project"]["version"] == VERSION


def test_trust_says_which_credentials_it_lets_the_project_send_where(project: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / ".config" / "stockade" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('extends = ["default"]\n[credentials.GH_TOKEN]\nenv = "GH_TOKEN"\nhosts = ["api.github.com"]\n')
    (project / ".stockade.toml").write_text(
        '[network]\nallow = ["collector.example"]\n'
        '[credentials.GH_TOKEN]\nenv = "GH_TOKEN"\nhosts = ["collector.example"]\n'
        '[credentials.NPM_TOKEN]\nfile = "~/.npmrc"\nhosts = ["registry.npmjs.org"]\n'
    )
    code, out, _ = run_cli(capsys, "trust")
    assert code == 0, out
    lines = [line for line in out.splitlines() if "credential:" in line]
    assert len(lines) == 2, out
    redirect = next(line for line in lines if "GH_TOKEN" in line)
    assert 'reads env = "GH_TOKEN" and sends it to collector.example' in redirect
    assert "it replaces your own [credentials.GH_TOKEN]" in redirect and "api.github.com" in redirect
    added = next(line for line in lines if "NPM_TOKEN" in line)
    assert "sends it to registry.npmjs.org" in added and "replaces" not in added
