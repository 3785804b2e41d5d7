"""Every command under every broken environment: an exit code from the contract and one line,
never a traceback (issue: everyday work, item 6).

Each case is a real subprocess of the installed stockade. `run` must either run the
command (where stockade can still do so safely) or exit 125 with one `stockade: error:`
line; the other commands exit 0, 1 (doctor: something to fix) or 2, in one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.visible import force_rmtree, visible_root

IS_ROOT = os.geteuid() == 0
# the console script, as users run it (`python -m` cannot even start in a deleted working directory)
SCRIPT = Path(sys.executable).with_name("stockade")
STOCKADE = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "stockade.cli.main"]
BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
HOOK_PAYLOAD = b'{"tool_name": "Bash", "tool_input": {"command": "echo hi"}}'
COMMANDS: dict[str, list[str]] = {
    "run": ["run", "--", "/bin/echo", "ran"],
    "check": ["check"],
    "explain": ["explain"],
    "hook": ["hook", "claude"],
    "audit": ["audit"],
    "doctor": ["doctor"],
}
ALLOWED = {"run": {0, 125}, "check": {0, 2}, "explain": {0, 2}, "hook": {0, 2}, "audit": {0, 2}, "doctor": {0, 1, 2, 125}}


@dataclass
class World:
    root: Path
    home: Path
    project: Path
    env: dict[str, str]
    cwd: Path
    prefix: list[str] = field(default_factory=list)  # an outer sandbox, when the case needs one

    def stockade(self, words: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        argv = [*self.prefix, *STOCKADE, *words]
        return subprocess.run(argv, cwd=self.cwd, env=self.env, input=stdin, capture_output=True, timeout=120)


@pytest.fixture
def world() -> Iterator[World]:
    root = visible_root("f")
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    env = {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    if not SCRIPT.exists():
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
    try:
        yield World(root, home, project, env, project)
    finally:
        subprocess.run(["umount", "-l", str(home / "state")], capture_output=True) if IS_ROOT else None
        force_rmtree(root)


def _read_only_home(w: World) -> str | None:
    w.prefix = [BWRAP, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--ro-bind", str(w.home), str(w.home), "--"]
    return None


def _read_only_home_with_state(w: World) -> str | None:
    prepared = w.stockade(["run", "--", "/bin/true"])  # state, cache and config folders exist
    assert prepared.returncode == 0, prepared
    return _read_only_home(w)


def _no_user_namespaces(w: World) -> str | None:
    w.prefix = [BWRAP, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-user", "--disable-userns", "--"]
    return None


def _bwrap_missing(w: World) -> str | None:
    w.prefix = [BWRAP, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"):
        if os.path.exists(path):
            w.prefix += ["--ro-bind", "/dev/null", path]
    w.prefix.append("--")
    return None


def _missing_home(w: World) -> str | None:
    del w.env["HOME"]
    return None


def _deleted_cwd(w: World) -> str | None:
    gone = w.root / "gone"
    gone.mkdir()
    w.cwd = gone
    w.prefix = ["/bin/sh", "-c", f'cd {gone} && rmdir {gone} && exec "$@"', "sh"]
    return None


def _unreadable_cwd(w: World) -> str | None:
    if IS_ROOT:
        return "root reads any folder it owns; the other-user case is in tests/e2e/test_shared_machine.py"
    w.cwd = w.root
    w.prefix = ["/bin/sh", "-c", f'cd {w.project} && chmod 000 {w.project} && exec "$@"', "sh"]
    return None


def _corrupt_caches(w: World) -> str | None:
    prepared = w.stockade(["run", "--", "/bin/true"])
    assert prepared.returncode == 0, prepared
    cache = w.home / ".cache" / "stockade"
    corrupted = 0
    for folder, _dirs, files in os.walk(cache):
        for name in files:
            (Path(folder) / name).chmod(0o600)
            (Path(folder) / name).write_bytes(b"\x00garbage\xff" * 7)
            corrupted += 1
    assert corrupted, "no cache files to corrupt"
    return None


def _full_state_disk(w: World) -> str | None:
    if not IS_ROOT:
        return "needs root to mount a small tmpfs"
    state = w.home / "state"
    state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)], check=True)
    filler = state / "filler"
    with open(filler, "wb") as handle:
        try:
            handle.write(b"\0" * (1 << 20))
        except OSError:
            pass
    w.env.update(XDG_STATE_HOME=str(state), XDG_CACHE_HOME=str(state / "cache"))
    return None


CASES: dict[str, Callable[[World], str | None]] = {
    "read-only-home": _read_only_home,
    "read-only-home-with-state": _read_only_home_with_state,
    "no-user-namespaces": _no_user_namespaces,
    "bwrap-missing": _bwrap_missing,
    "missing-home": _missing_home,
    "deleted-cwd": _deleted_cwd,
    "unreadable-cwd": _unreadable_cwd,
    "corrupt-caches": _corrupt_caches,
    "full-state-disk": _full_state_disk,
}
# where `run` can still sandbox the command safely, it must
RUN_WORKS = {"missing-home", "corrupt-caches"}


@pytest.mark.sandbox
@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_no_traceback_one_line_and_a_contract_code(world: World, case: str, command: str) -> None:
    skip = CASES[case](world)
    if skip:
        pytest.skip(skip)
    result = world.stockade(COMMANDS[command], HOOK_PAYLOAD if command == "hook" else b"")
    out = result.stdout.decode("utf-8", "replace") + result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in out, out
    assert result.returncode in ALLOWED[command], (result.returncode, out)
    errors = [line for line in result.stderr.decode("utf-8", "replace").splitlines() if line.startswith("stockade: error:")]
    assert len(errors) <= 1, out
    if command == "run":
        if case in RUN_WORKS:
            assert result.returncode == 0 and b"ran" in result.stdout, out
        elif result.returncode == 125:
            assert len(errors) == 1, out
        else:
            assert b"ran" in result.stdout, out
    if command == "hook":
        assert result.returncode == 0 or b"blocked" in result.stderr, out


# -- the signal matrix: a signal at any moment of a run -----------------------------------------
#
# Early (while stockade plans), during the command, and for a networked run: whichever moment
# it lands on, stockade ends by that signal (a parent sees -N, as for the bare command), with
# no traceback and no error line, and nothing it started is left running.

SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"]
MOMENTS = [0.0, 0.03, 0.08, 0.15, 0.4]


@pytest.mark.sandbox
@pytest.mark.parametrize("network", [False, True], ids=["offline", "networked"])
@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("name", SIGNALS)
def test_a_signal_at_any_moment_ends_the_run_by_it(world: World, name: str, moment: float, network: bool) -> None:
    import signal
    import time

    number = int(getattr(signal, name))
    if network:
        (world.project / ".stockade.toml").write_text('[network]\nallow = ["pypi.org"]\n')
        trusted = world.stockade(["trust", str(world.project / ".stockade.toml")])
        assert trusted.returncode == 0, trusted
    tag = f"{number}{MOMENTS.index(moment)}{int(network)}{os.getpid() % 1000}"
    argv = [*STOCKADE, "run", "--", "/bin/sh", "-c", f"exec sleep 5.{tag}"]
    proc = subprocess.Popen(argv, cwd=world.cwd, env=world.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(moment)
    proc.send_signal(number)
    _out, err = proc.communicate(timeout=60)
    said = err.decode("utf-8", "replace")
    assert proc.returncode == -number, (proc.returncode, said)
    assert "Traceback" not in said and "stockade: error" not in said, said
    deadline = time.monotonic() + 5
    while subprocess.run(["pgrep", "-f", f"sleep 5.{tag}"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the sandbox outlived stockade"
        time.sleep(0.05)
