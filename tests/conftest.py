"""Shared fixtures: every test gets its own HOME and XDG folders, never the real ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.core.locations import Locations, locate

# Folders whose tests run stockade whole against real tools, agents and projects (seconds each):
# marked e2e, so `pytest -m "not e2e"` is the quick run of the unit tests that mirror the code.
E2E_FOLDERS = ("e2e", "work", "agents", "projects", "macos", "terminal", "day")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        parts = Path(str(item.path)).relative_to(tests).parts
        if parts and parts[0] in E2E_FOLDERS:
            item.add_marker(pytest.mark.e2e)


_STARTED = pytest.StashKey[tuple[float, str, tuple[str, ...]]]()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    return folder


@pytest.fixture
def locations(home: Path) -> Locations:
    return locate()


@pytest.fixture
def project(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


# -- the suite leaves no proxy daemon behind ---------------------------------------------------
#
# Every test that starts a daemon gives it a HOME of its own; a daemon exits within five
# seconds of that HOME's removal and on its idle timer otherwise. At the end of the session,
# any daemon of this user that the session started (not the user's own, nor another user's)
# and that is still alive after a grace period fails the run.

LEFTOVER_GRACE = 15.0  # seconds: a daemon checks its control socket every five


def _session_daemons(since: float, own_state: str, roots: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """(pid, state folder) of this user's daemons started at or after `since` with their state
    under one of the suite's own folders (`roots`): not the user's, nor another program's."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "uids", "cmdline", "create_time"]):
        info = process.info
        words = info.get("cmdline") or []
        if "stockade.proxy.daemon" not in words or not info.get("uids") or info["uids"].real != os.getuid():
            continue
        state = words[words.index("--state-dir") + 1] if "--state-dir" in words[:-1] else ""
        if (
            (info.get("create_time") or 0) >= since
            and state != own_state
            and any(state == root or state.startswith(root.rstrip("/") + "/") for root in roots)
        ):
            found.append((info["pid"], state))
    return found


def _default_signals() -> None:
    """The suite's commands start with the terminal's signals at their default, whatever the runner
    ignored (a step run in the background ignores SIGINT and SIGQUIT, nohup SIGHUP): the signal
    tests compare stockade with the bare command, and both would inherit an ignored signal."""
    import signal

    for number in (signal.SIGHUP, signal.SIGQUIT):
        if signal.getsignal(number) == signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    import time

    _default_signals()

    from tests.visible import VISIBLE_BASE

    basetemp = str(session.config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    roots = (basetemp, str(VISIBLE_BASE), str(Path(__file__).resolve().parent))
    session.config.stash[_STARTED] = (time.time() - 1, str(locate().state), roots)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import time

    started = session.config.stash.get(_STARTED, None)
    if started is None or os.environ.get("STOCKADE_KEEP_DAEMONS") == "1":
        return
    deadline = time.monotonic() + LEFTOVER_GRACE
    left = _session_daemons(*started)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _session_daemons(*started)
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"proxy daemon pid {pid} (state folder {state}) outlived the test session" for pid, state in left]
    if reporter is not None:
        reporter.write("\n")
        for line in lines:
            reporter.write_line(f"LEFTOVER: {line}", red=True)
    for pid, _state in left:  # leave the machine clean all the same
        try:
            os.kill(pid, 15)
        except OSError:
            pass
    if session.exitstatus == 0:
        session.exitstatus = 1
