"""`stockade run --ci` / `--report FILE`: what a CI job ran, how it ended, and what it tried to reach.

Wraps the lean run path: times it, then reads this run's records back from
the audit log (by session id) and writes them as a Markdown step summary
(`$GITHUB_STEP_SUMMARY`, GitHub Actions) and/or a JSON report. Loaded only
when one of those options is given, so plain `stockade run` never pays for it.

Everything written here comes from outside the sandbox, but the paths may
lie in places the sandbox could write: the report is written through a
temporary file and a rename, never through a symlink.
"""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from stockade.core.errors import ExitCode, StockadeError
from stockade.core.invocation import Invocation, RunResult
from stockade.profiles.model import NetworkMode
from stockade.profiles.text import say

REPORT_VERSION = 3  # 2: files, files_traced, limits and moved; 3: names_answered and names_refused, DNS apart from hosts
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
RECORD_SETTLE = 1.0  # seconds to wait for the proxy's last records of this session
COMMAND_SHOWN = 4000  # characters of the command in the Markdown summary
FILES_SHOWN = 30  # refused file accesses listed in the Markdown summary (all of them are in the JSON)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass
class HostTally:
    """Every audit record for one host:port in this run, added up."""

    host: str
    port: int
    requests: int = 0
    allowed: int = 0
    denied: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass
class Denial:
    host: str
    port: int
    rule: str
    hint: str  # the line to add under [network]; "" when no policy change allows it
    count: int = 1


@dataclass
class CiReport:
    command: list[str]
    cwd: str
    session: str
    policy: str
    network: str
    audit_log: str | None
    exit_status: int
    duration_seconds: float
    started: str
    finished: str
    hosts: list[HostTally] = field(default_factory=list)
    denials: list[Denial] = field(default_factory=list)  # a name the sandbox's resolver refused has port 0
    names_answered: int = 0  # distinct names the sandbox's resolver answered (proxy/daemon/inside_dns.py)
    names_refused: int = 0
    error: str | None = None  # stockade's own failure (the sandbox could not be set up, ...)
    notes: list[str] = field(default_factory=list)
    audit_trouble: list[str] = field(default_factory=list)  # why the network record is incomplete: the job fails
    # The sandbox's own refusals (Invocation.findings): file accesses (with --trace on Linux; from
    # the sandbox's log on macOS), limits reached, and files moved aside at protected paths.
    files_traced: bool = False
    files: list[dict[str, object]] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    moved: list[dict[str, object]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"version": REPORT_VERSION, **asdict(self)}


def tally(records: Iterable[Mapping[str, object]]) -> tuple[list[HostTally], list[Denial]]:
    """Hosts in first-contact order with their bytes; denials once per host, port and rule. A query
    of the sandbox's resolver is no host contacted: its refusals are denials of the name (port 0)."""
    hosts: dict[tuple[str, int], HostTally] = {}
    denials: dict[tuple[str, int, str], Denial] = {}
    for record in records:
        if "kind" in record:  # a file or limit finding (proxy/audit.FindingRecord): the report has those apart
            continue
        host, port = str(record.get("host", "")), _int(record.get("port"))
        if record.get("scheme") == "dns":
            if record.get("decision") == "deny" and host != "*" and not record.get("repeats"):
                key = (host, 0, str(record.get("rule") or ""))
                if key in denials:
                    denials[key].count += 1
                else:
                    denials[key] = Denial(host, 0, key[2], str(record.get("hint") or ""))
            continue
        entry = hosts.setdefault((host, port), HostTally(host, port))
        entry.requests += 1
        entry.bytes_up += _int(record.get("bytes_up"))
        entry.bytes_down += _int(record.get("bytes_down"))
        if record.get("decision") == "deny":
            entry.denied += 1
            rule = str(record.get("rule") or "")
            key = (host, port, rule)
            if key in denials:
                denials[key].count += 1
            else:
                denials[key] = Denial(host, port, rule, str(record.get("hint") or ""))
        else:
            entry.allowed += 1
    return list(hosts.values()), list(denials.values())


def names_asked(records: Iterable[Mapping[str, object]]) -> tuple[int, int]:
    """(names the sandbox's resolver answered, names it refused), each counted once."""
    answered: set[str] = set()
    refused: set[str] = set()
    for record in records:
        if record.get("scheme") == "dns" and record.get("host") != "*":
            (answered if record.get("decision") == "allow" else refused).add(str(record.get("host")))
    return len(answered), len(refused)


def run_ci(invocation: Invocation, execute: Callable[[], RunResult], *, report: str | None, announce: bool) -> int:
    """Run, then summarise; the command's exit status is returned unchanged, stockade's errors re-raised."""
    started_wall, started = time.time(), time.monotonic()
    failure: StockadeError | None = None
    try:
        outcome: RunResult | None = execute()
        code = outcome.status if outcome is not None else 0
    except StockadeError as error:
        failure, code = error, int(error.exit_code)
        outcome = error.partial if isinstance(error.partial, RunResult) else None
    duration = time.monotonic() - started
    result = build_report(invocation, outcome, code, duration, started_wall, failure)
    written = publish(result, invocation.env, report)
    if announce:
        say(f"stockade: ci: {one_line(result)}{written}")
    if failure is not None:
        raise failure
    return failed_audit_status(code) if outcome is not None and outcome.troubles else code


