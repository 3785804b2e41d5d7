"""`stockade install AGENT`: the hook goes into the right settings file once, and `--remove` takes only it out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stockade.cli import install
from stockade.cli.main import main
from stockade.core.errors import UsageError

STOCKADE = "/opt/stockade/bin/stockade"
GUARD = {agent: install._fail_closed_guard(agent) for agent in install.GUARDED_AGENTS}


def _install(
    agent: str, home: Path, project: Path, *, scope: str = "user", remove: bool = False, max_output: int | None = 1 << 20
) -> install.Outcome:
    return install.install_hook(agent, scope, home=home, project=project, remove=remove, max_output=max_output, stockade=STOCKADE)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


@pytest.mark.parametrize(
    ("agent", "relative", "expected"),
    [
        ("claude", ".claude/settings.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": f"{STOCKADE} hook claude {GUARD['claude']}", "timeout": 30}]}]}}),
        ("codex", ".codex/hooks.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": f"{STOCKADE} hook codex {GUARD['codex']}"}]}]}}),
        (
            "gemini", ".gemini/settings.json",
            {
                "hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [
                    {"type": "command", "command": f"{STOCKADE} hook gemini {GUARD['gemini']}", "name": "stockade", "timeout": 30000, "description": "Run every shell command inside stockade"},
                ]}]},
                "hooksConfig": {"enabled": True},
            },
        ),
        ("cursor", ".cursor/hooks.json", {"version": 1, "hooks": {"beforeShellExecution": [{"command": f"{STOCKADE} hook cursor"}]}}),
    ],
)  # fmt: skip
def test_install_is_idempotent_and_remove_leaves_nothing(places: tuple[Path, Path], agent: str, relative: str, expected: dict[str, object]) -> None:
    home, project = places
    first = _install(agent, home, project)
    path = home / relative
    assert (first.action, first.changed, first.path) == ("added", True, path)
    assert json.loads(path.read_text()) == expected
    written = path.read_bytes()
    second = _install(agent, home, project)
    assert (second.action, second.changed) == ("unchanged", False) and path.read_bytes() == written
    removed = _install(agent, home, project, remove=True)
    assert removed.action == "removed" and json.loads(path.read_text()) == (
        {"hooksConfig": {"enabled": True}} if agent == "gemini" else {"version": 1} if agent == "cursor" else {}
    )
    again = _install(agent, home, project, remove=True)
    assert (again.action, again.changed) == ("absent", False)


def test_everything_else_in_the_file_is_kept(places: tuple[Path, Path]) -> None:
    home, project = places
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    before = {
        "model": "opus",
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "~/bin/check-write"}]}],
            "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/log"}]}],
        },
    }
    path.write_text(json.dumps(before))
    _install("claude", home, project)
    after = json.loads(path.read_text())
    assert after["model"] == "opus" and after["permissions"] == before["permissions"]
    assert after["hooks"]["PostToolUse"] == before["hooks"]["PostToolUse"]
    assert after["hooks"]["PreToolUse"][0] == before["hooks"]["PreToolUse"][0]
    assert after["hooks"]["PreToolUse"][1]["matcher"] == "Bash"
    _install("claude", home, project, remove=True)
    assert json.loads(path.read_text()) == before


def test_reinstall_updates_in_place_and_drops_duplicates(places: tuple[Path, Path]) -> None:
    home, project = places
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    stale = {"type": "command", "command": "/old/venv/bin/stockade hook claude --max-output 10"}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [stale, {"type": "command", "command": "~/bin/audit"}]},
        {"matcher": "Bash", "hooks": [dict(stale)]},
    ]}}))  # fmt: skip
    outcome = _install("claude", home, project)
    assert outcome.action == "updated"
    groups = json.loads(path.read_text())["hooks"]["PreToolUse"]
    assert groups == [
        {
            "matcher": "Bash",
            "hooks": [
                {"type": "command", "command": f"{STOCKADE} hook claude {GUARD['claude']}", "timeout": 30},
                {"type": "command", "command": "~/bin/audit"},
            ],
        }
    ]
    assert any("~/bin/audit" in note and "the only one" in note for note in outcome.notes)


def test_project_and_local_scopes(places: tuple[Path, Path]) -> None:
    home, project = places
    shared = _install("claude", home, project, scope="project")
    assert shared.path == project / ".claude" / "settings.json" and any("names this machine's stockade" in n for n in shared.notes)
    assert _install("claude", home, project, scope="local").path == project / ".claude" / "settings.local.json"
    assert _install("cursor", home, project, scope="project").path == project / ".cursor" / "hooks.json"
    with pytest.raises(UsageError, match="no local"):
        _install("gemini", home, project, scope="local")
    assert not (home / ".claude").exists()


def test_max_output_is_written_into_the_hook_command(places: tuple[Path, Path]) -> None:
    home, project = places
    _install("claude", home, project, max_output=4096)
    command = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command == f"{STOCKADE} hook claude --max-output 4096 {GUARD['claude']}"
    _install("claude", home, project, max_output=None)
    command = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command == f"{STOCKADE} hook claude --max-output none {GUARD['claude']}"


def test_a_broken_file_is_never_overwritten(places: tuple[Path, Path]) -> None:
    home, project = places
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"model": "opus",')
    with pytest.raises(UsageError, match="not valid JSON"):
        _install("claude", home, project)
    assert path.read_text() == '{"model": "opus",'
    path.write_text('{"hooks": []}')
    with pytest.raises(UsageError, match='"hooks" is not a JSON object'):
        _install("claude", home, project)


def test_symlinks(places: tuple[Path, Path], tmp_path: Path) -> None:
    home, project = places
    dotfiles = tmp_path / "dotfiles" / "claude.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text("{}")
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to(dotfiles)
    _install("claude", home, project)
    assert (home / ".claude" / "settings.json").is_symlink() and "hook claude" in dotfiles.read_text()
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").symlink_to(dotfiles)
    with pytest.raises(UsageError, match="symlink"):
        _install("claude", home, project, scope="project")


def test_disable_all_hooks_is_pointed_out(places: tuple[Path, Path]) -> None:
    home, project = places
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"disableAllHooks": true}')
    assert any("disableAllHooks" in note for note in _install("claude", home, project).notes)


def test_is_ours() -> None:
    assert install.is_ours("/x/bin/stockade hook claude", "claude")
    assert install.is_ours("'/path with space/stockade' hook claude --max-output 1", "claude")
    assert not install.is_ours("/x/bin/stockade hook codex", "claude")
    assert not install.is_ours("/x/bin/other hook claude", "claude")
    assert not install.is_ours("echo 'unbalanced", "claude")


def test_old_codex_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "codex"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'codex-cli 0.118.0'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    with pytest.raises(UsageError, match="does not apply hook rewrites"):
        install.codex_version_note()
    fake.write_text("#!/bin/sh\necho 'codex-cli 0.160.1'\n")
    assert install.codex_version_note() is None


def test_the_command_on_a_temporary_home(home: Path, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "claude"]) == 0
    assert "added the claude hook to" in capsys.readouterr().out
    settings = home / ".claude" / "settings.json"
    command = json.loads(settings.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command.endswith(f" hook claude {GUARD['claude']}") and os.path.isabs(command.split(" ")[0])
    assert main(["install", "claude"]) == 0 and "already in" in capsys.readouterr().out
    assert main(["install", "claude", "--project"]) == 0
    assert (project / ".claude" / "settings.json").is_file()
    assert main(["install", "claude", "--remove"]) == 0 and json.loads(settings.read_text()) == {}
    assert main(["install", "claude", "--user", "--project"]) == 2
    assert main(["install", "vim"]) == 2
