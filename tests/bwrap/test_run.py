"""The Linux backend's run: a stored plan or a fresh one, the bridge only with a network session, troubles recorded."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stockade.bwrap import run
from stockade.bwrap.after import journal
from stockade.bwrap.plan import plan_cache
from stockade.bwrap.running import execute as execute_module
from stockade.bwrap.running import network
from stockade.core import locations as locations_module
from stockade.core.invocation import Invocation, RunResult


class FakeBridge:
    made: list[FakeBridge] = []

    def __init__(self, session_id: str, rules: object, runtime: str, state: str, command: tuple[str, ...], cwd: str) -> None:
        self.args = (session_id, rules, runtime, state, command, cwd)
        self.trouble = ""
        self.credentials: list[Any] = []
        FakeBridge.made.append(self)


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str, Any]]:
    calls: list[tuple[Any, str, Any]] = []
    FakeBridge.made = []

    def fake_execute(
        launch: Any,
        session_id: str,
        bridge: Any,
        trace: bool = False,
        findings: Any = None,
        agent_session: Any = None,
        files: Any = (),
        who: Any = None,
        troubles: Any = None,
    ) -> int:
        calls.append((launch, session_id, bridge))
        return launch.status

    monkeypatch.setattr(execute_module, "execute", fake_execute)
    monkeypatch.setattr(network, "Bridge", FakeBridge)
    monkeypatch.setattr(locations_module, "runtime_folder", lambda env: "/located/run")
    monkeypatch.setattr(locations_module, "state_folder", lambda env: "/located/state")
    return calls


def launch(rules: object = None, status: int = 0) -> Any:
    return SimpleNamespace(session_rules=rules, command=["curl", "x"], cwd="/p", status=status, tool_files=[])


def invocation(**kwargs: Any) -> Invocation:
    return Invocation(["true"], "/p", {}, session_id="abc123abc123", **kwargs)


@pytest.mark.parametrize("status", [0, 1, 125, 127, 255])
def test_run_launch_passes_the_status_through_and_makes_no_bridge_without_rules(executed: list[tuple[Any, str, Any]], status: int) -> None:
    result = RunResult()
    assert run.run_launch(launch(status=status), invocation(), result, None) == status
    assert executed[0][1] == "abc123abc123" and executed[0][2] is None
    assert FakeBridge.made == [] and result.troubles == []


def test_a_network_session_gets_a_bridge_with_the_given_locations(executed: list[tuple[Any, str, Any]]) -> None:
    rules = {"allow": ["x.test"]}
    where = SimpleNamespace(runtime=Path("/r/stockade"), state=Path("/s/stockade"))
    assert run.run_launch(launch(rules, status=3), invocation(), RunResult(), where) == 3  # type: ignore[arg-type]
    (bridge,) = FakeBridge.made
    assert executed[0][2] is bridge
    assert bridge.args == ("abc123abc123", rules, "/r/stockade", "/s/stockade", ("curl", "x"), "/p")


def test_without_locations_the_bridge_takes_the_folders_as_strings(executed: list[tuple[Any, str, Any]]) -> None:
    run.run_launch(launch({}), invocation(), RunResult(), None)
    assert FakeBridge.made[0].args[2:4] == ("/located/run", "/located/state")


def test_a_runs_credentials_are_read_once_for_its_bridge(executed: list[tuple[Any, str, Any]]) -> None:
    from stockade.proxy.client.credentials import plan_entry

    rules = {"credentials": [plan_entry("T", "env", ("HOST_T",), ("api.test",), "Authorization", None, "/p/policy.toml")]}
    inv = invocation()
    inv.env = {"HOST_T": "s3cret"}
    run.run_launch(launch(rules), inv, RunResult(), None)
    (bridge,) = FakeBridge.made
    (credential,) = bridge.credentials
    assert credential.name == "T" and credential.value == "s3cret" and "s3cret" not in credential.placeholder


def test_the_bridges_trouble_is_in_the_runs_result(executed: list[tuple[Any, str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    def troubled_execute(
        launch: Any,
        session_id: str,
        bridge: Any,
        trace: bool = False,
        findings: Any = None,
        agent_session: Any = None,
        files: Any = (),
        who: Any = None,
        troubles: Any = None,
    ) -> int:
        bridge.trouble = "the daemon died"
        return 9

    monkeypatch.setattr(execute_module, "execute", troubled_execute)
    result = RunResult()
    assert run.run_launch(launch({}), invocation(), result, None) == 9
    assert result.troubles == ["the daemon died"]


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(run, "say", lines.append)
    monkeypatch.setattr(locations_module, "state_folder", lambda env: "/state")
    monkeypatch.setattr(journal, "finish_abandoned", lambda folder, suffix: [("/p/a", "/p/a.abandoned")])
    return lines


def test_a_stored_plan_runs_without_planning(said: list[str], executed: list[tuple[Any, str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    stored = launch(status=4)
    monkeypatch.setattr(plan_cache, "enabled", lambda inv: True)
    monkeypatch.setattr(plan_cache, "cached_launch", lambda inv: (stored, "stockade: plan reused"))

    def no_planning(*_args: object) -> int:
        raise AssertionError("planned although a stored plan was found")

    monkeypatch.setattr(run.LinuxBackend, "_plan_and_run", no_planning)
    assert run.LinuxBackend().run(invocation()).status == 4
    assert executed[0][0] is stored
    assert said[0].startswith("stockade: /p/a was created by an earlier run that was killed") and said[0].endswith("renamed to /p/a.abandoned")
    assert said[1:] == ["stockade: plan reused"]


def test_quiet_hides_the_stored_plans_note(said: list[str], executed: list[tuple[Any, str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_cache, "enabled", lambda inv: True)
    monkeypatch.setattr(plan_cache, "cached_launch", lambda inv: (launch(), "a note"))
    run.LinuxBackend().run(invocation(quiet=True))
    assert "a note" not in said


@pytest.mark.parametrize("enabled", [True, False])
def test_no_stored_plan_means_planning(said: list[str], monkeypatch: pytest.MonkeyPatch, enabled: bool) -> None:
    looked: list[bool] = []
    monkeypatch.setattr(plan_cache, "enabled", lambda inv: enabled)
    monkeypatch.setattr(plan_cache, "cached_launch", lambda inv: looked.append(True))
    planned: list[bool] = []

    def plan_and_run(self: run.LinuxBackend, inv: Invocation, result: RunResult, cacheable: bool) -> int:
        planned.append(cacheable)
        return 6

    monkeypatch.setattr(run.LinuxBackend, "_plan_and_run", plan_and_run)
    assert run.LinuxBackend().run(invocation()).status == 6
    assert planned == [enabled] and looked == ([True] if enabled else [])


def test_say_moved_says_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(run, "say", lines.append)
    run._say_moved([])
    assert lines == []
    run._say_moved([("/a", "/a.x"), ("/b", "/b.x")])
    assert len(lines) == 2 and "/b was created" in lines[1]


def test_the_backend_is_named_bwrap(tmp_path: Path) -> None:
    assert run.LinuxBackend.name == "bwrap"


def test_planning_records_stores_and_runs(executed: list[tuple[Any, str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.bwrap.plan import placeholders, planner
    from stockade.profiles import resolve

    events: list[object] = []

    class Recorder:
        def start(self) -> Recorder:
            events.append("start")
            return self

        def stop(self) -> None:
            events.append("stop")

    view = SimpleNamespace(walk="walk", socket_scope="scope", sockets=["s"], shared_files=["/p/f"])
    plan = SimpleNamespace(view=view, policy=SimpleNamespace(audit=SimpleNamespace(log="/l/a.jsonl")), quiet=True, ca_bundle=None, ssh_files=())
    request = SimpleNamespace(locations="locs", policy="the policy")
    planned = launch(status=11)
    monkeypatch.setattr(locations_module, "state_folder", lambda env: "/state")
    monkeypatch.setattr(placeholders, "clear_leftovers", lambda folder: events.append(("clear", folder)))
    monkeypatch.setattr(plan_cache, "Recorder", Recorder)
    monkeypatch.setattr(plan_cache, "run_key", lambda inv: "key")
    monkeypatch.setattr(plan_cache, "store", lambda *args: events.append(("store", args)))
    monkeypatch.setattr(resolve, "request_for", lambda inv: (events.append("plan"), (request, "note"))[1])
    monkeypatch.setattr(planner, "BwrapPlanner", lambda: SimpleNamespace(build=lambda req: plan))
    monkeypatch.setattr(planner, "launch_of", lambda p: planned)
    monkeypatch.setattr(planner, "make_own", lambda files, quiet: events.append(("own", files, quiet)))
    assert run.LinuxBackend()._plan_and_run(invocation(), RunResult(), True) == 11
    assert events[:4] == [("clear", "/state"), "start", "plan", "stop"]
    kind, stored = events[4]  # type: ignore[misc]
    assert kind == "store" and isinstance(stored[2], Recorder)
    assert stored[:2] == ("key", planned) and stored[3:5] == ("walk", "note")
    assert stored[5:] == (("/l/a.jsonl", "/l/a.jsonl.1", "/l/a.jsonl.2"), ("scope", ["s"]))
    assert events[5] == ("own", ["/p/f"], True)
    assert executed[0][0] is planned
    events.clear()
    assert run.LinuxBackend()._plan_and_run(invocation(), RunResult(), False) == 11
    assert events == [("clear", "/state"), "plan", ("own", ["/p/f"], True)]  # not cacheable: nothing recorded or stored


def test_the_files_a_plan_made_are_stamped_as_stockades_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning writes the CA bundle (proxy/client/cabundle.py) and ssh's files (proxy/client/sshroute.py): stamped by identity after planning, like the audit log,
    or the next run would see it as changed and plan again."""
    stored: list[tuple[str, ...]] = []
    monkeypatch.setattr(plan_cache, "store", lambda key, launch, recorder, walk, note, own, sockets: stored.append(own) or True)
    monkeypatch.setattr(plan_cache, "Recorder", lambda: SimpleNamespace(start=lambda: SimpleNamespace(stop=lambda: None)))
    view = SimpleNamespace(walk="walk", socket_scope="scope", sockets=["s"], shared_files=[])
    plan = SimpleNamespace(
        view=view,
        policy=SimpleNamespace(audit=SimpleNamespace(log=None)),
        quiet=True,
        ca_bundle="/c/ca/bundle-1.pem",
        ssh_files=("/c/ssh/ssh-proxy-1", "/c/ssh/ssh_config-1", "/c/ssh/known_hosts-1"),
    )
    from stockade.bwrap.plan import placeholders, planner
    from stockade.profiles import resolve

    monkeypatch.setattr(placeholders, "clear_leftovers", lambda state: None)
    monkeypatch.setattr(resolve, "request_for", lambda invocation: (SimpleNamespace(locations="locs", policy="the policy"), None))
    monkeypatch.setattr(planner, "BwrapPlanner", lambda: SimpleNamespace(build=lambda req: plan))
    monkeypatch.setattr(planner, "launch_of", lambda plan: launch())
    monkeypatch.setattr(run, "run_launch", lambda launch, invocation, result, locations, credentials=None: 0)
    monkeypatch.setattr(locations_module, "state_folder", lambda env: "/state")
    assert run.LinuxBackend()._plan_and_run(invocation(), RunResult(), True) == 0
    assert stored == [("/c/ca/bundle-1.pem", "/c/ssh/ssh-proxy-1", "/c/ssh/ssh_config-1", "/c/ssh/known_hosts-1")]


