"""Real work in real sandboxes, each compared with the same work done without stockade
(the harness; conftest.py holds the fixtures).

A scenario is a project template and a shell script. `twice` runs the script on
a fresh copy of the template at one path, first bare, then (on a new copy at the
same path, so absolute paths written into venvs and lockfiles agree) under
`stockade run`, and returns both results and both final trees for comparison.
Commits get fixed dates, so their hashes agree too.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.visible import force_rmtree

SCRIPT = Path(sys.executable).with_name("stockade")
STOCKADE = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "stockade.cli.main"]
FIXED_DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
SKIP_IN_TREE = ("__pycache__", ".pytest_cache")
Tree = dict[str, tuple[str, str]]


def home_environment(root: Path, who: str) -> dict[str, str]:
    """A HOME under `root` whose git knows `who` (main branch, local clones allowed), and the
    environment a workplace runs with: fixed commit dates, a plain PATH."""
    home = root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f"[user]\n\tname = {who} Test\n\temail = {who.lower()}@example.test\n[init]\n\tdefaultBranch = main\n"
        '[protocol "file"]\n\tallow = always\n[advice]\n\tdetachedHead = false\n'
    )
    return {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **FIXED_DATES}


@dataclass
class Result:
    code: int
    out: str
    err: str
    tree: Tree


@dataclass
class Workplace:
    root: Path
    home: Path
    project: Path
    env: dict[str, str]

    def shell(self, script: str, *, sandboxed: bool, options: list[str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        command = ["/bin/sh", "-c", script]
        if sandboxed:
            command = [*STOCKADE, "run", *(options or []), "--", *command]
        return subprocess.run(command, cwd=cwd or self.project, env=self.env, capture_output=True, text=True, timeout=300)

    def twice(self, make: Callable[[Path], None], script: str, *, options: list[str] | None = None, workdir: str = ".") -> tuple[Result, Result]:
        """(bare, sandboxed): the same script on fresh copies of one template at one path."""
        results = []
        for sandboxed in (False, True):
            if self.project.exists():
                force_rmtree(self.project)
            self.project.mkdir()
            make(self.project)
            done = self.shell(script, sandboxed=sandboxed, options=options, cwd=self.project / workdir)
            results.append(Result(done.returncode, done.stdout, done.stderr, snapshot(self.project)))
        return results[0], results[1]


def snapshot(root: Path) -> Tree:
    """Every entry under root: kind and content digest (links: target). Git's own folder is
    compared through git commands instead (its index and logs hold times)."""
    tree: Tree = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_IN_TREE and d != ".git")
        for name in sorted(dirs + files):
            path = Path(folder) / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                tree[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                tree[relative] = ("dir", "")
            elif path.is_file() and name not in SKIP_IN_TREE:
                tree[relative] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return tree
