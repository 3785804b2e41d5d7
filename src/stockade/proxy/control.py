"""What the daemon and its clients share: file locations, the session spec, the wire format.

Imported by every networked `stockade run`, so it imports no module that
costs an import: no json (which loads `re`), no dataclasses, no pathlib. The
lines are JSON all the same, read and written with CPython's own C codec
(`_json`), or with `json` where an interpreter lacks it.

The control protocol is JSON lines over a Unix socket in a 0700 directory.
Each request is one object with an "op"; each reply is one object with
"ok" and either the result or an "error" sentence:

    {"op": "ping"}                          -> {"ok": true, "port": 41234, "pid": 999, "protocol": 3,
                                                "exiting": false, "sessions": 2, "clients": 5, "spliced": 17,
                                                "bodies": 3}
    {"op": "open", "spec": {...}}           -> {"ok": true, "protocol": 3, "session_id": "..."}
        (Linux: sent with the sandbox's listening TCP socket as SCM_RIGHTS. The daemon registers
        the session and answers before it accepts a single connection there, so a run that has
        no answer yet knows nothing was served; see proxy/daemon/door.py and bwrap/running/network.py)
    {"op": "register", "spec": {...}}       -> {"ok": true, "port": ..., "token": "...", "session_id": "..."}
        (macOS: the sandbox reaches the daemon's loopback port with the session's token)
    {"op": "listen", "session_id": "..."}   -> {"ok": true}
        (a registered session's listener, sent on the connection that registered it)
    {"op": "end", "session_id": "..."}      -> {"ok": true, "denials": [{...}, ...], "audit_error": null, "refused": null,
                                                "always": [{"rule": "...", "origin": "...", "cwd": "..."}]}
    {"op": "questions", "session_id": "...", "known": ["id", ...], "wait": 5}
                                            -> {"ok": true, "questions": [{"id": "...", "rule": "pypi.org", ...}]}
        (open questions of a session, or of every session for "": refused requests held for the
        user's answer, proxy/filter/approvals.py; waits up to "wait" seconds for one that is not "known")
    {"op": "answer", "id": "...", "answer": "once"|"run"|"always"|"deny"} -> {"ok": true}

A refusal may carry "retry": true (the daemon is exiting): the client starts
a new daemon and asks it instead.

A session registered on a connection ends when that connection closes, so a
crashed `stockade run` never leaves a session (or a daemon) behind.

`protocol` in the ping and open replies is what a client checks before using
a daemon: one that answers an older protocol (a daemon left running by an
older stockade) is replaced by a new one, not used.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's own flag costs every run its import (see core/errors.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from stockade.proxy.export_settings import ExportSettings

MAX_LINE = 1 << 20  # a spec with thousands of rules still fits
# 2: "listen"; 3: "open" (register and listen at once); 4: the spec's "http" rules; 5: its "credentials";
# 6: its "approve", and "questions"/"answer" (an older daemon would ignore what it does not know, so it is replaced);
# 7: its "forwards", each a listener more in "open"; 8: its "intercept", three sockets more (bwrap/parts/interception.py);
# 9: "intercept" counts its sockets: IPv4's three and the log of refused packets, then IPv6's three;
# 10: its "export" (the collector its records also go to: an older daemon would send them nowhere)
PROTOCOL = 10
PROXY_USER = "stockade"  # the Basic-auth user name; the password is the session token
START_TIMEOUT = 30.0  # first start creates mitmproxy's private CA; later starts take well under a second
TEST_UPSTREAM_CA_ENV = "STOCKADE_PROXY_TEST_UPSTREAM_CA"  # tests only: the one CA inspected origins are verified against
SYSTEM_ROOTS = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Arch, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/cert.pem",  # macOS, the BSDs
)


def system_roots() -> str | None:
    """The system's root certificates as one PEM file (the daemon trusts them upstream, a sandbox beside its CA)."""
    return next((path for path in SYSTEM_ROOTS if os.path.isfile(path)), None)


class DaemonFiles:
    """Where one user's daemon keeps its files, as plain strings."""

    __slots__ = ("runtime", "state")

    def __init__(self, runtime: str, state: str) -> None:
        self.runtime = str(runtime)  # 0700: control socket, port file, start lock
        self.state = str(state)  # daemon log and mitmproxy's private confdir

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DaemonFiles) and (self.runtime, self.state) == (other.runtime, other.state)

    def __hash__(self) -> int:
        return hash((self.runtime, self.state))

    def __repr__(self) -> str:
        return f"DaemonFiles(runtime={self.runtime!r}, state={self.state!r})"

    @property
    def socket(self) -> str:
        return self.runtime + "/proxy.sock"

    @property
    def port_file(self) -> str:
        return self.runtime + "/proxy.port"

    @property
    def lock(self) -> str:
        return self.runtime + "/proxy.lock"

    @property
    def log(self) -> str:
        return self.state + "/proxy.log"

    @property
    def confdir(self) -> str:
        return self.state + "/mitmproxy"


