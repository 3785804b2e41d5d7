"""A networked run's start, through real runs and real daemons: cold, warm, and with daemons that fail.

The command starts before the daemon has answered (proxy/client/handover.py): its
connections wait in the sandbox's listener until the daemon accepts. So each
test checks both halves: what must still be served is served, and what the
daemon refuses is never served and stops the run with 125.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.netfixtures import NetWorld, one, pid_alive, runtime_dir, wait_for

pytestmark = pytest.mark.e2e

CURL = 'curl -s -o /dev/null -w "code=%{http_code}\\n" -x "$PX" "http://allowed.test:$HP/start-probe"'


@pytest.fixture(scope="module")
def world(net_world: NetWorld) -> NetWorld:
    return net_world


def daemons_of(box: Box) -> list[int]:
    """Live daemon processes serving this box's runtime folder."""
    marker = str(runtime_dir(box)).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path("/proc", name, "cmdline").read_bytes()
        except OSError:
            continue
        if b"stockade.proxy.daemon" in cmdline and marker in cmdline:
            found.append(int(name))
    return found


def test_a_command_run_with_a_cold_daemon_is_served_once_the_daemon_is_up(world: NetWorld) -> None:
    box = world.fresh_box()
    assert daemons_of(box) == []
    result = world.run(CURL, tag="cold", box=box)
    assert result.returncode == 0 and one(result, "code") == "200", result
    assert [(r["path"], r["decision"]) for r in world.records("cold", 2, box=box)][:1] == [("/start-probe", "allow")]
    denied = world.run('curl -s -o /dev/null -w "code=%{http_code}\\n" -x "$PX" "http://denied.test:$DP/x"', tag="cold", box=box)
    assert one(denied, "code") == "403", denied  # and the warm daemon it left still judges


def test_concurrent_cold_runs_start_one_daemon_and_are_all_served(world: NetWorld) -> None:
    box = world.fresh_box()
    runs = [world.popen(CURL, tag=f"many{i}", box=box) for i in range(4)]
    results = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0, 0], results
    assert all("code=200" in out for out, _err in results), results
    assert wait_for(lambda: len(daemons_of(box)) == 1, 10), daemons_of(box)


def test_a_daemon_that_cannot_start_fails_the_run_that_needs_it_and_no_other(world: NetWorld) -> None:
    box = world.fresh_box()
    broken = {"STOCKADE_PROXY_TEST_RESOLVER": str(box.root / "no-such-table.json")}  # the daemon refuses its options and exits
    quiet = world.run("true", tag="broken", box=box, env=broken)
    assert quiet.returncode == 0, quiet  # nothing was asked of the network: nothing waited, nothing failed
    needy = world.run(CURL, tag="broken", box=box, env=broken)
    assert needy.returncode == 125, needy
    assert "the proxy daemon did not start" in needy.stderr and "no-such-table.json" in needy.stderr, needy.stderr
    assert "code=200" not in needy.stdout
    assert daemons_of(box) == []
    fixed = world.run(CURL, tag="broken", box=box)
    assert fixed.returncode == 0 and one(fixed, "code") == "200", fixed


def test_a_refused_session_stops_the_sandbox_and_serves_nothing(world: NetWorld) -> None:
    box = world.fresh_box()
    blocked = box.root / "logs" / "audit-is-a-folder.jsonl"  # a folder of its own (mounts._audit_folder)
    blocked.mkdir(parents=True)  # the daemon cannot open it as its log
    policy = world.policy("refused", box=box).replace(json.dumps(str(world.audit_path("refused", box))), json.dumps(str(blocked)))
    mark = world.origins["http"].mark()
    for attempt in ("cold", "warm"):
        result = world.run(CURL, tag="refused", policy=policy, box=box)
        assert result.returncode == 125, (attempt, result)
        assert "refused the session" in result.stderr and "the sandbox was stopped" in result.stderr, (attempt, result.stderr)
        assert "code=200" not in result.stdout, attempt
    seen, _ = world.origins["http"].since(mark)
    assert not any(s.path == "/start-probe" for s in seen)
    control = world.run(CURL, tag="refused", box=box)  # the same daemon, a policy whose log can be written
    assert control.returncode == 0 and one(control, "code") == "200", control


CLOSE = b"close"


class FakeDaemon:
    """Something else on a box's control socket: an older stockade's daemon, or a hung one."""

    def __init__(self, path: Path, answer: bytes | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(16)
        self.answer = answer  # None: accept, read, never answer; CLOSE: accept and close at once (an idle exit)
        self.requests: list[bytes] = []
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            if self.answer == CLOSE:
                conn.close()
                self.requests.append(b"")
                continue
            self.held.append(conn)
            try:
                data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 4)
            except OSError:
                continue
            for fd in fds:
                os.close(fd)
            self.requests.append(data)
            if self.answer is not None:
                conn.sendall(self.answer)

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def fake_daemon(world: NetWorld) -> Iterator[tuple[Box, list[FakeDaemon]]]:
    box = world.fresh_box()
    made: list[FakeDaemon] = []
    yield box, made
    for fake in made:
        fake.close()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(b'{"ok": false, "error": "unknown op \'open\'"}\n', id="an older stockade's daemon"),
        pytest.param(b'{"ok": false, "error": "the proxy daemon is exiting", "retry": true}\n', id="an exiting daemon"),
        pytest.param(None, id="a hung daemon"),
    ],
)
def test_a_daemon_that_cannot_take_the_session_is_replaced(world: NetWorld, fake_daemon: tuple[Box, list[FakeDaemon]], answer: bytes | None) -> None:
    box, made = fake_daemon
    fake = FakeDaemon(runtime_dir(box) / "proxy.sock", answer)
    made.append(fake)
    result = world.run(CURL, tag="replaced", box=box)
    assert result.returncode == 0 and one(result, "code") == "200", result
    assert b'"op":"open"' in fake.requests[0]  # it was asked once (a hung one was pinged too), then replaced
    assert [request for request in fake.requests[1:] if b'"op":"ping"' not in request] == []
    info = world.daemon_info(box)
    assert info is not None and pid_alive(info["pid"]), info
    assert [(r["path"], r["decision"]) for r in world.records("replaced", 1, box=box)][:1] == [("/start-probe", "allow")]


