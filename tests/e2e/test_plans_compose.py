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


def _tree(root: Path, outside: Path, rng: random.Random, names: list[str] = NAMES) -> list[str]:
    """A small random tree under root; the relative paths made (folders, files, links)."""
    made: list[str] = []
    for _ in range(rng.randint(3, 9)):
        parent = rng.choice(["", *[p for p in made if (root / p).is_dir() and not (root / p).is_symlink()]])
        name = rng.choice(names) + rng.choice(["", "2"])
        path = os.path.join(parent, name) if parent else name
        if os.path.lexists(root / path):
            continue
        kind = rng.choice(["dir", "dir", "file", "link-in", "link-out", "link-abs", "dangling"])
        target = root / path
        if kind == "dir":
            target.mkdir()
        elif kind == "file":
            target.write_text(f"content of {path}\n")
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


def _policy(root: Path, made: list[str], outside: Path, rng: random.Random, names: list[str] = NAMES, carve_outs: bool = True) -> str:
    """Random rules over the tree; `carve_outs`: allow_write entries inside deny_read ones too."""

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
        return rng.sample(found, k=min(len(found), rng.randint(0, 2))) + [u + "/" + rng.choice(names) for u in under if rng.random() < 0.3]

    deny_read = some()
    allow_write = ["."] + some() + (nested(deny_read) if carve_outs else []) + ([str(outside)] if rng.random() < 0.3 else [])
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


# Names no floor row or default rule knows: what each path may be is the policy's rules alone.
PLAIN_NAMES = ["a", "b", "data", "out", "lib", "notes"]


def _expected(root: Path, policy: str, path: Path) -> tuple[bool, bool]:
    """(readable, writable) of a path inside, from the policy's rules and the host's real paths: hidden
    where it or its real path lies in a deny_read entry's (deny wins); writable where its real path lies
    in an allow_write entry's and in no deny_write entry's."""
    import tomllib

    rules = tomllib.loads(policy)["filesystem"]

    def within(candidate: str, places: list[str]) -> bool:
        return any(candidate == place or candidate.startswith(place.rstrip("/") + "/") for place in places)

    real = os.path.realpath(path)
    denied = [os.path.realpath(p) for p in rules["deny_read"]] + list(rules["deny_read"])
    places = [os.path.realpath(p) for p in rules["allow_write"]]
    # a writable place strictly inside a hidden folder is seen (a carve-out), unless it is hidden itself
    carved = [place for place in places if within(place, denied) and place not in denied]
    if (within(real, denied) or within(str(path), list(rules["deny_read"]))) and not within(real, carved):
        return False, False
    if within(real, carved) and any(within(d, carved) and within(real, [d]) for d in denied):
        return False, False  # a deny_read inside the carve-out
    writable = within(real, places)
    writable = writable and not within(real, [os.path.realpath(p) for p in rules["deny_write"]] + list(rules["deny_write"]))
    return True, writable


PROBE = r"""
import json, os, sys
seen = {}
for path in json.loads(sys.argv[1]):
    if os.path.isdir(path):
        try:
            os.listdir(path)
            readable = True
        except OSError:
            readable = False
        probe = os.path.join(path, ".probe-write")
        try:
            open(probe, "x").close()
            os.unlink(probe)
            writable = True
        except OSError:
            writable = False
    else:
        try:
            with open(path) as handle:
                readable = handle.read().startswith("content of ")
        except OSError:
            readable = False
        try:
            open(path, "a").close()
            writable = True
        except OSError:
            writable = False
    seen[path] = [readable, writable]
print(json.dumps(seen))
"""