class SessionCredential:
    """One credential of a session, as the daemon needs it: the run's placeholder, the value it
    stands for, and where that value may go (profiles/credentials.py). Its repr hides the value,
    so no log or error message can carry it."""

    __slots__ = ("name", "placeholder", "value", "hosts", "header", "query")

    def __init__(self, name: str, placeholder: str, value: str, hosts: tuple[str, ...], header: str = "", query: str = "") -> None:
        self.name = name
        self.placeholder = placeholder
        self.value = value
        self.hosts = tuple(hosts)
        self.header = header  # "" when it may not travel in a header
        self.query = query  # "" when it may not travel in the query

    def to_dict(self) -> dict[str, Any]:
        return {name: list(getattr(self, name)) if name == "hosts" else getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionCredential) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"SessionCredential({self.name!r}, hosts={self.hosts!r}, header={self.header!r}, query={self.query!r})"

    @classmethod
    def from_dict(cls, data: object) -> SessionCredential:
        shape = "spec.credentials must be a list of {name, placeholder, value, hosts, header, query}"
        if not isinstance(data, dict):
            raise ValueError(shape)
        fields = [data.get(name) for name in ("name", "placeholder", "value", "header", "query")]
        hosts = data.get("hosts")
        if not all(isinstance(v, str) for v in fields) or not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise ValueError(shape)
        name, placeholder, value, header, query = fields
        if not name or len(placeholder) < 32 or not value or not hosts or not (header or query):  # type: ignore[arg-type]
            raise ValueError(f"spec.credentials: {name!r} is incomplete (a placeholder of 32 characters or more, a value, hosts, a place)")
        return cls(name, placeholder, value, tuple(hosts), header, query)  # type: ignore[arg-type]


MAX_FORWARDS = 64  # host loopback ports one session's sandbox may listen for (bwrap/parts/forwards.py)
# How many sockets interception hands over (bwrap/parts/interception.py), in this order: IPv4's transparent
# listener, DNS over UDP and over TCP, the log of refused packets (proxy/daemon/packet_log.py); then, where the
# sandbox's namespace has IPv6, IPv6's three.
INTERCEPTION_SOCKETS = (4, 7)
# Refused packets the namespace's rule copies to the daemon a second, past a burst (bwrap/parts/interception.py);
# the packet log says when the copies reached that rate (proxy/daemon/packet_log.py)
REFUSED_COPY_RATE, REFUSED_COPY_BURST = 100, 200


