"""The macOS run: no proxy session without network, one opened and always closed otherwise, its news reported."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from stockade.core.errors import SandboxSetupError
from stockade.core.invocation import Invocation, RunResult
from stockade.profiles.credentials import Credential
from stockade.profiles.model import NetworkMode
from stockade.proxy.client import api
from stockade.seatbelt import run


class FakePlanner:
    made: list[FakePlanner] = []
    status = 0
    fail: Exception | None = None

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.built: list[Any] = []
        self.findings: dict[str, object] = {}
        FakePlanner.made.append(self)

    def build(self, request: Any) -> str:
        self.built.append(request)
        return "plan"

    def run(self, plan: str) -> int:
        assert plan == "plan"
        if FakePlanner.fail is not None:
            raise FakePlanner.fail
        self.findings = {"files": [{"path": "/Users/u/.ssh/k", "operation": "read"}], "limits": []}
        return FakePlanner.status

    def explain(self, plan: str) -> str:
        return f"explained {plan}"


def request(mode: NetworkMode, quiet: bool = False, credentials: tuple[Credential, ...] = (), checkpoints: bool = False) -> Any:
    policy = SimpleNamespace(
        network=SimpleNamespace(mode=mode), origin="policy.toml", credentials=credentials, project_dir="/p",
        checkpoints=SimpleNamespace(enabled=checkpoints, stage=False, max_size=1 << 30, max_age=3600.0),
        filesystem=SimpleNamespace(allow_write=("/p",)), devices=SimpleNamespace(gpu=False, gpus=()),
        containers=SimpleNamespace(engine="none"),
    )  # fmt: skip
    return SimpleNamespace(policy=policy, locations="where", command=("curl", "x"), cwd="/p", quiet=quiet, host_env={"HOST_T": "v4lue"})


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    state = SimpleNamespace(
        request=request(NetworkMode.ALLOWLIST),
        opened=[],
        closed=[],
        said=[],
        ended=SimpleNamespace(always=[], trouble="", denials=[], refused="", exported=""),
    )
    FakePlanner.made, FakePlanner.status, FakePlanner.fail = [], 0, None
    monkeypatch.setattr(run, "SeatbeltPlanner", FakePlanner)
    monkeypatch.setattr(run, "request_for", lambda inv: (state.request, None))
    monkeypatch.setattr(run, "say", state.said.append)

    def open_session(
        locations: Any, session: str, command: list[str], cwd: str, policy: Any, credentials: Any = None, approve: int = 0, who: Any = ("", "")
    ) -> Any:
        state.opened.append((locations, session, command, cwd, policy))
        state.approve = approve
        state.credentials = credentials
        return SimpleNamespace(port=4321, token="tok")

    def close_session(locations: Any, session: str) -> Any:
        state.closed.append((locations, session))
        return state.ended

    monkeypatch.setattr(api, "open_session", open_session)
    monkeypatch.setattr(api, "close_session", close_session)
    monkeypatch.setattr(api, "describe_denial", lambda denial, origin: f"denied {denial} ({origin})")
    return state


def invocation() -> Invocation:
    return Invocation(["curl", "x"], "/p", {}, session_id="abc123abc123")


@pytest.mark.parametrize("status", [0, 1, 126])
def test_network_none_opens_no_session(world: SimpleNamespace, status: int) -> None:
    world.request = request(NetworkMode.NONE)
    FakePlanner.status = status
    assert run.MacOSBackend().run(invocation()).status == status
    assert world.opened == [] and world.closed == []
    assert FakePlanner.made[0].kwargs == {}


@pytest.mark.parametrize("mode", [NetworkMode.ALLOWLIST, NetworkMode.OPEN])
def test_a_session_is_opened_handed_to_the_planner_and_closed(world: SimpleNamespace, mode: NetworkMode) -> None:
    world.request = request(mode)
    FakePlanner.status = 7
    result = run.MacOSBackend().run(invocation())
    assert result.status == 7
    assert world.opened == [("where", "abc123abc123", ["curl", "x"], "/p", world.request.policy)]
    assert FakePlanner.made[0].kwargs == {"proxy_port": 4321, "session_id": "abc123abc123", "proxy_token": "tok", "placeholders": {}}
    assert world.closed == [("where", "abc123abc123")]
    assert result.troubles == [] and world.said == []


def test_credentials_are_read_for_the_daemon_and_the_sandbox_gets_placeholders(world: SimpleNamespace) -> None:
    world.request = request(NetworkMode.ALLOWLIST, credentials=(Credential("T", "env", ("HOST_T",), ("api.test",)),))
    run.MacOSBackend().run(invocation())
    (read,) = world.credentials
    assert read.value == "v4lue" and read.hosts == ["api.test"]
    assert FakePlanner.made[0].kwargs["placeholders"] == {"T": read.placeholder} and "v4lue" not in read.placeholder


def test_trouble_denials_and_refusal_are_reported(world: SimpleNamespace) -> None:
    world.ended = SimpleNamespace(always=[], trouble="daemon hiccup", denials=["evil.com"], refused="too many sessions", exported="")
    assert run.MacOSBackend().run(invocation()).troubles == ["daemon hiccup"]
    assert world.said == [
        "stockade: denied evil.com (policy.toml)",
        "stockade: too many sessions",
        "stockade: daemon hiccup",
    ]


def test_quiet_keeps_the_trouble_but_says_nothing(world: SimpleNamespace) -> None:
    world.request = request(NetworkMode.ALLOWLIST, quiet=True)
    world.ended = SimpleNamespace(always=[], trouble="daemon hiccup", denials=["evil.com"], refused="no", exported="")
    assert run.MacOSBackend().run(invocation()).troubles == ["daemon hiccup"] and world.said == []


def test_the_session_is_closed_even_when_the_planner_raises(world: SimpleNamespace) -> None:
    FakePlanner.fail = SandboxSetupError("sandbox-exec missing")
    world.ended = SimpleNamespace(always=[], trouble="late", denials=[], refused="", exported="")
    with pytest.raises(SandboxSetupError, match="sandbox-exec missing") as raised:
        run.MacOSBackend().run(invocation())
    assert world.closed == [("where", "abc123abc123")]
    partial = raised.value.partial  # what a CI report of the failed run reads
    assert isinstance(partial, RunResult) and partial.troubles == ["late"] and partial.policy is world.request.policy


def test_explain_builds_a_plain_plan(world: SimpleNamespace) -> None:
    assert run.MacOSBackend().explain(invocation()) == "explained plan"
    assert FakePlanner.made[0].kwargs == {} and world.opened == []


@pytest.mark.parametrize("mode", [NetworkMode.NONE, NetworkMode.ALLOWLIST])
def test_the_refusals_are_handed_over_when_asked_for(world: SimpleNamespace, mode: NetworkMode) -> None:
    world.request = request(mode)
    world.ended = SimpleNamespace(
        always=[], trouble="", denials=[{"host": "x.test", "port": 443, "hint": 'allow = ["x.test"]'}], refused="", exported=""
    )
    asked = Invocation(["curl", "x"], "/p", {}, session_id="abc123abc123", want_findings=True)
    result = run.MacOSBackend().run(asked)
    assert result.status == 0
    assert result.findings is not None and result.findings["files"] == [{"path": "/Users/u/.ssh/k", "operation": "read"}]
    assert result.findings["network"] == ([] if mode is NetworkMode.NONE else world.ended.denials)
    assert run.MacOSBackend().run(invocation()).findings is None  # not asked: nothing kept


def test_the_runs_approve_goes_to_its_session(world: SimpleNamespace) -> None:
    asked = Invocation(["curl", "x"], "/p", {}, session_id="abc123abc123", approve=30)
    run.MacOSBackend().run(asked)
    assert world.approve == 30
    run.MacOSBackend().run(invocation())
    assert world.approve == 0


class FakeCloned:
    made: list[FakeCloned] = []

    def __init__(self, state: str, project: str, max_size: int, meta: dict[str, object]) -> None:
        self.project, self.meta, self.finished = project, meta, None
        FakeCloned.made.append(self)

    def take(self) -> str | None:
        return None

    def finish(self, status: int) -> dict[str, object]:
        self.finished = status
        return {"number": 3, "counts": {"removed": 2}}


@pytest.mark.parametrize("mode", [NetworkMode.NONE, NetworkMode.ALLOWLIST])
def test_each_run_is_checkpointed_by_a_clone_and_its_removals_named(
    world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, mode: NetworkMode
) -> None:
    from stockade.checkpoints import clone, history

    FakeCloned.made = []
    monkeypatch.setattr(clone, "Cloned", FakeCloned)
    monkeypatch.setattr(history, "prune", lambda *args, **kwargs: None)
    world.request = request(mode, checkpoints=True)
    world.request.locations = SimpleNamespace(state="/state")
    FakePlanner.status = 4
    assert run.MacOSBackend().run(invocation()).status == 4
    (cloned,) = FakeCloned.made
    assert cloned.finished == 4 and cloned.meta["command"] == ["curl", "x"]
    assert any("this run removed 2 paths; `stockade undo`" in line for line in world.said), world.said


def test_stage_is_refused_on_macos_with_a_line_saying_why(world: SimpleNamespace) -> None:
    from stockade.core.errors import UsageError

    staged = Invocation(["true"], "/p", {}, session_id="abc123abc123", stage=True)
    with pytest.raises(UsageError, match="--stage is not built on macOS yet"):
        run.MacOSBackend().run(staged)
    assert FakePlanner.made == []