# -- hostile review 8 ----------------------------------------------------------------


def test_a_cold_refused_session_with_a_waiting_connection_ends_at_once(world: NetWorld) -> None:
    """The refusal stops the sandbox; its end must not then wait for a second answer (it waited
    the whole start timeout, 30 s) nor hand the stopped sandbox's listener to another daemon."""
    import time

    box = world.fresh_box()
    blocked = box.root / "logs" / "audit-is-a-folder.jsonl"  # a folder of its own (mounts._audit_folder)
    blocked.mkdir(parents=True)
    policy = world.policy("refused8", box=box).replace(json.dumps(str(world.audit_path("refused8", box))), json.dumps(str(blocked)))
    started = time.monotonic()
    result = world.run(CURL, tag="refused8", policy=policy, box=box)  # curl connects while the daemon still starts
    took = time.monotonic() - started
    assert result.returncode == 125 and "refused the session" in result.stderr, result
    assert "code=200" not in result.stdout
    assert took < 10, took
    assert wait_for(lambda: len(daemons_of(box)) == 1, 5), daemons_of(box)  # the one it started, no replacement
    control = world.run(CURL, tag="refused8", box=box)  # a policy whose log can be written: served, and quickly
    assert control.returncode == 0 and one(control, "code") == "200", control


def test_a_daemon_that_closes_the_connection_before_the_session_is_sent_is_replaced(
    world: NetWorld, fake_daemon: tuple[Box, list[FakeDaemon]]
) -> None:
    """A daemon exiting on idle as a run reaches it: the run's send fails; a new daemon is started, not 125."""
    box, made = fake_daemon
    fake = FakeDaemon(runtime_dir(box) / "proxy.sock", CLOSE)
    made.append(fake)
    result = world.run(CURL, tag="closed", box=box)
    assert result.returncode == 0 and one(result, "code") == "200", result
    assert fake.requests[:1] == [b""]  # it was reached first
    denied = world.run('curl -s -o /dev/null -w "code=%{http_code}\\n" -x "$PX" "http://denied.test:$DP/x"', tag="closed", box=box)
    assert one(denied, "code") == "403", denied  # the new daemon still filters


def test_a_daemon_stuck_in_its_start_does_not_hold_the_start_lock_for_ever(world: NetWorld) -> None:
    """The starting daemon holds the start lock until it serves. One that never gets there (here
    its test resolver is a FIFO nobody writes; in life a stalled disk) must not keep every later
    run of its user waiting for that lock and failing with 125."""
    import signal
    import time

    box = world.fresh_box()
    fifo = box.root / "resolver.fifo"
    os.mkfifo(fifo)
    stuck = world.popen(CURL, tag="stuck", box=box, env={"STOCKADE_PROXY_TEST_RESOLVER": str(fifo)})
    try:
        assert wait_for(lambda: len(daemons_of(box)) == 1, 20), daemons_of(box)
        (stuck_daemon,) = daemons_of(box)
        stuck.kill()  # the run that started it is gone (killed, or gave up): the daemon is not
        stuck.wait(timeout=30)  # its exit, not its pipes' end: a sandbox it left a moment before bwrap armed
        for pipe in (stuck.stdout, stuck.stderr):  # --die-with-parent could hold them (and is not what this tests)
            if pipe is not None:
                pipe.close()
        started = time.monotonic()
        later = world.run(CURL, tag="later", box=box, timeout=120)
        assert later.returncode == 0 and one(later, "code") == "200", (time.monotonic() - started, later)
        assert wait_for(lambda: not pid_alive(stuck_daemon), 10)
        assert [(r["path"], r["decision"]) for r in world.records("later", 1, box=box)][:1] == [("/start-probe", "allow")]
    finally:
        for pid in daemons_of(box):
            os.kill(pid, signal.SIGKILL)


def test_the_daemons_own_socket_is_no_host_socket_to_a_plan(world: NetWorld) -> None:
    """The daemon's control socket lives in stockade's hidden state: no plan masks it, and a daemon coming
    up after a plan was made (the cold start a run no longer waits for) leaves that plan in use."""
    box = world.fresh_box()
    policy = box.root / "own-socket.toml"
    # The real home, read-only (as the agent profiles have it): the state folder is then hidden by the floor alone.
    policy.write_text(world.policy("own", box=box) + '[filesystem]\nhome = "host"\n')  # written once: a rewritten policy is a new input
    plans = box.home / ".cache" / "stockade" / "plans"
    first = box.run("true", options=["--policy", str(policy)], env=world.env)
    assert first.returncode == 0, first
    assert wait_for(lambda: world.daemon_pid(box) is not None, 30)  # its socket came after the plan was made
    stored = {path: path.stat().st_mtime_ns for path in plans.glob("*.plan")}
    assert stored
    second = box.run("true", options=["--policy", str(policy)], env=world.env)
    assert second.returncode == 0 and second.stderr == "", second
    assert {path: path.stat().st_mtime_ns for path in plans.glob("*.plan")} == stored, "the daemon's socket made the plan stale"
    dry = box.run("true", options=["--policy", str(policy), "--dry-run"], env=world.env)
    own = str(runtime_dir(box) / "proxy.sock")
    assert own not in dry.stdout, dry.stdout  # other boxes' daemons are host sockets to it, and are masked
