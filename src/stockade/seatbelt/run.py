"""The macOS `stockade run`, start to end: read the policy, open the proxy session, run, report.

The Seatbelt profile lets the sandbox reach only the daemon's loopback port,
and the session's credential travels in the proxy URL (Linux hands the
daemon a listener instead: bwrap/running/network.py).
"""

from __future__ import annotations

from stockade.core.errors import StockadeError, UsageError
from stockade.core.invocation import Invocation, RunResult
from stockade.profiles.model import NetworkMode
from stockade.profiles.resolve import request_for
from stockade.profiles.text import say
from stockade.seatbelt.planner import SeatbeltPlanner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from stockade.checkpoints.clone import Cloned
    from stockade.core.backend import RunRequest
    from stockade.core.locations import Locations
    from stockade.proxy.client.asking import Asker


class MacOSBackend:
    name = "seatbelt"

    def run(self, invocation: Invocation) -> RunResult:
        result = RunResult(invocation.want_findings)
        try:
            result.status = self._run(invocation, result)
        except StockadeError as error:
            error.partial = result
            raise
        return result

    def _run(self, invocation: Invocation, result: RunResult) -> int:
        request, note = request_for(invocation)
        result.policy, result.locations, result.policy_note = request.policy, request.locations, note or ""
        if invocation.stage:
            raise UsageError("--stage is not built on macOS yet: run without it (each run's checkpoint lets `stockade undo` take it back)")
        if request.policy.devices.gpu and not request.quiet:
            say("stockade: [devices] gpu is not built on macOS yet: the sandbox gets no device beyond the profile's")
        if request.policy.containers.engine != "none" and not request.quiet:
            say("stockade: [containers] is not built on macOS yet: the sandbox gets no engine socket (the engine's own stays unreachable)")
        if request.policy.network.mode is NetworkMode.NONE:
            offline = SeatbeltPlanner()
            try:
                return _checkpointed(request, lambda: offline.run(offline.build(request)))
            finally:
                _hand_over(offline, result, [])
        from stockade.proxy.client import api
        from stockade.proxy.client.credentials import read_all

        session, policy = invocation.session_id, request.policy
        credentials = read_all(policy.credentials, request.host_env)
        who = (invocation.agent_session or "", invocation.tool_call or "")
        ticket = api.open_session(request.locations, session, list(request.command), str(request.cwd), policy, credentials, invocation.approve, who)
        planner: SeatbeltPlanner | None = None
        asker = _asker(request.locations, session, invocation.approve)
        try:
            planner = SeatbeltPlanner(
                proxy_port=ticket.port, session_id=session, proxy_token=ticket.token,
                placeholders={credential.name: credential.placeholder for credential in credentials},
            )  # fmt: skip
            built = planner
            return _checkpointed(request, lambda: built.run(built.build(request)))
        finally:
            if asker is not None:
                asker.stop()
            ended = api.close_session(request.locations, session)
            _hand_over(planner, result, ended.denials)
            if ended.always:
                from stockade.proxy.client.asking import always

                for question in ended.always:
                    say(always(question, dict(request.host_env)))
            if ended.trouble:
                result.troubles.append(ended.trouble)
            if not request.quiet:
                for denial in ended.denials:
                    say(f"stockade: {api.describe_denial(denial, policy.origin)}")
                for line in (ended.refused, ended.trouble, ended.exported):
                    if line:
                        say(f"stockade: {line}")

    def explain(self, invocation: Invocation) -> str:
        request, _note = request_for(invocation)
        planner = SeatbeltPlanner()
        return planner.explain(planner.build(request))


def _checkpointed(request: RunRequest, run: Callable[[], int]) -> int:
    """The run, with the project cloned before it and its changes kept after it (checkpoints/clone.py),
    when the policy keeps checkpoints and the run may write the project."""
    import os

    policy = request.policy
    project = os.path.realpath(policy.project_dir)
    rules = policy.checkpoints
    writable = any(project == place or project.startswith(place.rstrip("/") + "/") for place in policy.filesystem.allow_write)
    if not rules.enabled or not writable:
        return run()
    if rules.stage and not request.quiet:
        say("stockade: staging is not built on macOS yet: this run's changes land in the project, and `stockade undo` takes them back")
    from stockade.checkpoints.clone import Cloned

    meta: dict[str, object] = {"kind": "run", "command": list(request.command), "cwd": str(request.cwd), "project": project}
    cloned = Cloned(str(request.locations.state), project, rules.max_size, meta)
    why = cloned.take()
    if why and not request.quiet:
        say(f"stockade: this run keeps no checkpoint: {why}")
    status = 125
    try:
        status = run()
        return status
    finally:
        _finish_checkpoint(cloned, status, request, project)


def _finish_checkpoint(cloned: Cloned, status: int, request: RunRequest, project: str) -> None:
    from stockade.checkpoints.history import prune

    meta = cloned.finish(status)
    if meta is None:
        return
    rules = request.policy.checkpoints
    try:
        prune(str(request.locations.state), project, rules.max_size, rules.max_age, keep=int(str(meta.get("number", 0))))
    except OSError:
        pass
    counts = meta.get("counts")
    removed = counts.get("removed", 0) if isinstance(counts, dict) else 0
    if removed and not request.quiet:
        paths = "path" if removed == 1 else "paths"
        say(f"stockade: this run removed {removed} {paths}; `stockade undo` puts back everything it changed (run {meta.get('number')})")


def _asker(locations: Locations, session: str, approve: int) -> Asker | None:
    """The thread that asks for the requests the daemon holds (proxy/client/asking.py)."""
    if not approve:
        return None
    import os

    from stockade.proxy.client.asking import start_asking
    from stockade.proxy.client.launch import daemon_files

    return start_asking(lambda: daemon_files(locations), session, os.environ)


def _hand_over(planner: SeatbeltPlanner | None, result: RunResult, denials: list[dict[str, object]]) -> None:
    """The run's refusals as data, for stockade learn and --report (RunResult.findings)."""
    if result.findings is not None:
        result.findings.update(planner.findings if planner is not None else {}, network=list(denials))