class SessionSpec:
    """What a backend tells the daemon about one sandboxed run; immutable, compared by value."""

    session_id: str
    command: list[str]
    cwd: str
    allow: tuple[str, ...]  # canonical rules from profiles.domains
    deny: tuple[str, ...]
    audit_path: str
    origin: str  # the policy file a user edits; named in every hint
    mode: str  # "allowlist" | "open" | "none"
    # (host rule, allow, deny, push) HTTP rules and ref patterns: profiles/httprules.py, profiles/gitrefs.py
    http: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...]
    credentials: tuple[SessionCredential, ...]  # swapped in by proxy/filter/placeholders.py
    approve: int  # seconds a refused request waits for the user's answer (proxy/filter/approvals.py); 0: not held
    # the allow entry each listener after the proxy's forwards to, as a CONNECT (bwrap/parts/forwards.py, proxy/daemon/door.py)
    forwards: tuple[str, ...]
    intercept: int  # sockets more, one of INTERCEPTION_SOCKETS (0: none): the transparent listeners, DNS's, the packet log
    mcp: str  # the agent's MCP server the run is (`stockade run --mcp NAME`), named in each audit record; "" for any other run
    export: ExportSettings | None  # the collector each audit record also goes to ([audit] otlp: proxy/export_settings.py)
    agent_session: str  # the agent's session id, for a run an agent's hook started (cli/hook.py); "" for any other run
    tool_call: str  # the agent's tool call that is this run (its id in the agent's transcript); ""
    # the widest allow rules a host the user approves may come under (the administrator's baseline); None: unbounded
    ceiling: tuple[str, ...] | None
    sandbox_pid: int  # the sandbox's first process on the host (Linux): whose processes opened its connections; 0: unknown
    diag: bool  # the last socket "open" hands over is the namespace's socket table (bwrap/parts/netns.py _socket_diag)
    __slots__ = tuple(__annotations__)

    def __init__(
        self,
        session_id: str,
        command: list[str],
        cwd: str,
        allow: tuple[str, ...] = (),
        deny: tuple[str, ...] = (),
        audit_path: str = "",
        origin: str = "",
        mode: str = "allowlist",
        http: Iterable[Sequence[Any]] = (),  # (host, allow, deny) or (host, allow, deny, push)
        credentials: tuple[SessionCredential, ...] = (),
        approve: int = 0,
        forwards: tuple[str, ...] = (),
        intercept: int = 0,
        mcp: str = "",
        export: ExportSettings | None = None,
        agent_session: str = "",
        tool_call: str = "",
        ceiling: tuple[str, ...] | None = None,
        sandbox_pid: int = 0,
        diag: bool = False,
    ) -> None:
        tables = tuple((str(t[0]), tuple(t[1]), tuple(t[2]), tuple(t[3]) if len(t) > 3 else ()) for t in http)
        values = (
            session_id, list(command), cwd, tuple(allow), tuple(deny), audit_path, origin, mode, tables, tuple(credentials), approve, tuple(forwards),
            intercept, mcp, export, agent_session, tool_call, ceiling, sandbox_pid, diag,
        )  # fmt: skip
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SessionSpec is immutable ({name})")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionSpec) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash((self.session_id, self.audit_path))

    def __repr__(self) -> str:
        return "SessionSpec(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__) + ")"

    def who(self) -> dict[str, Any]:
        """The fields every audit record of this session carries: the run, and what started it."""
        from stockade.proxy.audit import redacted_command

        return {
            "session": self.session_id, "command": list(redacted_command(tuple(self.command))), "mcp": self.mcp or None,
            "agent_session": self.agent_session or None, "tool_call": self.tool_call or None,
        }  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        plain = {name: list(value) if isinstance(value, tuple | list) else value for name, value in zip(self.__slots__, self._values(), strict=True)}
        # The push patterns only when there are some: a spec without them reads in a daemon that knows none.
        plain["http"] = [[host, list(allow), list(deny), *([list(push)] if push else [])] for host, allow, deny, push in self.http]
        plain["credentials"] = [credential.to_dict() for credential in self.credentials]
        if self.export is None:
            del plain["export"]  # a spec without export reads in a daemon that knows none
        else:
            plain["export"] = self.export.to_dict()
        if self.ceiling is None:
            del plain["ceiling"]
        return plain

    @classmethod
    def from_dict(cls, data: object) -> SessionSpec:
        """Validate a spec that came over the socket; ValueError says which field is wrong."""
        if not isinstance(data, dict):
            raise ValueError("spec must be an object")

        def text(name: str, required: bool = True) -> str:
            value = data.get(name, None if required else "")
            if not isinstance(value, str) or (required and not value):
                raise ValueError(f"spec.{name} must be a non-empty string")
            return value

        def strings(name: str) -> list[str]:
            value = data.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"spec.{name} must be a list of strings")
            return value

        def tables() -> tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...]:
            value = data.get("http", [])
            shape = "spec.http must be a list of [host, [allow rules], [deny rules]] (and [push patterns])"
            if not isinstance(value, list):
                raise ValueError(shape)
            found = []
            for entry in value:
                if not isinstance(entry, list) or len(entry) not in (3, 4) or not isinstance(entry[0], str):
                    raise ValueError(shape)
                lists = entry[1:]
                if not all(isinstance(rules, list) and all(isinstance(rule, str) for rule in rules) for rules in lists):
                    raise ValueError(shape)
                found.append((entry[0], tuple(lists[0]), tuple(lists[1]), tuple(lists[2]) if len(lists) > 2 else ()))
            return tuple(found)

        def seconds() -> int:
            value = data.get("approve", 0)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 3600:
                raise ValueError("spec.approve must be a number of seconds (0 to 3600)")
            return value

        def interception() -> int:
            value = data.get("intercept", 0)
            if value not in (0, *INTERCEPTION_SOCKETS) or isinstance(value, bool):
                raise ValueError(f"spec.intercept must be how many sockets interception hands over: 0 or one of {INTERCEPTION_SOCKETS}")
            return int(value)

        def credentials() -> tuple[SessionCredential, ...]:
            value = data.get("credentials", [])
            if not isinstance(value, list):
                raise ValueError("spec.credentials must be a list")
            found = tuple(SessionCredential.from_dict(entry) for entry in value)
            if len({c.name for c in found}) != len(found) or len({c.placeholder for c in found}) != len(found):
                raise ValueError("spec.credentials: names and placeholders must differ")
            return found

        def process_id() -> int:
            value = data.get("sandbox_pid", 0)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 22:
                raise ValueError("spec.sandbox_pid must be a process id")
            return value

        def marker(name: str) -> str:
            value = text(name, required=False)
            if len(value) > 128 or not all(c.isalnum() or c in "._-:" for c in value):
                raise ValueError(f"spec.{name} must be an agent's id (letters, digits, '.', '_', '-', ':'; at most 128)")
            return value

        def server_name() -> str:
            value = text("mcp", required=False)
            if len(value) > 100 or not all(c.isalnum() or c in "._-" for c in value):
                raise ValueError("spec.mcp must be an MCP server's name (letters, digits, '.', '_', '-')")
            return value

        def forwards() -> tuple[str, ...]:
            value = tuple(strings("forwards"))
            allowed = set(strings("allow"))
            if any(entry not in allowed for entry in value) or len(value) > MAX_FORWARDS:
                raise ValueError(f"spec.forwards must name allow entries (at most {MAX_FORWARDS})")
            return value

        return cls(
            session_id=text("session_id"),
            command=strings("command"),
            cwd=text("cwd", required=False),
            allow=tuple(strings("allow")),
            deny=tuple(strings("deny")),
            audit_path=text("audit_path"),
            origin=text("origin", required=False),
            mode=text("mode", required=False) or "allowlist",
            http=tables(),
            credentials=credentials(),
            approve=seconds(),
            forwards=forwards(),
            intercept=interception(),
            mcp=server_name(),
            export=_export(data.get("export")),
            agent_session=marker("agent_session"),
            tool_call=marker("tool_call"),
            ceiling=tuple(strings("ceiling")) if data.get("ceiling") is not None else None,
            sandbox_pid=process_id(),
            diag=data.get("diag", False) is True,
        )


