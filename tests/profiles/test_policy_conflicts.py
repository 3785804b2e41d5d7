"""Overlaps between rules are policy errors with FILE:LINE or defined carve-outs, never a bwrap failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.errors import PolicyError
from stockade.core.locations import Locations
from stockade.profiles.resolve import resolve

# (policy text, the line the error names, or None when the policy is fine)
CASES = [
    pytest.param('[filesystem]\ndeny_read = ["x"]\nallow_write = [\n  "x",\n]\n', 3, id="hidden-and-writable"),
    pytest.param('[filesystem]\nallow_write = ["x"]\ndeny_read = ["x"]\n', 2, id="the-same-folder"),
    pytest.param('extends = []\n\n[filesystem]\ndeny_read = ["~/secrets"]\nallow_write = ["~/secrets"]\n', 5, id="under-home"),
    pytest.param('[filesystem]\ndeny_read = ["x"]\nallow_write = ["x/y/z"]\n', None, id="writable-inside-hidden-is-a-carve-out"),
    pytest.param('[filesystem]\nallow_write = ["x"]\ndeny_read = ["x/.env", "x/private"]\n', None, id="carve-out-inside-writable-is-fine"),
    pytest.param('[filesystem]\ndeny_read = ["x/**/secret"]\nallow_write = ["x/y"]\n', None, id="a-glob-hides-files-not-the-folder"),
]


@pytest.mark.parametrize(("text", "line"), CASES)
def test_overlapping_rules(project: Path, locations: Locations, text: str, line: int | None) -> None:
    policy = project / "p.toml"
    policy.write_text(text)
    if line is None:
        resolve(project, locations, policy_file=policy)
        return
    with pytest.raises(PolicyError) as caught:
        resolve(project, locations, policy_file=policy)
    assert (caught.value.file, caught.value.line) == (str(policy), line), str(caught.value)
    assert "is also deny_read" in str(caught.value)


def test_run_says_it_in_one_line_with_exit_2(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    from stockade.cli.main import main

    policy = project / "p.toml"
    policy.write_text('[filesystem]\ndeny_read = ["x"]\nallow_write = ["x"]\n')
    assert main(["run", "--policy", str(policy), "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stockade: error: {policy}:3: allow_write ") and err.count("\n") == 1, err
