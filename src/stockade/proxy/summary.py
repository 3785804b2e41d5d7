"""What a run learns of its network at the end (`SessionEnd`), and the lines a person reads about it:
one per denial, refusal or broken record.

Imported on the hot path (through `client`): standard library only; the
policy hints are imported only when a denial has one to show.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own flag costs every run its import (see core/errors.py)
if TYPE_CHECKING:
    from typing import Any


class SessionEnd:
    """What a session's end tells the run (plain slots: this is on every networked run's path)."""

    __slots__ = ("denials", "audit_error", "trouble", "refused", "always", "names", "exported")

    def __init__(self, denials: list[dict[str, Any]], audit_error: str | None, trouble: str = "", refused: str = "", exported: str = "") -> None:
        self.exported = exported  # one line: records the collector did not get ([audit] otlp; "" when none were lost)
        self.always: list[dict[str, Any]] = []  # hosts the user answered "always" for: the run writes them (proxy/client/asking.py)
        self.denials = denials  # dicts with host, port, rule, hint, count, origin
        self.audit_error = audit_error  # why the session's audit log could not be written, if it could not
        self.trouble = trouble  # one line: why this run's network record is incomplete ("" when it is whole)
        self.refused = refused  # one line: connections the session's budget refused ("" when none)
        self.names: tuple[int, int] | None = None  # names the sandbox's resolver answered and refused (Linux, intercepted)

    def __eq__(self, other: object) -> bool:
        fields = ("denials", "audit_error", "trouble", "refused")
        return isinstance(other, SessionEnd) and all(getattr(self, name) == getattr(other, name) for name in fields)

    def __repr__(self) -> str:
        return f"SessionEnd({self.denials!r}, {self.audit_error!r}, trouble={self.trouble!r}, refused={self.refused!r})"


# the words of each refused packet's rule (daemon/packet_log.py), which the line below knows it by
STAYS_INSIDE = "does not leave the sandbox"
ONLY_TCP = f"{STAYS_INSIDE}: only TCP goes through the filter"


def credential_fix(name: str, origin: str) -> str:
    """Where a credential's places are set: its [credentials] table, or the user's own tool file
    it came from (profiles/toolconfig.py names those by the file)."""
    if name.startswith(("~/", "/")):
        return f"it is a secret of your {name.partition('#')[0]}, which goes only to the host it is for (`stockade explain` lists it)"
    return f"where it may go is [credentials.{name}] in {origin}"


def describe_denial(denial: dict[str, Any], origin: str) -> str:
    """One summary line for a session's denial, with the policy line that would allow it, for every backend."""
    count = int(str(denial.get("count") or 1))
    # port 0: a name the sandbox's resolver refused (proxy/daemon/inside_dns.py), before any connection; or a ping
    # (proxy/daemon/packet_log.py), which has no port
    host = str(denial.get("host"))
    if denial.get("port") != 0:
        target = f"[{host}]:{denial.get('port')}" if ":" in host else f"{host}:{denial.get('port')}"
    elif STAYS_INSIDE in str(denial.get("rule")):  # a ping, or a protocol without ports
        target = host
    else:
        target = f"{denial.get('host')} (its address was asked for)"
    where = f"network: denied {target}" + (f" ({count} times)" if count > 1 else "")
    if not denial.get("hint"):
        rule = str(denial.get("rule"))
        if rule.startswith('deny "') or rule.startswith("http deny "):
            return f"{where} ({rule}); it is under deny in {origin}"
        if rule.startswith("credential "):
            return f"{where} ({rule}); {credential_fix(rule.split(' ', 2)[1], origin)}"
        return f"{where} ({rule}); no policy change allows this"
    from stockade.profiles.hints import after_allow, allow_command, http_fix

    fix = http_fix(str(denial.get("hint")), origin)
    if fix is not None:
        return f"{where} ({denial.get('rule')}); {fix}"
    command = allow_command(str(denial.get("hint")), origin)
    if command:
        return f"{where}; to allow it, run: {command}{after_allow(origin)}"
    return f"{where}; to allow it, add {denial.get('hint')} under [network] in {origin}"


def names_of(reply: object) -> tuple[int, int] | None:
    """(answered, refused) from the daemon's `names` in its end reply; None without them."""
    if not isinstance(reply, dict):
        return None
    answered, refused = reply.get("answered"), reply.get("refused")
    if not isinstance(answered, int) or not isinstance(refused, int) or isinstance(answered, bool) or isinstance(refused, bool):
        return None
    return answered, refused


def names_line(names: tuple[int, int], session: str) -> str:
    """The count beside the refused names' lines: what the sandbox's resolver answered and refused."""
    answered, refused = names
    return (
        f"network: the sandbox's resolver answered {answered} name{'s' * (answered != 1)} and refused {refused}; "
        f"each query is in the audit log (stockade audit --session {session})"
    )


def refused_line(refused: object) -> str:
    """The line for connections a session's budget refused (the daemon's `refused` reply), or ""."""
    if not isinstance(refused, dict) or not isinstance(refused.get("count"), int) or refused["count"] <= 0:
        return ""
    count = refused["count"]
    return f"network: {count} connection{'s' * (count != 1)} refused with a 503: {refused.get('why')}"


def daemon_gone(error: BaseException) -> str:
    """Why a run's network record is incomplete when the daemon was gone at its end."""
    return (
        f"the proxy daemon was gone when the run ended ({error}): the run's network connections ended with it, "
        "and the audit log holds their start records only (`stockade audit` marks them incomplete)"
    )


def audit_failed(audit_error: str) -> str:
    """Why a run's network record is incomplete when its audit log could not be written."""
    return f"the audit log could not be written ({audit_error}): every request after that was refused"
