"""A user's day, bare and under `stockade run`: what differs is a bug or a documented difference.

Each scenario of scenarios.py runs on a fresh copy of its project at one path,
first bare, then under the default and the agent profile. The exit status,
the output (stockade's own `stockade:` lines aside) and the project
afterwards (every file, and for a repository its refs, status and local
config) must agree. A difference that is the sandbox's purpose (a write
outside the project) is listed in differences.py with its reason; that list
may only shrink: a listed scenario that no longer differs fails until it
leaves the list.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.day.differences import DOCUMENTED
from tests.day.scenarios import PYTHON_PACKAGES, SCENARIOS, SETUPS, Scenario
from tests.sandboxed import require_sandbox
from tests.visible import force_rmtree, visible_packages, visible_root
from tests.work.realwork import Workplace, home_environment, snapshot

pytestmark = pytest.mark.e2e
PROFILES = ("bare", "default", "agent")
Seen = tuple[int, str, str, dict[str, tuple[str, str]], str]


@pytest.fixture(scope="module")
def place() -> Iterator[Workplace]:
    require_sandbox()
    root = visible_root("day")
    env = {**home_environment(root, "Day"), **OFFLINE, "PYTHONPATH": str(visible_packages(root, *PYTHON_PACKAGES))}
    try:
        yield Workplace(root, root / "home", root / "project", env)
    finally:
        force_rmtree(root)


# Tools that would reach the internet on their own (update checks, indexes) stay offline, bare too.
OFFLINE = {"NPM_CONFIG_UPDATE_NOTIFIER": "false", "NPM_CONFIG_FUND": "false", "NPM_CONFIG_AUDIT": "false", "NPM_CONFIG_OFFLINE": "true",
           "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "CARGO_NET_OFFLINE": "true"}  # fmt: skip
DURATION = re.compile(r"\b\d+(\.\d+)?s\b")  # pytest's "2 passed in 0.71s"
BARE: dict[str, Seen] = {}


def _run(place: Workplace, scenario: Scenario, profile: str) -> Seen:
    for leftover in (place.project, *place.root.glob("day-*"), place.root / "outside-file"):
        if leftover.is_symlink() or leftover.is_file():
            leftover.unlink()
        elif leftover.exists():
            force_rmtree(leftover)
    place.project.mkdir()
    SETUPS[scenario.setup](place.project)
    options = None if profile == "bare" else ["--profile", profile]
    done = place.shell(scenario.script, sandboxed=profile != "bare", options=options)
    err = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("stockade:"))
    out, err = DURATION.sub("Ns", done.stdout), DURATION.sub("Ns", err)
    return done.returncode, out, err, snapshot(place.project), _git_state(place.project, place.env)


def _git_state(project: Path, env: dict[str, str]) -> str:
    """A repository's refs, status and local config: what `git` would show the user next."""
    if not (project / ".git").exists():
        return ""
    said = []
    for words in (["for-each-ref", "--format=%(refname) %(objectname)"], ["status", "--porcelain"], ["config", "--local", "--list"]):
        done = subprocess.run(["git", *words], cwd=project, env=env, capture_output=True, text=True, timeout=60)
        said.append(f"$ git {' '.join(words)} -> {done.returncode}\n{done.stdout}{done.stderr}")
    return "\n".join(said)


def _differences(bare: Seen, sandboxed: Seen) -> list[str]:
    names = ("exit status", "stdout", "stderr", "project files", "repository")
    found = []
    for name, one, other in zip(names, bare, sandboxed, strict=True):
        if one != other:
            if isinstance(one, dict) and isinstance(other, dict):
                keys = sorted(k for k in set(one) | set(other) if one.get(k) != other.get(k))
                found.append(f"{name}: {keys[:8]}")
            else:
                found.append(f"{name}: bare {one!r:.300} / sandboxed {other!r:.300}")
    return found


@pytest.mark.parametrize("profile", PROFILES[1:])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_day_looks_the_same_inside(place: Workplace, scenario: Scenario, profile: str) -> None:
    missing = [program for program in scenario.needs if shutil.which(program, path=place.env["PATH"]) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    if scenario.name not in BARE:
        BARE[scenario.name] = _run(place, scenario, "bare")
    differences = _differences(BARE[scenario.name], _run(place, scenario, profile))
    reason = DOCUMENTED.get((scenario.name, profile)) or DOCUMENTED.get((scenario.name, "*"))
    if reason is None:
        assert differences == [], f"{scenario.name} differs under {profile}:\n" + "\n".join(differences)
    else:
        assert differences, f"{scenario.name} no longer differs under {profile}: remove it from differences.py ({reason})"


def test_the_corpus_is_a_day_and_the_list_names_only_its_scenarios() -> None:
    names = [scenario.name for scenario in SCENARIOS]
    assert len(names) >= 150 and len(set(names)) == len(names)
    assert all(scenario.setup in SETUPS for scenario in SCENARIOS)
    unknown = [key for key in DOCUMENTED if key[0] not in names or key[1] not in ("*", *PROFILES[1:])]
    assert unknown == [], unknown
