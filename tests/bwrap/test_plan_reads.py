"""Planning reads the filesystem through the plan cache's recorder only (plan_cache.Recorder).

A stored plan stays valid while everything planning read is unchanged, and the
recorder knows what planning read only through the `os` and `open` functions
it wraps. A reader it does not wrap (`_io.FileIO`, `os.statvfs`, a subprocess,
ctypes) would make stale plans silently: a mask that no longer hides a secret.

Two checks, because Python's audit hooks see opens, listings, subprocesses and
ctypes calls but not stat-like calls:
- dynamic: a real planning run over a project with the layouts planning looks
  into (git worktree and submodule, symlinked protected names, `**/` rules,
  a project policy), under `sys.addaudithook`; every path opened or listed
  must be one the recorder noted, and nothing may be spawned or called in C;
- static: the modules planning loaded call no `os` reader the recorder does
  not wrap.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.visible import force_rmtree, visible_root

CHILD = textwrap.dedent(
    """
    import json, os, sys
    from stockade.bwrap.plan import plan_cache
    from stockade.bwrap.plan.planner import BwrapPlanner
    from stockade.core.invocation import Invocation
    from stockade.profiles.resolve import request_for

    WATCHED = ("open", "os.listdir", "os.scandir", "subprocess.Popen", "os.posix_spawn", "os.exec", "os.system",
               "os.fork", "ctypes.dlopen", "ctypes.call_function", "ctypes.dlsym", "socket.connect")
    seen = []
    recording = False

    def hook(event, args):
        if recording and event in WATCHED:
            first = args[0] if args else None
            seen.append((event, first if isinstance(first, (str, int)) else os.fsdecode(first) if isinstance(first, bytes) else repr(first)))

    def plan():
        invocation = Invocation(["true"], os.getcwd(), dict(os.environ))
        request, _note = request_for(invocation)
        return BwrapPlanner().build(request)

    plan()  # once unrecorded: every module planning loads is loaded now
    before = set(sys.modules)
    sys.addaudithook(hook)
    recorder = plan_cache.Recorder().start()
    recording = True
    plan()
    if os.environ.get("PLANT"):  # the control: a reader the recorder does not wrap
        import _io
        _io.FileIO(os.environ["PLANT"]).close()
    recording = False
    recorder.stop()
    planning = sorted(name for name in sys.modules if name.startswith("stockade."))
    print(json.dumps({"seen": seen, "paths": sorted(recorder.paths), "listed": sorted(recorder.listed),
                      "modules": planning, "late": sorted(set(sys.modules) - before)}))
    """
)


@pytest.fixture(scope="module")
def layouts() -> Path:
    """A home and a project with the layouts planning looks into."""
    root = visible_root("reads")
    home, project = root / "home", root / "home" / "project"
    project.mkdir(parents=True)
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_test").write_text("key\n")
    (home / "shared").mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = t\n[include]\n\tpath = ~/.gitconfig.extra\n")
    (home / ".gitconfig.extra").write_text("[core]\n\tautocrlf = false\n")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}
    git = lambda *words, cwd=project: subprocess.run(["git", *words], cwd=cwd, env=env, check=True, capture_output=True)  # noqa: E731
    git("init", "-q", "-b", "main")
    (project / "a.txt").write_text("a\n")
    git("add", "-A")
    git("-c", "user.email=t@t", "commit", "-qm", "one")
    git("worktree", "add", "-q", str(root / "wt"), "-b", "side")
    sub = root / "subrepo"
    sub.mkdir()
    git("init", "-q", "-b", "main", cwd=sub)
    (sub / "s.txt").write_text("s\n")
    git("add", "-A", cwd=sub)
    git("-c", "user.email=t@t", "commit", "-qm", "s", cwd=sub)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "mod")
    (home / "dotfiles" / "claude").mkdir(parents=True)
    (project / ".claude").symlink_to(home / "dotfiles" / "claude")
    (project / "deep" / "er").mkdir(parents=True)
    (project / "deep" / "er" / ".env").write_text("x\n")
    (project / ".stockade.toml").write_text(
        '[filesystem]\nallow_write = [".", "~/shared"]\ndeny_read = ["**/secret.txt"]\ndeny_write = ["link/x.json"]\n'
        '[network]\nallow = ["pypi.org"]\n'
    )
    (project / "link").symlink_to("deep")
    yield root
    force_rmtree(root)


def _plan(root: Path, **extra: str) -> dict[str, list]:
    home = root / "home"
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(sys.path), **extra}
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=home / "project", env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# Read on purpose behind the recorder, each with its own check on every stored plan's use.
CHECKED_ELSEWHERE = {
    "/proc/net/unix": "host_sockets.py: the host's sockets are listed again and compared whole (plan_cache.load)",
}


def _unrecorded(report: dict[str, list], cwd: Path) -> list[tuple[str, str]]:
    code = tuple(os.path.realpath(p) + "/" for p in sys.path if p and os.path.isdir(p))
    paths, listed = set(report["paths"]), set(report["listed"])
    missing = []
    for event, what in report["seen"]:
        if event in ("open", "os.listdir", "os.scandir"):
            if isinstance(what, int) or what is None:
                continue  # an fd opened by path: that open was seen
            path = os.path.normpath(os.path.join(cwd, what))
            if path.endswith((".py", ".pyc", ".so")) and os.path.realpath(path).startswith(code):
                continue  # an import (stockade's own code is stamped whole: plan_cache._own_code)
            if path in (listed if event != "open" else paths) or path in CHECKED_ELSEWHERE:
                continue
        missing.append((event, what))
    return missing


def test_planning_reads_only_through_the_recorder(layouts: Path) -> None:
    report = _plan(layouts)
    assert len(report["paths"]) > 50 and report["listed"], report  # it did plan, and look
    assert report["late"] == [], report["late"]  # no module was first loaded by the recorded run
    assert _unrecorded(report, layouts / "home" / "project") == []


def test_a_reader_the_recorder_does_not_wrap_is_caught(layouts: Path) -> None:
    planted = layouts / "home" / "planted.txt"
    planted.write_text("read behind the recorder's back\n")
    missing = _unrecorded(_plan(layouts, PLANT=str(planted)), layouts / "home" / "project")
    assert missing == [("open", str(planted))]


# Path-based os readers the recorder does not wrap (it wraps stat, lstat, access, readlink, open,
# scandir, listdir, and builtins/io.open) and audit hooks do not see. fd-based calls (fstat) are
# fine: the open that made the fd was recorded.
UNRECORDED_READERS = frozenset({"statvfs", "getxattr", "listxattr", "pathconf", "fwalk", "chdir", "fchdir"})
# Each a deliberate read behind the recorder, with its own check (CHECKED_ELSEWHERE).
BEHIND_THE_RECORDER = {
    "stockade.bwrap.parts.host_sockets": "reads /proc/net/unix and lstats sockets through saved originals",
    "stockade.bwrap.plan.plan_cache": "the recorder itself: its stamps are not planning's reads",
}


def test_planning_modules_call_no_unrecorded_reader(layouts: Path) -> None:
    """A module that needs another reader must record the path itself, and be listed above."""
    found = []
    for name in _plan(layouts)["modules"]:
        module_file = Path(__import__(name, fromlist=["_"]).__file__ or "")
        if module_file.suffix != ".py" or name in BEHIND_THE_RECORDER:
            continue
        for node in ast.walk(ast.parse(module_file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
                if node.attr in UNRECORDED_READERS:
                    found.append(f"{name}:{node.lineno} os.{node.attr}")
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):  # `_open = os.open`: a saved original
                saved = [e for e in node.value.elts if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "os"]
                found += [f"{name}:{node.lineno} keeps os.{e.attr} unwrapped" for e in saved]
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name):
                if node.value.value.id == "os" and node.value.attr in ("open", "stat", "lstat", "scandir", "listdir", "readlink", "access"):
                    found.append(f"{name}:{node.lineno} keeps os.{node.value.attr} unwrapped")
    assert found == [], found
