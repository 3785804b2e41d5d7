"""`**/` rules of the project reach the places the user's own policy opens (profiles/anywhere.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.locations import Locations
from stockade.profiles.anywhere import spread
from stockade.profiles.resolve import resolve

P = "/w/p"


@pytest.mark.parametrize(
    ("rules", "places", "added"),
    [
        pytest.param((f"{P}/**/.env",), ("/w/shared",), ("/w/shared/**/.env",), id="a-place-elsewhere"),
        pytest.param((f"{P}/**/.env",), ("/w/shared/",), ("/w/shared/**/.env",), id="trailing-slash"),
        pytest.param((f"{P}/**/.env",), (f"{P}/build", P), (), id="inside-the-project-is-covered-already"),
        pytest.param((f"{P}/**/.env",), ("/w",), ("/w/**/.env",), id="a-place-holding-the-project"),
        pytest.param((f"{P}/x/**/.env", f"{P}/.env", "/elsewhere/**/.env"), ("/w/shared",), (), id="only-project-wide-rules"),
        pytest.param((f"{P}/**/a/*.key",), ("/w/s", "/w/s"), ("/w/s/**/a/*.key",), id="listed-twice"),
        pytest.param((f"{P}x/**/.env",), ("/w/shared",), (), id="a-sibling-folder-with-a-longer-name"),
    ],
)
def test_spread(rules: tuple[str, ...], places: tuple[str, ...], added: tuple[str, ...]) -> None:
    assert spread(rules, P, places) == (*rules, *added)


def test_built_in_caches_are_not_walked_but_listed_places_are(project: Path, locations: Locations) -> None:
    policy = project / ".stockade.toml"
    policy.write_text('extends = ["pypi"]\n[filesystem]\nallow_write = ["~/shared", "~/.cache/pip"]\nallow_read = ["~/notes"]\n')
    fs = resolve(project, locations, policy_file=policy).policy.filesystem
    home = str(locations.home)
    assert f"{home}/shared/**/.env" in fs.deny_read and f"{home}/notes/**/.env" in fs.deny_read
    assert f"{home}/.cache/pip/**/.env" in fs.deny_read  # named by the user's file too
    assert not any("/.cache/uv/" in rule for rule in fs.deny_read)  # only pypi's own list names it
    assert not any("/notes/" in rule for rule in fs.deny_write)  # shown read-only: nothing to write
