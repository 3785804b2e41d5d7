"""`stockade init`: the kind detected from marker files, a starter policy that parses and checks, and no overwrite without --force."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from stockade.cli.init import KINDS, detect_kind, starter_text
from stockade.cli.main import main
from stockade.core.errors import ExitCode
from stockade.core.locations import Locations
from stockade.profiles.resolve import resolve


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- detect_kind ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markers", "kind"),
    [
        pytest.param((), "generic", id="nothing"),
        pytest.param(("pyproject.toml",), "python", id="pyproject"),
        pytest.param(("setup.py",), "python", id="setup-py"),
        pytest.param(("requirements.txt",), "python", id="requirements"),
        pytest.param(("setup.cfg",), "python", id="setup-cfg"),
        pytest.param(("package.json",), "node", id="node"),
        pytest.param(("Cargo.toml",), "rust", id="rust"),
        pytest.param(("go.mod",), "go", id="go"),
        pytest.param(("README.md", "Makefile"), "generic", id="no-marker"),
        pytest.param(("package.json", "pyproject.toml"), "python", id="python-before-node"),
        pytest.param(("go.mod", "Cargo.toml"), "rust", id="rust-before-go"),
        pytest.param(("go.mod", "package.json"), "node", id="node-before-go"),
    ],
)
def test_detect_kind_from_marker_files(tmp_path: Path, markers: tuple[str, ...], kind: str) -> None:
    for marker in markers:
        (tmp_path / marker).write_text("")
    assert detect_kind(tmp_path) == kind


def test_markers_are_looked_for_only_in_the_folder_itself(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "Cargo.toml").write_text("")
    assert detect_kind(tmp_path) == "generic"
    assert detect_kind(tmp_path / "sub") == "rust"


def test_detect_kind_of_a_missing_folder_is_generic(tmp_path: Path) -> None:
    assert detect_kind(tmp_path / "nowhere") == "generic"


# -- starter_text --------------------------------------------------------------------------------

EXPECTED = {  # kind: (extends, allow_write, network mode, allow)
    "python": ("pypi", [".", "~/.cache/pip", "~/.cache/uv"], "allowlist", ["pypi.org:443", "files.pythonhosted.org:443"]),
    "node": ("npm", [".", "~/.npm", "~/.cache/yarn"], "allowlist", ["registry.npmjs.org:443"]),
    "rust": ("default", [".", "~/.cargo/registry", "~/.cargo/git"], "allowlist", ["crates.io:443", "static.crates.io:443", "index.crates.io:443"]),
    "go": ("default", [".", "~/go/pkg/mod", "~/.cache/go-build"], "allowlist", ["proxy.golang.org:443", "sum.golang.org:443"]),
    "generic": ("default", ["."], "none", []),
}


def test_every_kind_has_an_expectation() -> None:
    assert set(EXPECTED) == set(KINDS)


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_the_starter_text_parses_as_the_kind_wants(kind: str) -> None:
    text = starter_text(kind)
    extends, writable, mode, allow = EXPECTED[kind]
    data = tomllib.loads(text)
    assert data["extends"] == [extends]
    assert data["filesystem"] == {"allow_write": writable, "deny_read": ["**/.env", "**/.env.*"]}
    assert data["network"] == {"mode": mode, "allow": allow}
    assert data["env"] == {} and data["limits"] == {}  # commented-out examples only
    assert text.startswith(f"# stockade policy for this {kind} project. Check it with `stockade explain`.\n")
    assert text.endswith("\n")


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_the_starter_policy_resolves_given_as_the_policy(project: Path, locations: Locations, kind: str) -> None:
    policy_file = project / ".stockade.toml"
    policy_file.write_text(starter_text(kind))
    policy = resolve(project, locations, policy_file=policy_file).policy
    assert str(project) in policy.filesystem.allow_write
    assert str(locations.home / ".ssh") in policy.filesystem.deny_read  # from the built-in default
    assert policy.network.mode.value == EXPECTED[kind][2]


def test_an_unknown_kind_has_no_starter_text() -> None:
    with pytest.raises(KeyError):
        starter_text("cobol")


# -- the command -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "kind"), [("pyproject.toml", "python"), ("package.json", "node"), ("Cargo.toml", "rust"), ("go.mod", "go"), (None, "generic")]
)
def test_init_detects_kind_and_writes_a_valid_policy(project: Path, capsys: pytest.CaptureFixture[str], marker: str | None, kind: str) -> None:
    if marker:
        (project / marker).write_text("")
    code, out, _ = run_cli(capsys, "init")
    assert code == 0 and f"for a {kind} project" in out
    assert run_cli(capsys, "check", str(project / ".stockade.toml"))[0] == 0


def test_init_says_what_it_wrote_and_what_to_do_next(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "init")
    target = project / ".stockade.toml"
    assert code == 0 and err == ""
    assert out == f"stockade: wrote {target} for a generic project; review it with `stockade explain`, then `stockade trust`\n"
    assert target.read_text(encoding="utf-8") == starter_text("generic")


def test_the_written_file_is_not_trusted_until_trust(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "go.mod").write_text("")
    assert run_cli(capsys, "init")[0] == 0
    result = resolve(project, locations)
    assert not result.trusted and result.policy.network.mode.value == "none"
    assert run_cli(capsys, "trust")[0] == 0
    result = resolve(project, locations)
    assert result.trusted and "proxy.golang.org:443" in result.policy.network.allow


def test_kind_overrides_what_is_detected(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "package.json").write_text("")
    code, out, _ = run_cli(capsys, "init", "--kind", "rust")
    assert code == 0 and "for a rust project" in out
    assert (project / ".stockade.toml").read_text() == starter_text("rust")


@pytest.mark.parametrize("kind", ["cobol", "Python", "", "generic "])
def test_an_unknown_kind_is_a_usage_error_and_writes_nothing(project: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    code, out, err = run_cli(capsys, "init", "--kind", kind)
    assert code == ExitCode.USAGE == 2 and out == ""
    assert err == f"stockade: error: --kind must be one of python, node, rust, go, generic, not {kind!r}\n"
    assert not (project / ".stockade.toml").exists()


def test_init_refuses_to_overwrite(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".stockade.toml").write_text("")
    code, _, err = run_cli(capsys, "init")
    assert code == ExitCode.USAGE and "already exists; use --force" in err


def test_a_refusal_leaves_the_file_as_it_was(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = project / ".stockade.toml"
    target.write_text("# mine\n")
    code, out, err = run_cli(capsys, "init", "--kind", "go")
    assert code == 2 and out == ""
    assert err == f"stockade: error: {target} already exists; use --force to overwrite it\n"
    assert target.read_text() == "# mine\n"


def test_a_bad_kind_is_reported_before_an_existing_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".stockade.toml").write_text("")
    code, _, err = run_cli(capsys, "init", "--kind", "cobol")
    assert code == 2 and "--kind must be one of" in err


def test_force_overwrites(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = project / ".stockade.toml"
    target.write_text("# mine\n")
    (project / "Cargo.toml").write_text("")
    code, out, _ = run_cli(capsys, "init", "--force")
    assert code == 0 and "for a rust project" in out
    assert target.read_text() == starter_text("rust")


def test_force_does_not_write_through_a_symlink(project: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = home / ".bashrc"
    victim.write_text("# my shell\n")
    (project / ".stockade.toml").symlink_to(victim)  # a cloned repository's file
    run_cli(capsys, "init", "--force")
    assert victim.read_text() == "# my shell\n"


def test_init_does_not_create_a_file_through_a_dangling_symlink(project: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted = home / ".bash_login"
    (project / ".stockade.toml").symlink_to(planted)
    run_cli(capsys, "init")
    assert not planted.exists()