@pytest.mark.parametrize("seed", range(EXAMPLES // 2))
def test_each_path_inside_is_what_the_rules_say(vbox: Box, seed: int) -> None:
    """Issue 33 item 1: the access each path has inside (read, write), through any link, against a model of the
    rules built here from the host's real paths. Only examples that start are judged (the test above covers
    the rest); folders hidden by a rule are not readable, files hidden read as empty, and a writable place
    inside a hidden folder (a carve-out) is seen and writable."""
    rng = random.Random(1000 + seed)
    outside = vbox.outside / "shared"
    outside.mkdir(exist_ok=True)
    (outside / "o.txt").write_text("content of outside\n")
    made = _tree(vbox.project, outside, rng, PLAIN_NAMES)
    policy = _policy(vbox.project, made, outside, rng, PLAIN_NAMES)
    probed = [str(vbox.project / p) for p in made if os.path.exists(vbox.project / p)]
    probed += [str(vbox.project / p / "o.txt") for p in made if os.path.realpath(vbox.project / p) == str(outside.resolve())]
    (vbox.project.parent / "probe.py").write_text(PROBE)
    expected = {path: list(_expected(vbox.project, policy, Path(path))) for path in probed}
    result = vbox.run(f"/usr/bin/python3 {vbox.project.parent / 'probe.py'} '{json.dumps(probed)}'", policy=policy)
    if result.returncode == 2:
        return  # a policy error at its line: judged by the test above
    assert result.returncode == 0, f"seed {seed}\n{policy}\n{made}\n{result.stderr}"
    seen = json.loads(result.stdout)
    wrong = {path: (expected[path], seen[path]) for path in probed if expected[path] != seen[path]}
    assert not wrong, f"seed {seed}: (expected, seen) [readable, writable]\n{wrong}\n{policy}\n{made}"


def test_a_writable_place_inside_a_hidden_folder_is_seen_and_nothing_else_of_it(vbox: Box) -> None:
    """srt's carve-out (issue 33): a hidden `data` whose `out` stays writable; a deny inside `out` still holds, and
    nothing else of `data` (its files, its other folders, its listing) is seen."""
    p = vbox.project
    (p / "data" / "out").mkdir(parents=True)
    (p / "data" / "other").mkdir()
    (p / "data" / "secret.txt").write_text("CANARY-DATA\n")
    (p / "data" / "other" / "x.txt").write_text("CANARY-OTHER\n")
    (p / "data" / "out" / "key.pem").write_text("CANARY-KEY\n")
    (p / "data" / "out" / "locked").mkdir()
    policy = (f'extends = ["default"]\n[filesystem]\nallow_write = ["{p}", "{p}/data/out"]\n'
              f'deny_read = ["{p}/data", "{p}/data/out/key.pem"]\ndeny_write = ["{p}/data/out/locked"]\n')  # fmt: skip
    script = ("cat data/secret.txt data/other/x.txt data/out/key.pem 2>/dev/null; ls data 2>/dev/null; "
              "echo made > data/out/new.txt && echo WROTE; echo x > data/planted.txt 2>/dev/null || echo REFUSED; "
              "echo x > data/out/locked/f 2>/dev/null || echo LOCKED; echo 'touch /tmp/x' > data/out/.envrc; true")  # fmt: skip
    result = vbox.run(script, policy=policy)
    assert result.returncode == 0, result
    assert "CANARY" not in result.stdout and "other" not in result.stdout, result.stdout
    assert "WROTE" in result.stdout and (p / "data" / "out" / "new.txt").read_text() == "made\n"
    assert "REFUSED" in result.stdout and not (p / "data" / "planted.txt").exists()
    assert "LOCKED" in result.stdout and not (p / "data" / "out" / "locked" / "f").exists()  # its own deny_write holds
    assert not (p / "data" / "out" / ".envrc").exists(), result.stderr  # and the floor: a planted .envrc is moved aside
    inside = vbox.run("pwd; cat ../secret.txt 2>/dev/null || echo HIDDEN", policy=policy, cwd=p / "data" / "out")
    assert inside.returncode == 0 and inside.stdout == f"{p}/data/out\nHIDDEN\n", inside  # a run from the place itself