def failed_audit_status(code: int) -> int:
    """A CI job must not pass on a run whose network record is incomplete (the audit log
    failed, the daemon died): the command's own failure stands, success becomes 125."""
    return code if code != 0 else int(ExitCode.SETUP)


def build_report(
    invocation: Invocation, outcome: RunResult | None, code: int, duration: float, started_wall: float, failure: StockadeError | None
) -> CiReport:
    """What the run did; a run that failed before its policy was read reports the failure alone."""
    from stockade.proxy.audit import now_iso

    outcome = outcome if outcome is not None else RunResult()
    policy, locations = outcome.policy, outcome.locations
    network = policy.network.mode if policy is not None else NetworkMode.NONE
    audit_log = None
    if policy is not None and locations is not None and network is not NetworkMode.NONE:
        audit_log = policy.audit.log or str(locations.default_audit_log)
    result = CiReport(
        command=list(invocation.command),
        cwd=invocation.cwd,
        session=invocation.session_id,
        policy=policy.origin if policy is not None else "(not read)",
        network=network.value,
        audit_log=audit_log,
        exit_status=code,
        duration_seconds=round(duration, 3),
        started=now_iso(started_wall),
        finished=now_iso(started_wall + duration),
        error=str(failure) if failure is not None else None,
        audit_trouble=list(outcome.troubles),
    )
    _add_findings(result, outcome.findings or {})
    if outcome.policy_note:  # what an untrusted policy file tried to widen (profiles/citrust.py, resolve.py)
        result.notes.append(outcome.policy_note.removeprefix("stockade: "))
    if audit_log is not None:
        try:
            records = session_records(audit_log, invocation.session_id)
        except StockadeError as error:
            result.notes.append(f"the audit log could not be read: {error}")
        else:
            result.hosts, result.denials = tally(records)
            result.names_answered, result.names_refused = names_asked(records)
            cut = sum(1 for record in records if record.get("incomplete"))
            if cut:
                result.notes.append(f"{cut} connection(s) have a start record and no end: the proxy daemon stopped under them")
    return result


def _add_findings(result: CiReport, findings: Mapping[str, object]) -> None:
    files, limits, moved = findings.get("files"), findings.get("limits"), findings.get("moved")
    result.files_traced = isinstance(files, list)
    result.files = [dict(item) for item in files if isinstance(item, dict)] if isinstance(files, list) else []
    result.limits = [str(item) for item in limits] if isinstance(limits, list) else []
    result.moved = [dict(item) for item in moved if isinstance(item, dict)] if isinstance(moved, list) else []


def session_records(path: str, session: str, *, settle: float = RECORD_SETTLE) -> list[dict[str, object]]:
    """This session's records; waits briefly for records of tunnels the end of the run cut."""
    from stockade.proxy.audit import AuditFilter, read_records

    where = AuditFilter(session=session)
    records = list(read_records(path, where))
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        time.sleep(0.1)
        again = list(read_records(path, where))
        if len(again) == len(records):
            return again
        records = again
    return records


def publish(result: CiReport, host_env: Mapping[str, str], report: str | None) -> str:
    """Append the step summary and write the report; returns what to add to the announce line."""
    said = ""
    summary_path = host_env.get(SUMMARY_ENV, "")
    if summary_path:
        try:
            append_summary(summary_path, markdown(result))
            said += f"; summary appended to ${SUMMARY_ENV}"
        except OSError as exc:
            say(f"stockade: ci: cannot append the step summary to {summary_path}: {exc.strerror or exc}")
    if report:
        try:
            write_report(report, result)
            said += f"; report: {report}"
        except (OSError, StockadeError) as exc:
            say(f"stockade: ci: cannot write the report {report}: {exc}")
    return said