def _export(data: object) -> ExportSettings | None:
    if data is None:
        return None
    from stockade.proxy.export_settings import ExportSettings

    return ExportSettings.from_dict(data)


def encode(message: dict[str, Any]) -> bytes:
    """One message as one ASCII line of JSON."""
    parts: list[str] = []
    _encode(message, parts)
    return "".join(parts).encode("ascii") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line; ValueError if it is not one JSON object."""
    if len(line) > MAX_LINE:
        raise ValueError("control message too long")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"control message is not UTF-8: {exc}") from None
    message = _parse(text.strip(" \t\r\n"))  # JSON's own whitespace, as json.loads allows
    if not isinstance(message, dict):
        raise ValueError("control message must be a JSON object")
    return message


# -- the codec -------------------------------------------------------------------


def _encode(value: object, parts: list[str]) -> None:
    if isinstance(value, str):
        parts.append(_quoted(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} has no JSON form")
        parts.append(float.__repr__(value))
    elif isinstance(value, dict):
        parts.append("{")
        for index, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise TypeError(f"control message keys must be strings, not {type(key).__name__}")
            parts.append("," if index else "")
            parts.append(_quoted(key))
            parts.append(":")
            _encode(item, parts)
        parts.append("}")
    elif isinstance(value, list | tuple):
        parts.append("[")
        for index, item in enumerate(value):
            parts.append("," if index else "")
            _encode(item, parts)
        parts.append("]")
    else:
        raise TypeError(f"{type(value).__name__} has no JSON form")


class _ScannerSettings:
    """What `_json.make_scanner` reads off json.JSONDecoder: the strict defaults, no constants."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    def parse_constant(self, name: str) -> object:
        raise ValueError(f"{name} is not allowed in a control message")


def _c_codec() -> tuple[Callable[[str], str], Callable[[str], object]] | None:
    try:
        import _json
    except ImportError:
        return None
    scan = _json.make_scanner(_ScannerSettings())  # type: ignore[arg-type]  # it reads these attributes, as off a JSONDecoder

    def parse(text: str) -> object:
        try:
            value, end = scan(text, 0)
        except StopIteration as stop:
            raise ValueError(f"control message is not JSON (at character {stop.value})") from None
        except RecursionError:
            raise ValueError("control message is nested too deeply") from None
        if end != len(text):
            raise ValueError(f"control message has extra data at character {end}")
        return value

    return _json.encode_basestring_ascii, parse


def _json_codec() -> tuple[Callable[[str], str], Callable[[str], object]]:
    import json

    def parse(text: str) -> object:
        try:
            return json.loads(text, parse_constant=_ScannerSettings().parse_constant)
        except RecursionError:
            raise ValueError("control message is nested too deeply") from None

    return (lambda text: json.dumps(text, ensure_ascii=True)), parse


_quoted, _parse = _c_codec() or _json_codec()
