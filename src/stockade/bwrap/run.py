"""The Linux `stockade run`, start to end, in one place.

1. Finish what a killed earlier run left unchecked (journal.py).
2. Use the stored plan for these inputs if nothing it was made from has
   changed (plan_cache.py); this path imports no planning code at all.
3. Otherwise read the policy and plan while the plan cache's recorder
   watches every filesystem read, then store the plan.
4. Execute: the network session (when the policy has one), bwrap, the
   checks after the run.

The planner (planner.py) turns a request into a plan; this module decides
when to plan and runs what was planned.
"""

from __future__ import annotations

from stockade.core import phases
from stockade.core.errors import StockadeError
from stockade.core.invocation import RunResult
from stockade.profiles.text import say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.bwrap.running.execute import Launch, StartFailed
    from stockade.core.invocation import Invocation
    from stockade.core.locations import Locations
    from stockade.profiles.credentials import Resolved
    from stockade.profiles.toolconfig import ToolView


class LinuxBackend:
    name = "bwrap"

    def run(self, invocation: Invocation) -> RunResult:
        result = RunResult(invocation.want_findings)
        try:
            result.status = self._run(invocation, result)
        except StockadeError as error:
            error.partial = result
            raise
        return result

    def _run(self, invocation: Invocation, result: RunResult) -> int:
        from stockade.bwrap.after.journal import finish_abandoned
        from stockade.bwrap.plan import plan_cache
        from stockade.bwrap.running import gitstage
        from stockade.core.locations import state_folder

        state = state_folder(invocation.env)
        for line in gitstage.finish_abandoned(state, "abandoned"):  # first: the sweeps below judge what it carries back
            say(line)
        _say_moved(finish_abandoned(state, "abandoned"))
        cacheable = plan_cache.enabled(invocation)
        found = plan_cache.cached_launch(invocation) if cacheable else None
        phases.mark("plan")
        if found is not None:
            from stockade.bwrap.running.execute import StartFailed

            launch, note = found
            if note and not invocation.quiet and _first_time(launch, invocation, note):
                say(note)
            try:
                return run_launch(launch, invocation, result, None)
            except StartFailed as failed:
                if not _lost_to_a_change(failed):
                    failed.show()
                    raise
                # a stored plan whose paths changed since the check: planned again, and stored anew
        return self._plan_and_run(invocation, result, cacheable)

    def explain(self, invocation: Invocation) -> str:
        from stockade.bwrap.plan.planner import BwrapPlanner
        from stockade.profiles.resolve import request_for

        request, _note = request_for(invocation)
        planner = BwrapPlanner()
        return planner.explain(planner.build(request))

    def _plan_and_run(self, invocation: Invocation, result: RunResult, cacheable: bool) -> int:
        """Plan, store and run; a start bwrap failed at a path of the plan is planned and started
        again (the path may have changed since it was planned), up to START_TRIES times."""
        from stockade.bwrap.running.execute import StartFailed

        for start in range(START_TRIES):
            try:
                return self._plan_once_and_run(invocation, result, cacheable)
            except StartFailed as failed:
                if start == START_TRIES - 1 or not _lost_to_a_change(failed):
                    failed.show()
                    raise
        raise AssertionError("unreachable: the last start returns or raises")

    def _plan_once_and_run(self, invocation: Invocation, result: RunResult, cacheable: bool) -> int:
        from stockade.bwrap.plan import plan_cache
        from stockade.bwrap.plan.placeholders import clear_leftovers
        from stockade.bwrap.plan.planner import BwrapPlanner, launch_of, make_own
        from stockade.core.locations import state_folder
        from stockade.profiles.resolve import request_for
        from stockade.proxy.audit import generations

        clear_leftovers(state_folder(invocation.env))  # before recording: no plan depends on this folder
        from stockade.bwrap.plan.mounts import PlanChanged

        for attempt in range(PLAN_TRIES):
            recorder = plan_cache.Recorder().start() if cacheable else None  # what planning reads decides when the plan is stale
            try:
                request, note = request_for(invocation)
                result.policy, result.locations, result.policy_note = request.policy, request.locations, note or ""
                plan = BwrapPlanner().build(request)
                break
            except (PlanChanged, FileNotFoundError, NotADirectoryError):
                # a path changed under planning (made, removed, made a link; a folder gone between
                # listing and reading it): planned again, and only what stays changed fails the run
                if attempt == PLAN_TRIES - 1:
                    raise
                import time

                time.sleep(RETRY_PAUSE * 2**attempt)  # 10, 20, 40, 80 ms: a path changing in a loop is not met in one state every time
            finally:
                if recorder is not None:
                    recorder.stop()
        launch = launch_of(plan)
        if recorder is not None:
            plan_cache.store(
                plan_cache.run_key(invocation),
                launch,
                recorder,
                plan.view.walk,
                note,
                (*generations(plan.policy.audit.log), *((plan.ca_bundle,) if plan.ca_bundle else ()), *plan.ssh_files),
                (plan.view.socket_scope, plan.view.sockets),
            )
        # Credentials are read before the project's hard links are made its own: a credential file
        # with a second name in the project is refused, not copied there (proxy/client/credentials.py).
        credentials = _read_credentials(launch, invocation)
        if plan.view.shared_files:
            make_own(plan.view.shared_files, plan.quiet)
        return run_launch(launch, invocation, result, request.locations, credentials)


