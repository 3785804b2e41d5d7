"""After a busy run the summary stays within about ten lines (issue: everyday work)."""

from __future__ import annotations

from boxes import Box


def test_a_run_that_makes_hundreds_of_reported_files_gets_a_short_summary(vbox: Box) -> None:
    script = ("for i in $(seq 120); do mkdir -p node_modules/m$i && echo '{}' > node_modules/m$i/package.json; done; "
              "for i in $(seq 12); do mkdir -p r$i/.vscode && echo '{}' > r$i/.vscode/settings.json; done; "
              "echo x > Makefile; echo done")
    result = vbox.run(script)
    assert result.returncode == 0 and "done" in result.stdout, result
    lines = result.stderr.splitlines()
    assert 1 <= len(lines) <= 10, lines
    assert any("node_modules/: 120 package.json created" in line for line in lines), lines
    assert any(line.startswith("stockade: 12 files") for line in lines), lines  # the .vscode settings, moved aside
    assert not (vbox.project / "r1" / ".vscode" / "settings.json").exists()
