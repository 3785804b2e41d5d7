"""`stockade trust`: which file it trusts, the chain it validates and counts, its open-end notes, --revoke, and exit 2 on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.cli.main import main
from stockade.core.errors import ExitCode
from stockade.core.locations import Locations
from stockade.profiles.resolve import resolve

HAND_WRITTEN = '[network]\nallow = ["pypi.org"]\n'


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def trusting(target: Path, files: int) -> str:
    count = f"{files} file" + ("s" if files != 1 else "")
    return f"stockade: trusting {target} as it is now ({count}); any change makes it untrusted again\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_it_trusts_the_project_file_here(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write(project / ".stockade.toml", HAND_WRITTEN)
    assert not resolve(project, locations).trusted
    code, out, err = run_cli(capsys, "trust")
    assert code == 0 and err == "" and out == trusting(policy, 1)
    result = resolve(project, locations)
    assert result.trusted and "pypi.org" in result.policy.network.allow


def test_any_change_untrusts_it_again(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write(project / ".stockade.toml", HAND_WRITTEN)
    assert run_cli(capsys, "trust")[0] == 0
    policy.write_text(HAND_WRITTEN + "# edited\n")
    assert not resolve(project, locations).trusted
    assert run_cli(capsys, "trust")[0] == 0
    assert resolve(project, locations).trusted


def test_from_a_subfolder_it_trusts_the_nearest_file(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    top = write(project / ".stockade.toml", HAND_WRITTEN)
    write(project / "a" / ".stockade.toml", "")  # empty: a placeholder, skipped
    (project / "a" / "b").mkdir()
    monkeypatch.chdir(project / "a" / "b")
    code, out, _ = run_cli(capsys, "trust")
    assert code == 0 and out == trusting(top, 1)
    assert resolve(project, locations).trusted


def test_a_nearer_file_wins(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    write(project / ".stockade.toml", HAND_WRITTEN)
    inner = write(project / "sub" / ".stockade.toml", HAND_WRITTEN)
    monkeypatch.chdir(project / "sub")
    assert run_cli(capsys, "trust")[1] == trusting(inner, 1)


@pytest.mark.parametrize(
    ("argument", "name"),
    [
        pytest.param("p.toml", "p.toml", id="relative"),
        pytest.param("./sub/../p.toml", "p.toml", id="normalised"),
        pytest.param("sub/q.toml", "sub/q.toml", id="in-a-folder"),
        pytest.param("ABSOLUTE", "p.toml", id="absolute"),
    ],
)
def test_a_named_file_is_trusted_at_its_normalised_path(project: Path, capsys: pytest.CaptureFixture[str], argument: str, name: str) -> None:
    write(project / "p.toml", HAND_WRITTEN)
    write(project / "sub" / "q.toml", HAND_WRITTEN)
    code, out, _ = run_cli(capsys, "trust", str(project / "p.toml") if argument == "ABSOLUTE" else argument)
    assert code == 0 and out == trusting(project / name, 1)


def test_the_count_is_of_the_files_in_the_chain(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    write(project / "base.toml", "[limits]\npids = 50\n")
    write(project / "more.toml", 'extends = ["./base.toml"]\n')
    policy = write(project / ".stockade.toml", 'extends = ["default", "./more.toml"]\n' + HAND_WRITTEN)
    code, out, _ = run_cli(capsys, "trust")
    assert code == 0 and out == trusting(policy, 3)


def test_the_implicit_user_config_is_not_counted(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    write(locations.user_config_file, "[limits]\npids = 10\n")  # what a file without extends builds on
    policy = write(project / ".stockade.toml", HAND_WRITTEN)
    code, out, _ = run_cli(capsys, "trust")
    assert code == 0 and out == trusting(policy, 1)


def test_a_policy_from_nothing_gets_its_notes(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write(project / ".stockade.toml", "extends = []\n")
    code, out, err = run_cli(capsys, "trust")
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[0] == trusting(policy, 1).rstrip("\n")
    assert len(lines) == 4 and all(line.startswith("stockade: note: ") for line in lines[1:])
    assert "is read-only" in lines[1] and "deny_read is empty" in lines[2] and "remove `extends = []`" in lines[3]


def test_a_loopback_rule_is_noted(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project / ".stockade.toml", '[network]\nallow = ["localhost"]\n')
    lines = run_cli(capsys, "trust")[1].splitlines()
    assert len(lines) == 2 and lines[1].startswith('stockade: note: allow "localhost": the host\'s loopback')


# -- errors --------------------------------------------------------------------------------------


def test_trust_without_policy_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "trust")
    assert code == ExitCode.USAGE and "no .stockade.toml" in err
    assert err == "stockade: error: no .stockade.toml here or in any parent directory; give the file to trust\n"


def test_an_empty_project_file_is_not_found(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project / ".stockade.toml", "")
    code, _, err = run_cli(capsys, "trust")
    assert code == ExitCode.USAGE and "no .stockade.toml here" in err


@pytest.mark.parametrize("argument", ["missing.toml", "folder"])
def test_a_named_file_that_is_not_there_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str], argument: str) -> None:
    (project / "folder").mkdir()
    code, out, err = run_cli(capsys, "trust", argument)
    assert code == ExitCode.USAGE and out == ""
    assert err == f"stockade: error: {project / argument}: no such policy file\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[network]\nalow = []\n", ".stockade.toml:2: unknown key 'alow' in [network]", id="bad-key"),
        pytest.param('extends = ["./gone.toml"]\n', "gone.toml", id="missing-extends"),
        pytest.param("[network\n", ".stockade.toml", id="not-toml"),
    ],
)
def test_an_invalid_chain_is_refused_and_not_recorded(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str],
                                                      text: str, message: str) -> None:  # fmt: skip
    write(project / ".stockade.toml", text)
    code, out, err = run_cli(capsys, "trust")
    assert code == ExitCode.USAGE and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("stockade: error: ") and message in err, err
    assert not locations.trust_file.exists() or str(project) not in locations.trust_file.read_text()


# -- --revoke --------------------------------------------------------------------------------------


def test_revoke_forgets_the_trust(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write(project / ".stockade.toml", HAND_WRITTEN)
    assert run_cli(capsys, "trust")[0] == 0
    code, out, _ = run_cli(capsys, "trust", "--revoke", str(policy))
    assert code == 0 and out == f"stockade: no longer trusting {policy}\n"
    assert not resolve(project, locations).trusted
    code, out, _ = run_cli(capsys, "trust", "--revoke")  # again, the nearest file: nothing left to forget
    assert code == 0 and out == f"stockade: {policy} was not trusted\n"


def test_revoke_touches_no_other_file(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write(project / ".stockade.toml", HAND_WRITTEN)
    other = write(project / "sub" / ".stockade.toml", HAND_WRITTEN)
    assert run_cli(capsys, "trust", str(policy))[0] == 0 and run_cli(capsys, "trust", str(other))[0] == 0
    assert run_cli(capsys, "trust", "--revoke", "sub/.stockade.toml")[0] == 0
    assert resolve(project, locations).trusted and not resolve(project / "sub", locations).trusted


def test_revoking_a_file_that_is_gone_is_fine(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "trust", "--revoke", "gone.toml")
    assert code == 0 and out == f"stockade: {project / 'gone.toml'} was not trusted\n"


def test_revoke_with_nothing_here_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "trust", "--revoke")
    assert code == ExitCode.USAGE and err.startswith("stockade: error: no .stockade.toml here")
