"""The macOS `stockade run`, start to end: read the policy, open the proxy session, run, report.

The Seatbelt profile lets the sandbox reach only the daemon's loopback port,
and the session's credential travels in the proxy URL (Linux hands the
daemon a listener instead: bwrap/running/network.py).
"""

from __future__ import annotations

from stockade.core.errors import StockadeError
from stockade.core.invocation import Invocation, RunResult
from stockade.profiles.model import NetworkMode
from stockade.profiles.resolve import request_for
from stockade.profiles.text import say
from stockade.seatbelt.planner import SeatbeltPlanner

TYPE_CHECKING = False
if TYPE_CHECKING:
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
        if request.policy.network.mode is NetworkMode.NONE:
            offline = SeatbeltPlanner()
            try:
                return offline.run(offline.build(request))
            finally:
                _hand_over(offline, result, [])
        from stockade.proxy.client import api
        from stockade.proxy.client.credentials import read_all

        session, policy = invocation.session_id, request.policy
        credentials = read_all(policy.credentials, request.host_env)
        ticket = api.open_session(request.locations, session, list(request.command), str(request.cwd), policy, credentials, invocation.approve)
        planner: SeatbeltPlanner | None = None
        asker = _asker(request.locations, session, invocation.approve)
        try:
            planner = SeatbeltPlanner(
                proxy_port=ticket.port, session_id=session, proxy_token=ticket.token,
                placeholders={credential.name: credential.placeholder for credential in credentials},
            )  # fmt: skip
            return planner.run(planner.build(request))
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
                for line in (ended.refused, ended.trouble):
                    if line:
                        say(f"stockade: {line}")

    def explain(self, invocation: Invocation) -> str:
        request, _note = request_for(invocation)
        planner = SeatbeltPlanner()
        return planner.explain(planner.build(request))


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
