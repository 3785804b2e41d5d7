"""After a busy run the summary stays within about ten lines (issue: everyday work)."""

from __future__ import annotations

from tests.e2e.boxes import Box


def test_a_run_that_makes_hundreds_of_reported_files_gets_a_short_summary(vbox: Box) -> None:
    script = (
        "for i in $(seq 120); do mkdir -p node_modules/m$i && echo '{}' > node_modules/m$i/package.json; done; "
        "for i in $(seq 12); do mkdir -p r$i/.vscode && echo '{}' > r$i/.vscode/settings.json; done; "
        "echo x > Makefile; echo done"
    )
    result = vbox.run(script)
    assert result.returncode == 0 and "done" in result.stdout, result
    lines = result.stderr.splitlines()
    assert 1 <= len(lines) <= 10, lines
    assert any("node_modules/: 120 package.json created" in line for line in lines), lines
    assert any(line.startswith("stockade: 12 files") for line in lines), lines  # the .vscode settings, moved aside
    assert not (vbox.project / "r1" / ".vscode" / "settings.json").exists()


def test_a_run_that_locks_the_project_cannot_keep_what_it_planted(vbox: Box) -> None:
    """chmod 555 on the project itself (a writable root, which cannot be moved aside): the
    check after the run gives the owner's access back and still moves the planted file."""
    result = vbox.run("echo evil > .envrc && mkdir .vscode && echo '{}' > .vscode/settings.json && chmod 555 . && echo done")
    assert "done" in result.stdout, result
    assert not (vbox.project / ".envrc").exists() and not (vbox.project / ".vscode").exists(), result
    assert "renamed to" in result.stderr or "files that could run code" in result.stderr, result
    control = vbox.run("chmod u+w . && echo ok > kept.txt && cat kept.txt")
    assert control.stdout == "ok\n", control


def test_agent_instruction_files_made_inside_are_named_after_the_run(vbox: Box) -> None:
    """runs_later.py lists CLAUDE.md, AGENTS.md, Rakefile and lefthook.yml as reported; a second,
    older list in floor.py shadowed the table, so they were never named."""
    result = vbox.run("mkdir -p sub && echo x > sub/CLAUDE.md && echo y > AGENTS.md && echo z > Rakefile && echo ok > notes.txt")
    assert result.returncode == 0, result
    for name in ("sub/CLAUDE.md", "AGENTS.md", "Rakefile"):
        assert name in result.stderr, result.stderr
    assert "notes.txt" not in result.stderr  # the control: ordinary files are not named
    assert (vbox.project / "sub" / "CLAUDE.md").read_text() == "x\n"  # reported, not moved aside