PLAN_TRIES = 5  # plans of one run while the paths it names change under it (a link that stays is a real refusal)
RETRY_PAUSE = 0.01  # seconds before the second plan; doubled for each later one
START_TRIES = 4  # plans and starts of one run while a path bwrap mounts at changes between the two


def _lost_to_a_change(failed: StartFailed) -> bool:
    """Whether a failed start may have met a path that changed after planning: bwrap named one of
    the plan's paths. A run with its own console is not started again: bwrap spoke to the
    terminal itself, and a second start would repeat what it said."""
    return failed.raced and not failed.unheard


def _read_credentials(launch: Launch, invocation: Invocation) -> list[Resolved] | None:
    entries = launch.session_rules.get("credentials") if launch.session_rules is not None else None
    if not entries:
        return None
    from stockade.proxy.client.credentials import resolve

    return resolve(entries, invocation.env)  # type: ignore[arg-type]


def run_launch(
    launch: Launch, invocation: Invocation, result: RunResult, locations: Locations | None, credentials: list[Resolved] | None = None
) -> int:
    """Execute a plan, with its network session when it has one (the bridge is made here only); the
    run's refusals and troubles go in `result`."""
    from stockade.bwrap.running.execute import execute

    tools = _tool_view(launch, invocation)
    bridge = None
    if launch.session_rules is not None:
        from stockade.bwrap.running.network import Bridge
        from stockade.core.locations import runtime_folder, state_folder

        if locations is not None:
            runtime, state = str(locations.runtime), str(locations.state)
        else:
            runtime, state = runtime_folder(invocation.env), state_folder(invocation.env)
        bridge = Bridge(invocation.session_id, launch.session_rules, runtime, state, tuple(launch.command), launch.cwd)
        bridge.agent_session, bridge.tool_call = invocation.agent_session or "", invocation.tool_call or ""
        bridge.credentials = credentials if credentials is not None else _read_credentials(launch, invocation) or []
        bridge.approve = invocation.approve
        bridge.file_secrets = tools.credentials if tools is not None else []
    code = execute(
        launch,
        invocation.session_id,
        bridge,
        trace=invocation.trace,
        findings=result.findings,
        agent_session=invocation.agent_session,
        files=[(shown.path, shown.data) for shown in tools.shown] if tools is not None else (),
        who={"mcp": invocation.mcp, "agent_session": invocation.agent_session, "tool_call": invocation.tool_call},
        troubles=result.troubles,
    )
    if bridge is not None and bridge.trouble:
        result.troubles.append(bridge.trouble)
    return code


def _tool_view(launch: Launch, invocation: Invocation) -> ToolView | None:
    """The user's tool configuration, read now, its secrets made this run's placeholders; a file that
    cannot be shown that way is hidden, in one line (once per agent session)."""
    import os

    if not any(os.path.lexists(real) for _inside, real, _path in launch.tool_files):
        return None
    from stockade.profiles.toolconfig import read

    tools = read(launch.tool_files)
    lines = [
        f"stockade: {path} is hidden inside: {why} (`stockade explain` shows what is shown of the tools' configuration)" for path, why in tools.hidden
    ]
    lines += [
        f"stockade: {shown.path} is shown inside without {source}: {shown.tools} may fetch from their default instead (`stockade explain`)"
        for shown in tools.shown
        for source in shown.sources
    ]
    for line in lines:
        if not launch.quiet and _first_time(launch, invocation, line):
            say(line)
    return tools


def _first_time(launch: Launch, invocation: Invocation, note: str) -> bool:
    """Whether the stored plan's note is new to the agent session (always, without one: core/notices.py)."""
    if invocation.agent_session is None:
        return True
    from stockade.core.notices import first_time

    return first_time(launch.state_dir, invocation.agent_session, note)


def _say_moved(moved: list[tuple[str, str]]) -> None:
    for original, new in moved:
        say(f"stockade: {original} was created by an earlier run that was killed before its check; renamed to {new}")
