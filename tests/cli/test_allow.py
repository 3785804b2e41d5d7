"""`stockade allow HOST`: the hint every denial gives, pasted as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.cli.main import main
from stockade.core.locations import Locations
from stockade.profiles.resolve import project_chain, resolve
from stockade.profiles.trust import TrustStore, chain_digest

COMMENTED = """# our policy
[network]
# hosts for pip
allow = [
  "pypi.org",  # the index
]

[limits]
pids = 500  # enough for the test suite
"""


def trust(path: Path, locations: Locations) -> None:
    TrustStore(locations.trust_file).trust(path, chain_digest(project_chain(path, locations)))


def test_it_adds_the_host_keeping_comments_and_trust(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    policy = project / ".stockade.toml"
    policy.write_text(COMMENTED)
    trust(policy, locations)
    assert main(["allow", "example.com"]) == 0
    text = policy.read_text()
    assert text == COMMENTED.replace('  "pypi.org",  # the index\n', '  "pypi.org",  # the index\n  "example.com",\n')
    result = resolve(project, locations)
    assert result.trusted and "example.com" in result.policy.network.allow  # where check shows it
    assert "trusted, as you asked for it" in capsys.readouterr().out
    assert main(["allow", "example.com"]) == 0 and policy.read_text() == text  # twice changes nothing
    assert "already" in capsys.readouterr().out


def test_an_untrusted_file_stays_untrusted(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    policy = project / ".stockade.toml"
    policy.write_text('[network]\nallow = ["pypi.org"]\n[filesystem]\nallow_write = ["~/anything"]\n')  # a cloned repository's
    assert main(["allow", "example.com"]) == 0
    assert not resolve(project, locations).trusted
    assert "not trusted" in capsys.readouterr().out


def test_no_file_yet_makes_one_that_builds_on_the_profile(project: Path, locations: Locations) -> None:
    assert main(["allow", "registry.npmjs.org", "--profile", "npm"]) == 0
    policy = project / ".stockade.toml"
    assert policy.read_text() == 'extends = ["npm"]\n\n[network]\nallow = ["registry.npmjs.org"]\n'
    result = resolve(project, locations)
    assert result.trusted and "registry.npmjs.org" in result.policy.network.allow


@pytest.mark.parametrize(("host", "says"), [("https://pypi.org/simple", "write 'pypi.org'"), ("*.com", "public suffix")])
def test_a_host_it_cannot_allow_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str], host: str, says: str) -> None:
    assert main(["allow", host]) == 2
    assert says in capsys.readouterr().err and not (project / ".stockade.toml").exists()


def test_a_file_that_would_become_invalid_is_left_as_it_was(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = project / "p.toml"
    policy.write_text('[network]\nallow = ["pypi.org"]\n[filesystem]\ndeny_read = ["x"]\nallow_write = ["x"]\n')
    before = policy.read_text()
    assert main(["allow", "example.com", "--policy", str(policy)]) == 2
    assert policy.read_text() == before and "is also deny_read" in capsys.readouterr().err


def test_a_policy_file_that_is_a_symlink_is_not_followed(project: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cloned repository commits .stockade.toml as a link to a TOML secret of the user's; the
    denial hint says `stockade allow HOST`. Reading through the link copied the secret into the
    project as a plain file (a file the sandbox then reads), whether the edit was valid or not."""
    secret = home / ".cargo" / "credentials.toml"
    secret.parent.mkdir(parents=True)
    secret.write_text('[registry]\ntoken = "cio-SECRET"\n')
    policy = project / ".stockade.toml"
    policy.symlink_to(secret)
    assert main(["allow", "example.com"]) == 2
    assert "symlink" in capsys.readouterr().err
    assert policy.is_symlink() and secret.read_text() == '[registry]\ntoken = "cio-SECRET"\n'
    assert not any("SECRET" in p.read_text() for p in project.iterdir() if p.is_file() and not p.is_symlink())


def test_a_policy_file_in_a_folder_that_does_not_exist_is_one_clear_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's policy folder is gone once it ends; pasting its hint named a temporary file instead."""
    assert main(["allow", "example.com", "--policy", str(project / "gone" / ".stockade.toml")]) == 2
    said = capsys.readouterr().err
    assert "no folder" in said and str(project / "gone") in said and ".stockade-edit-" not in said