def append_summary(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(text)


def write_report(path: str, result: CiReport) -> None:
    """Through a temporary file and a rename: a planted symlink is replaced, never followed."""
    target = Path(os.path.abspath(path))
    _refuse_symlinked_folders(target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".stockade-report-", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(result.to_dict(), handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _refuse_symlinked_folders(folder: Path) -> None:
    current = Path("/")
    for part in folder.parts[1:]:
        current = current / part
        if current.is_symlink():
            raise StockadeError(f"{current} is a symlink (a sandboxed run could have planted it); give the report a real path")


def one_line(result: CiReport) -> str:
    denied = sum(d.count for d in result.denials)
    contacted = len(result.hosts)
    if result.error:
        return f"stockade could not run the command (exit {result.exit_status}): {result.error}"
    if result.audit_trouble:
        return f"the command exited {result.exit_status}, but {result.audit_trouble[0]}; the job fails"
    net = f"; {contacted} host{'s' * (contacted != 1)} contacted, {denied} request{'s' * (denied != 1)} denied" if result.audit_log else ""
    return f"exit {result.exit_status} after {result.duration_seconds:.1f}s{net}"


# -- Markdown ----------------------------------------------------------------------------------


def markdown(result: CiReport) -> str:
    """The step summary: GitHub renders it, so every piece of run data is escaped or fenced."""
    outcome = "could not run" if result.error else ("passed" if result.exit_status == 0 else "failed")
    lines = [f"### stockade: {outcome} (exit {result.exit_status}, {result.duration_seconds:.1f} s)", ""]
    lines += [*_fenced(shown_command(result.command)), ""]
    lines += ["| | |", "|---|---|"]
    lines += [
        f"| exit status | {result.exit_status} |",
        f"| duration | {result.duration_seconds:.1f} s |",
        f"| policy | {_code(result.policy)} |",
        f"| network | {_code(result.network)} |",
        f"| session | {_code(result.session)} (`stockade audit --session {_plain(result.session)}`) |",
    ]
    if result.error:
        lines.append(f"| error | {_code(result.error)} |")
    lines.append("")
    if result.audit_log:
        lines += [f"#### Hosts contacted ({len(result.hosts)})", ""]
        if result.hosts:
            lines += ["| host | port | requests | allowed | denied | bytes up | bytes down |", "|---|---:|---:|---:|---:|---:|---:|"]
            lines += [
                f"| {_code(h.host)} | {h.port} | {h.requests} | {h.allowed} | {h.denied} | {h.bytes_up:,} | {h.bytes_down:,} |" for h in result.hosts
            ]
        else:
            lines.append("No network requests.")
        lines.append("")
        if result.names_answered or result.names_refused:
            lines += [f"Names the sandbox's resolver answered: {result.names_answered}; refused: {result.names_refused}.", ""]
        denied = sum(d.count for d in result.denials)
        lines += [f"#### Denied ({denied})", ""]
        if result.denials:
            lines += ["| host | port | times | why | to allow it, run |", "|---|---:|---:|---|---|"]
            lines += [
                f"| {_code(d.host)} | {d.port or 'its name'} | {d.count} | {_cell(d.rule)} | {_fix(d.hint, result.policy)} |" for d in result.denials
            ]
        else:
            lines.append("Nothing was denied.")
        lines.append("")
    else:
        lines += ["The policy gives this command no network.", ""]
    if result.files:
        lines += [f"#### File accesses refused ({len(result.files)})", ""]
        lines += ["| operation | path | why |", "|---|---|---|"]
        for item in result.files[:FILES_SHOWN]:
            lines.append(f"| {_cell(str(item.get('operation')))} | {_code(str(item.get('path')))} | {_cell(str(item.get('rule')))} |")
        if len(result.files) > FILES_SHOWN:
            lines.append(f"| | ... and {len(result.files) - FILES_SHOWN} more (in the JSON report) | |")
        lines.append("")
    lines += [f"- **limit reached:** {_cell(name)} (raise it under [limits] in {_code(result.policy)})" for name in result.limits]
    for moved in result.moved:
        path, moved_to = _code(str(moved.get("path"))), _code(str(moved.get("moved_to")))
        lines.append(f"- **moved aside:** {path} was created or changed at a protected path; renamed to {moved_to}")
    lines += [f"- **the job fails:** {_cell(trouble)}" for trouble in result.audit_trouble]
    lines += [f"- {_cell(note)}" for note in result.notes]
    return "\n".join(lines).rstrip("\n") + "\n\n"


def _fix(hint: str, policy: str) -> str:
    from stockade.profiles.hints import allow_command

    if not hint:
        return "no policy change allows this"
    return _code(allow_command(hint, policy) or f"{hint} (under [network] in {policy})")


def shown_command(command: list[str]) -> str:
    """The shell string of `-c STRING` runs, else the argv quoted for a shell."""
    if len(command) == 3 and command[1] == "-c" and command[0].endswith("sh"):
        text = command[2]
    else:
        text = shlex.join(command)
    return text if len(text) <= COMMAND_SHOWN else text[:COMMAND_SHOWN] + f"\n... ({len(text) - COMMAND_SHOWN} more characters)"


def _fenced(text: str) -> list[str]:
    """A code block whose fence no line of `text` can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, _visible(text), fence]


def _visible(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _cell(text: str) -> str:
    """Plain text safe inside a table cell: no HTML, no Markdown, no line or cell breaks."""
    escaped = html.escape(_visible(text).replace("\n", " ").replace("\t", " "))
    return re.sub(r"([\\`*_\[\]|~])", r"\\\1", escaped)


def _code(text: str) -> str:
    escaped = html.escape(_visible(text).replace("\n", " ")).replace("|", "&#124;")
    return f"<code>{escaped}</code>"


def _plain(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "", text)


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0
