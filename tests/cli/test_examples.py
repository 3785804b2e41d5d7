"""Every file in examples/ is what it says: policies load and dry-run, agent configs match `stockade install`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from stockade.cli import install
from stockade.cli.main import main
from stockade.core.locations import locate
from stockade.profiles.model import NetworkMode
from stockade.profiles.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POLICIES = sorted(EXAMPLES.glob("*/.stockade.toml"))
AGENT_FILES = {"claude": "claude-settings.json", "codex": "codex-hooks.json", "gemini": "gemini-settings.json", "cursor": "cursor-hooks.json"}


def test_the_four_project_kinds_are_there() -> None:
    assert [p.parent.name for p in POLICIES] == ["go", "node", "python", "rust"]


@pytest.mark.parametrize("policy", POLICIES, ids=[p.parent.name for p in POLICIES])
def test_example_policy_loads_and_dry_runs(policy: Path, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    local = project / ".stockade.toml"
    shutil.copy(policy, local)
    trusted = resolve(project, locate(), policy_file=local).policy
    assert trusted.network.mode is NetworkMode.ALLOWLIST and trusted.network.allow
    assert str(project) in trusted.filesystem.allow_write and trusted.limits.wall_time
    untrusted = resolve(project, locate())  # committed but not trusted: it may only narrow the default
    assert not untrusted.trusted and untrusted.policy.network.mode is NetworkMode.NONE
    assert main(["run", "--policy", str(local), "--dry-run", "--", "true"]) == 0
    out = capsys.readouterr().out
    assert f"--bind {project} {project}" in out and "# network: allowlist" in out
    assert main(["check", str(local)]) == 0


@pytest.mark.parametrize("agent", list(AGENT_FILES))
def test_agent_configs_are_what_install_writes(agent: str) -> None:
    shipped = json.loads((EXAMPLES / "agents" / AGENT_FILES[agent]).read_text())
    expected, _ = install.apply({}, agent, install.hook_command(agent, "/usr/local/bin/stockade", install.DEFAULT_MAX_OUTPUT))
    assert shipped == expected


def _runs(text: str) -> list[str]:
    """The `run:` scripts of a workflow or action, as text (no YAML parser needed)."""
    scripts, current, indent = [], None, 0
    for line in text.splitlines():
        stripped = line.lstrip()
        if current is not None:
            if stripped and len(line) - len(stripped) <= indent:
                scripts.append("\n".join(current))
                current = None
            else:
                current.append(line)
                continue
        match = re.match(r"(\s*)(?:- )?run: *(.*)$", line)
        if match and not match.group(2).startswith(("${{", "ubuntu")):
            indent = len(match.group(1))
            if match.group(2) in ("|", ">", "|-", ">-"):
                current = []
            else:
                scripts.append(match.group(2))
    if current is not None:
        scripts.append("\n".join(current))
    return scripts


@pytest.mark.parametrize("path", [ROOT / "action.yml", EXAMPLES / "ci" / "github-workflow.yml"], ids=["action", "workflow"])
def test_github_files_never_paste_inputs_into_scripts(path: Path) -> None:
    scripts = _runs(path.read_text())
    assert scripts
    for script in scripts:
        assert "${{" not in script, f"an expression pasted into a shell script (injection): {script!r}"


def test_action_runs_the_step_under_stockade_ci() -> None:
    text = (ROOT / "action.yml").read_text()
    assert "using: composite" in text
    assert '"$STOCKADE_BIN" "${args[@]}" -- bash -e -o pipefail -c -- "$STOCKADE_SCRIPT"' in text
    assert "args=(run --ci --report" in text
    yaml = pytest.importorskip("yaml")
    action = yaml.safe_load(text)
    assert set(action["inputs"]) >= {"run", "policy", "profile", "report", "working-directory"}
    assert action["inputs"]["run"]["required"] is True
    steps = action["runs"]["steps"]
    assert steps[-1]["env"]["STOCKADE_SCRIPT"] == "${{ inputs.run }}"
    workflow = yaml.safe_load((EXAMPLES / "ci" / "github-workflow.yml").read_text())
    assert workflow["permissions"] == {"contents": "read"}
    gitlab = yaml.safe_load((EXAMPLES / "ci" / "gitlab-ci.yml").read_text())
    assert all("stockade run --ci" in line for line in gitlab["test"]["script"])
