"""A policy file a CI workflow names is trusted only as its owners meant it (profiles/citrust.py; issue 33 item 4)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stockade.core.locations import Locations
from stockade.profiles.citrust import PIN_VARIABLE, content_digest
from stockade.profiles.resolve import layers_of, resolve, untrusted_note

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]
BASE = 'extends = ["default"]\n[network]\nallow = ["pypi.org"]\n'
WIDER = 'extends = ["default"]\n[network]\nallow = ["pypi.org", "evil.example"]\n'


@pytest.fixture
def locations(tmp_path: Path) -> Locations:
    home = tmp_path / "home"
    home.mkdir()
    return Locations(
        home=home, config=home / ".config/stockade", state=home / ".local/state/stockade", cache=home / ".cache/stockade", runtime=home / "run"
    )


def _repository(tmp_path: Path, base: str, head: str) -> Path:
    """A clone whose origin/main holds `base` and whose checkout (a pull request's) holds `head`."""
    upstream, clone = tmp_path / "upstream", tmp_path / "clone"
    subprocess.run([*GIT, "init", "-q", str(upstream)], check=True)
    (upstream / ".stockade.toml").write_text(base)
    subprocess.run([*GIT, "-C", str(upstream), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(upstream), "commit", "-qm", "base"], check=True)
    subprocess.run([*GIT, "clone", "-q", str(upstream), str(clone)], check=True)
    (clone / ".stockade.toml").write_text(head)
    return clone


PR = {"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_BASE_REF": "main"}


def _allow(clone: Path, locations: Locations, env: dict[str, str]) -> tuple[tuple[str, ...], str | None]:
    resolution = resolve(clone, locations, policy_file=clone / ".stockade.toml", env=env)
    return resolution.policy.network.allow, untrusted_note(resolution)


def test_a_pull_request_that_widens_the_named_policy_only_narrows(tmp_path: Path, locations: Locations) -> None:
    """ESCAPES 88: the pull request's own policy file gets no network the base branch's did not give."""
    clone = _repository(tmp_path, BASE, WIDER)
    allow, note = _allow(clone, locations, PR)
    assert "evil.example" not in allow
    assert note is not None and "the pull request changed" in note and "evil.example" in note
    control, control_note = _allow(clone, locations, {})  # outside a pull request: the file as written
    assert "evil.example" in control and control_note is None


def test_the_base_branchs_own_policy_is_trusted_in_a_pull_request(tmp_path: Path, locations: Locations) -> None:
    clone = _repository(tmp_path, WIDER, WIDER)
    allow, note = _allow(clone, locations, PR)
    assert "evil.example" in allow and note is None


def test_a_base_branch_git_cannot_read_is_no_trust(tmp_path: Path, locations: Locations) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / ".stockade.toml").write_text(WIDER)
    allow, note = _allow(folder, locations, PR)
    assert "evil.example" not in allow and note is not None and "could not be read" in note


def test_a_pinned_digest_is_trusted_and_any_other_content_is_not(tmp_path: Path, locations: Locations) -> None:
    """ESCAPES 88: what the workflow pins is trusted wherever it runs; anything else only narrows."""
    clone = _repository(tmp_path, BASE, WIDER)
    pin = content_digest(layers_of(clone / ".stockade.toml", locations))
    allow, note = _allow(clone, locations, {**PR, PIN_VARIABLE: pin})
    assert "evil.example" in allow and note is None  # the reviewed content, pinned: trusted, even in the pull request
    (clone / ".stockade.toml").write_text(WIDER + "# changed\n")
    allow, note = _allow(clone, locations, {PIN_VARIABLE: pin})
    assert "evil.example" not in allow and note is not None and PIN_VARIABLE in note


def test_a_linked_policy_file_is_no_trust(tmp_path: Path, locations: Locations) -> None:
    """A review's finding: the comparison followed a link the pull request made, to a wider file the base has too."""
    clone = _repository(tmp_path, BASE, BASE)
    (clone / "release.toml").write_text(WIDER)
    (clone / ".stockade.toml").unlink()
    (clone / ".stockade.toml").symlink_to("release.toml")
    allow, note = _allow(clone, locations, PR)
    assert "evil.example" not in allow and note is not None and "is a link" in note


def test_a_head_checkouts_parent_is_not_the_base(tmp_path: Path, locations: Locations) -> None:
    """Without origin/BASE, HEAD^1 stood for the base even when HEAD was the pull request's own commit."""
    clone = _repository(tmp_path, BASE, WIDER)
    subprocess.run([*GIT, "-C", str(clone), "commit", "-qam", "widen"], check=True)
    (clone / "README").write_text("x\n")
    subprocess.run([*GIT, "-C", str(clone), "add", "README"], check=True)
    subprocess.run([*GIT, "-C", str(clone), "commit", "-qm", "readme"], check=True)
    subprocess.run(["git", "-C", str(clone), "update-ref", "-d", "refs/remotes/origin/main"], check=True)
    allow, note = _allow(clone, locations, PR)
    assert "evil.example" not in allow and note is not None and "could not be read" in note


@pytest.mark.parametrize("event", ["issue_comment", "workflow_run", "pull_request_review", "merge_group"])
def test_other_events_that_run_a_pull_requests_code_count_too(tmp_path: Path, locations: Locations, event: str) -> None:
    clone = _repository(tmp_path, BASE, WIDER)
    allow, note = _allow(clone, locations, {"GITHUB_EVENT_NAME": event, "GITHUB_BASE_REF": "main"})
    assert "evil.example" not in allow and note is not None
