"""Any nesting of rules over any tree gives a working sandbox or a policy error naming its line
(issue 33 item 1): random trees (folders, files, links absolute and relative, dangling, into and
out of the project) and random rules over them, run for real. A bounded number of examples here;
STOCKADE_COMPOSE_EXAMPLES=N runs more.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from tests.e2e.boxes import Box

EXAMPLES = int(os.environ.get("STOCKADE_COMPOSE_EXAMPLES", "40"))
NAMES = ["a", "b", "data", "out", ".claude", "cfg"]


def _tree(root: Path, outside: Path, rng: random.Random) -> list[str]:
    """A small random tree under root; the relative paths made (folders, files, links)."""
    made: list[str] = []
    for _ in range(rng.randint(3, 9)):
        parent = rng.choice(["", *[p for p in made if (root / p).is_dir() and not (root / p).is_symlink()]])
        name = rng.choice(NAMES) + rng.choice(["", "2"])
        path = os.path.join(parent, name) if parent else name
        if os.path.lexists(root / path):
            continue
        kind = rng.choice(["dir", "dir", "file", "link-in", "link-out", "link-abs", "dangling"])
        target = root / path
        if kind == "dir":
            target.mkdir()
        elif kind == "file":
            target.write_text("x\n")
        elif kind == "link-in" and made:
            os.symlink(os.path.relpath(root / rng.choice(made), target.parent), target)
        elif kind == "link-out":
            os.symlink(str(outside), target)
        elif kind == "link-abs" and made:
            os.symlink(str(root / rng.choice(made)), target)
        elif kind == "dangling":
            os.symlink("nowhere/at/all", target)
        else:
            continue
        made.append(path)
    return made


def _policy(root: Path, made: list[str], outside: Path, rng: random.Random) -> str:
    def some() -> list[str]:
        picks = rng.sample(made, k=min(len(made), rng.randint(0, 3)))
        return [p + (rng.choice(["", "/sub"]) if rng.random() < 0.3 else "") for p in picks]

    def nested(under: list[str]) -> list[str]:
        """Rules that meet: paths below (or above) ones another rule names, spelled through its links too."""
        found = [p for p in made if any(p.startswith(u + "/") or u.startswith(p + "/") for u in under)]
        for u in under:  # what is inside a place, spelled through it (a link's target's children)
            try:
                found += [u + "/" + child for child in os.listdir(root / u)]
            except OSError:
                pass
        return rng.sample(found, k=min(len(found), rng.randint(0, 2))) + [u + "/" + rng.choice(NAMES) for u in under if rng.random() < 0.3]

    deny_read = some()
    allow_write = ["."] + some() + nested(deny_read) + ([str(outside)] if rng.random() < 0.3 else [])
    deny_write = some() + nested(deny_read) + nested(allow_write[1:])
    def placed(paths: list[str]) -> list[str]:  # a box's policy file is not in the project: absolute paths
        return [p if p.startswith("/") else str(root / p) if p != "." else str(root) for p in paths]

    lines = ['extends = ["default"]', "[filesystem]", f"allow_write = {json.dumps(placed(allow_write))}"]
    lines.append(f"deny_read = {json.dumps(placed(deny_read))}")
    lines.append(f"deny_write = {json.dumps(placed(deny_write))}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(EXAMPLES))
def test_any_nesting_of_rules_gives_a_sandbox_or_a_policy_error(vbox: Box, seed: int) -> None:
    rng = random.Random(seed)
    outside = vbox.outside / "shared"
    outside.mkdir(exist_ok=True)
    made = _tree(vbox.project, outside, rng)
    policy = _policy(vbox.project, made, outside, rng)
    result = vbox.run("echo RAN", policy=policy)
    raw = [line for line in result.stderr.splitlines() if line.startswith("bwrap:")]
    assert not raw, f"seed {seed}: a raw bwrap failure\n{policy}\n{made}\n{result.stderr}"
    assert result.returncode in (0, 2), f"seed {seed}\n{policy}\n{made}\n{result.stderr}"
    if result.returncode == 2:
        assert ".toml:" in result.stderr and "Traceback" not in result.stderr, f"seed {seed}: {result.stderr}"
    else:
        assert result.stdout == "RAN\n", f"seed {seed}: {result}"


def test_a_write_rule_inside_a_hidden_link_target_starts(vbox: Box) -> None:
    """The issue's case: deny_read .claude (a link into a writable dotfiles folder) with deny_write
    .claude/commands was `bwrap: Can't mkdir ...: Read-only file system`, exit 125."""
    (vbox.project / "dotfiles" / "claude" / "commands").mkdir(parents=True)
    (vbox.project / "dotfiles" / "claude" / "secret").write_text("CANARY\n")
    (vbox.project / ".claude").symlink_to("dotfiles/claude")
    p = vbox.project
    policy = (f'extends = ["default"]\n[filesystem]\nallow_write = ["{p}", "{p}/dotfiles"]\n'
              f'deny_read = ["{p}/.claude"]\ndeny_write = ["{p}/.claude/commands"]\n')  # fmt: skip
    result = vbox.run("cat .claude/secret dotfiles/claude/secret 2>&1; echo RAN", policy=policy)
    assert result.returncode == 0 and "RAN" in result.stdout and "CANARY" not in result.stdout, result


def test_a_writable_place_named_through_a_planted_link_is_a_policy_error_at_its_line(vbox: Box) -> None:
    (vbox.project / "real").mkdir()
    (vbox.project / "via").symlink_to("real")
    p = vbox.project
    result = vbox.run("echo RAN", policy=f'extends = ["default"]\n[filesystem]\nallow_write = ["{p}", "{p}/via"]\n')
    assert result.returncode == 2 and "RAN" not in result.stdout, result
    assert "policy.toml:3: allow_write" in result.stderr and "is a symlink inside the writable place" in result.stderr, result
