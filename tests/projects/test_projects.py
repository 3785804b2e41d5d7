"""Real projects' own test suites give the same result inside stockade as outside.

Each project (catalog.py) is copied fresh to one fixed path and its suite run
bare; then copied fresh to the same path again and run under `stockade run
--profile default` (network off, a private home). The two runs must end with
the same exit status and the same test counts. A fresh HOME each time, with a
git identity, stands in for a developer's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.projects import fetch
from tests.projects.catalog import PROJECTS, Project
from tests.sandboxed import require_sandbox
from tests.visible import VISIBLE_BASE, force_rmtree

STOCKADE = Path(sys.executable).with_name("stockade")
WORK = VISIBLE_BASE / "projects"
TIMEOUT = 300  # seconds for one suite; each passes bare here in under 20
_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)")
_TAPE_COUNT = re.compile(r"^# (tests|pass|fail|skip|todo) +(\d+)$", re.MULTILINE)


@dataclass
class Outcome:
    code: int
    counts: dict[str, int]
    output: str


@pytest.fixture(scope="module", autouse=True)
def _ready() -> None:
    require_sandbox()
    if os.geteuid() != 0 and os.environ.get("STOCKADE_PROJECTS_UNPRIVILEGED") != "1":
        pytest.skip("the real-projects suite runs in the root phase (STOCKADE_PROJECTS_UNPRIVILEGED=1 runs it here too)")
    try:
        for project in PROJECTS:
            fetch.ensure(project)
    except (fetch.FetchError, OSError) as error:
        if os.environ.get("STOCKADE_MUST_SANDBOX") == "1":
            pytest.fail(f"cannot set up the real projects (PyPI and npm are needed once): {error}")
        pytest.skip(f"cannot set up the real projects (PyPI and npm are needed once): {error}")


def _counts(project: Project, output: str) -> dict[str, int]:
    if project.kind == "npm":
        return {name: int(number) for name, number in _TAPE_COUNT.findall(output)}
    summary = [line for line in output.splitlines() if re.search(r"\b(passed|failed|no tests ran|error)\b", line)]
    last = summary[-1] if summary else ""
    return {kind.rstrip("s") if kind.startswith("error") else kind: int(number) for number, kind in _PYTEST_COUNT.findall(last)}


def _run(project: Project, *, sandboxed: bool) -> Outcome:
    work = WORK / project.name  # outside this checkout: pytest would load stockade's own conftest.py
    home = WORK / f"{project.name}.home"
    for folder in (work, home):
        if folder.exists():
            force_rmtree(folder)
    shutil.copytree(fetch.template(project), work, symlinks=True)
    home.mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n\tname = Project Test\n\temail = projects@example.test\n[init]\n\tdefaultBranch = main\n")
    venv = fetch.venv(project)
    words = [word.format(venv=venv, bin=work / "node_modules" / ".bin") for word in project.command]
    if sandboxed:
        words = [str(STOCKADE), "run", "--profile", project.profile, "--", *words]
    env = {"HOME": str(home), "PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    try:
        result = subprocess.run(words, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        output = _text(expired.stdout) + _text(expired.stderr)
        return Outcome(-1, {"timed out": TIMEOUT}, output)
    finally:
        force_rmtree(home)  # a proxy daemon the run started leaves with its HOME (the suite checks)
    output = result.stdout + result.stderr
    return Outcome(result.returncode, _counts(project, output), output)


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_the_suite_gives_the_same_result_inside(project: Project) -> None:
    bare = _run(project, sandboxed=False)
    assert bare.counts, f"{project.name}: no test counts bare:\n{bare.output[-3000:]}"
    inside = _run(project, sandboxed=True)
    expected_code, expected = bare.code, dict(bare.counts)
    if project.root_difference and os.geteuid() == 0:
        _why, delta, expected_code = project.root_difference
        expected = {kind: expected.get(kind, 0) + delta.get(kind, 0) for kind in {*expected, *delta}}
        expected = {kind: count for kind, count in expected.items() if count}
    assert (inside.code, inside.counts) == (expected_code, expected), (
        f"{project.name}: bare {bare.code} {bare.counts}, expected inside {expected_code} {expected}, "
        f"inside {inside.code} {inside.counts}\n"
        f"--- inside, last lines:\n{inside.output[-4000:]}"
    )
