"""`stockade check`: the effective policy as TOML or JSON, the untrusted note and open ends on stderr, exit 2 on bad input."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from stockade.cli.main import main
from stockade.core.errors import ExitCode

HAND_WRITTEN = '[network]\nallow = ["pypi.org"]\n'


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def error(err: str) -> str:
    """The one `stockade: error:` line, and nothing else on stderr."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stockade: error: "), err
    return lines[0].removeprefix("stockade: error: ")


def test_with_nothing_here_it_prints_the_built_in_default(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "check")
    assert code == 0 and err == ""
    assert out.startswith("# effective policy from builtin:default\n# built from: builtin:default\n")
    assert out.endswith("\n") and not out.endswith("\n\n")
    data = tomllib.loads(out)
    assert data["filesystem"]["allow_write"][0] == str(project) and data["network"]["mode"] == "none"


def test_check_prints_effective_policy(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "check", "--profile", "pypi")
    assert code == 0
    assert "pypi.org:443" in out and 'mode = "allowlist"' in out


def test_check_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "check", "--json")
    data = json.loads(out)
    assert code == 0 and data["network"]["mode"] == "none" and data["filesystem"]["allow_write"] == [str(project)]
    assert data["trusted"] is True and data["ignored"] == [] and data["open"] == []


def test_an_untrusted_project_file_is_narrowed_and_says_so(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = project / ".stockade.toml"
    policy.write_text(HAND_WRITTEN)
    code, out, err = run_cli(capsys, "check")
    assert code == 0
    assert err.splitlines() == [
        f'stockade: {policy} is not trusted, so it can only narrow your own policy (ignored: network mode "allowlist" '
        f'(yours is "none"); none of its own rules apply); to trust it: stockade trust {policy}'
    ]
    assert tomllib.loads(out)["network"]["mode"] == "none"
    code, out, err = run_cli(capsys, "check", "--json")
    data = json.loads(out)
    assert code == 0 and err == ""  # JSON says it in its own fields
    assert data["trusted"] is False and data["ignored"] == ['network mode "allowlist" (yours is "none")']
    assert data["network"]["mode"] == "none"


def test_a_trusted_project_file_applies_whole(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".stockade.toml").write_text(HAND_WRITTEN)
    assert run_cli(capsys, "trust")[0] == 0
    code, out, err = run_cli(capsys, "check", "--json")
    data = json.loads(out)
    assert code == 0 and err == ""
    assert data["trusted"] is True and data["ignored"] == []
    assert data["network"]["mode"] == "allowlist" and "pypi.org" in data["network"]["allow"]


def test_open_ends_are_notes_on_stderr_and_a_field_in_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "bare.toml").write_text("extends = []\n")
    code, out, err = run_cli(capsys, "check", "bare.toml")
    assert code == 0
    notes = err.splitlines()
    assert len(notes) == 3 and all(line.startswith("stockade: note: ") for line in notes)
    assert "is read-only" in notes[0] and "deny_read is empty" in notes[1] and "remove `extends = []`" in notes[2]
    assert out.startswith(f"# effective policy from {project / 'bare.toml'}\n")
    code, out, err = run_cli(capsys, "check", "--json", "bare.toml")
    assert code == 0 and err == ""
    assert json.loads(out)["open"] == [line.removeprefix("stockade: note: ") for line in notes]


def test_an_untrusted_file_that_lists_a_host_is_told_to_trust_not_to_add(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = project / ".stockade.toml"
    policy.write_text('[network]\nallow = ["pypi.org"]\n[network.http."pypi.org"]\nallow = ["GET /simple/*"]\n')
    code, _out, err = run_cli(capsys, "check")
    assert code == 0
    assert f"(it is in {policy}, which is not trusted: run `stockade trust {policy}`)" in err and 'add "pypi.org" to allow' not in err


def test_check_takes_policy_like_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "p.toml").write_text('[network]\nallow = ["pypi.org"]\n')
    assert main(["check", "--policy", "p.toml"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# effective policy from {project / 'p.toml'}") and '"pypi.org"' in out
    assert main(["check", "p.toml", "--policy", "q.toml"]) == 2


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["p.toml"], id="argument"),
        pytest.param(["--policy", "p.toml"], id="long-option"),
        pytest.param(["-p", "p.toml"], id="short-option"),
        pytest.param(["p.toml", "--policy", "p.toml"], id="both-the-same"),
    ],
)
def test_each_way_of_naming_the_file_checks_it(project: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    (project / "p.toml").write_text("[limits]\npids = 7\n")
    code, out, _ = run_cli(capsys, "check", *args)
    assert code == 0 and tomllib.loads(out)["limits"]["pids"] == 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["p.toml", "--policy", "q.toml"], "give the policy file once: as an argument or with --policy", id="two-files"),
        pytest.param(["p.toml", "--profile", "offline"], "give either --policy or --profile, not both", id="file-and-profile"),
        pytest.param(["--profile", "nope"], "no built-in profile named 'nope'", id="bad-profile"),
        pytest.param(["missing.toml"], "missing.toml: policy file not found", id="missing-file"),
    ],
)
def test_usage_errors_exit_2_with_one_line(project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    (project / "p.toml").write_text("")
    code, out, err = run_cli(capsys, "check", *args)
    assert code == ExitCode.USAGE == 2 and out == ""
    assert message in error(err)


def test_check_unknown_key_exits_2_with_file_and_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".stockade.toml").write_text('extends = ["default"]\n[network]\nalow = ["x.test"]\n')
    code, _, err = run_cli(capsys, "check")
    assert code == ExitCode.USAGE
    assert err.strip() == f"stockade: error: {project}/.stockade.toml:3: unknown key 'alow' in [network] (did you mean 'allow'?)"


def test_check_file_argument(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = project / "other.toml"
    policy.write_text('[limits]\nwall_time = "forever"\n')
    code, _, err = run_cli(capsys, "check", str(policy))
    assert code == ExitCode.USAGE and f"{policy}:2: 'limits.wall_time': bad duration 'forever'" in err


def test_a_broken_toml_file_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "p.toml").write_text("[network\n")
    code, out, err = run_cli(capsys, "check", "p.toml")
    assert code == ExitCode.USAGE and out == ""
    assert str(project / "p.toml") in error(err)


def test_an_unknown_option_is_typers_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "check", "--jsn")
    assert code == ExitCode.USAGE and out == ""
    assert err == "stockade: error: check: no such option: --jsn (Possible options: --json); `stockade check --help` lists the options\n"