@pytest.mark.parametrize("error", [FileNotFoundError(2, "No such file or directory", "/p/lnk"), NotADirectoryError(20, "Not a directory", "/p/d")])
def test_a_path_that_vanished_while_the_run_was_planned_is_planned_again(said: list[str], monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    """A deny rule's path a host program removes between listing and reading it (tests/e2e/test_set_up_race.py's
    churn, under load): planned again, as a path made a link is; only what stays gone fails the run."""
    from stockade.bwrap.plan import planner as planner_module
    from stockade.profiles import resolve

    class Planned(Exception):
        pass

    calls: list[int] = []

    def build(self: object, request: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise error
        raise Planned

    monkeypatch.setattr(resolve, "request_for", lambda inv: (SimpleNamespace(policy=None, locations=None), None))
    monkeypatch.setattr(planner_module.BwrapPlanner, "build", build)
    monkeypatch.setattr(run, "clear_leftovers", lambda folder: None, raising=False)
    with pytest.raises(Planned):
        run.LinuxBackend()._plan_and_run(invocation(), RunResult(), False)
    assert len(calls) == 2
    monkeypatch.setattr(planner_module.BwrapPlanner, "build", lambda self, request: (_ for _ in ()).throw(error))
    with pytest.raises(type(error)):  # always gone: the run fails with it, after its tries
        run.LinuxBackend()._plan_and_run(invocation(), RunResult(), False)


def test_a_failure_after_the_policy_was_read_carries_the_result_so_far(said: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI report of a run that could not be set up still names the policy it read (RunResult via error.partial)."""
    from stockade.core.errors import SandboxSetupError

    monkeypatch.setattr(plan_cache, "enabled", lambda inv: False)

    def fails_after_reading(self: run.LinuxBackend, inv: Invocation, result: RunResult, cacheable: bool) -> int:
        result.policy_note = "read"
        raise SandboxSetupError("bwrap could not start")

    monkeypatch.setattr(run.LinuxBackend, "_plan_and_run", fails_after_reading)
    with pytest.raises(SandboxSetupError) as raised:
        run.LinuxBackend().run(invocation())
    partial = raised.value.partial
    assert isinstance(partial, RunResult) and partial.policy_note == "read"
