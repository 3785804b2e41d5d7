"""A run's findings off the network, written to the audit log next to its network records.

What a security team asks of the log ("what did the agent do on that machine
yesterday") is more than traffic: a hook planted in `.git/hooks` and moved
aside, a run killed at its memory limit, the files `--trace` saw refused. Each
becomes a FindingRecord (proxy/audit.py) with the run's session, command,
agent session and tool call, chained like every other line. The run writes
them itself, after the command ended, under the log's lock (audit.AuditWriter),
so an offline run (no daemon) has them too.

Which process: the records name one only where the kernel said so. A file
moved aside names the process that last changed it (and those before it), which the checkpoint's
watch described while each call waited (bwrap/running/checkpointing.py; no
checkpoint, as under `--trace` or with checkpoints off, no process). `--trace`
gives the pid (strace's, on the host) of each refused call. A limit's cgroup
counts what it refused, never who: those records name the run alone.

With `[audit] otlp` the lines also go to the collector, from a process of their
own (proxy/daemon/export_once.py) that the run does not wait for: a collector
that is down never holds up the end of a run, and one that refuses them leaves
an `export-failed` line in the local log.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from stockade.bwrap.running.execute import Launch
    from stockade.proxy.audit import FindingRecord

MAX_RECORDS = 200  # a run's findings written one by one; past that, one record per kind says how many more
MOVED_RULE = "written inside the sandbox at a protected path (a file that could run code outside it, or one deny_write names): moved aside"


def findings(
    launch: Launch,
    session: str,
    who: dict[str, str | None],
    hits: list[str],
    timed_out: bool,
    quarantined: list[tuple[str, str]],
    refused: list[tuple[dict[str, object], int]],
    writer: Callable[[str], dict[str, object] | None] | None = None,
) -> list[FindingRecord]:
    """The records of one run's findings; `refused` is --trace's (denial data, the caller's host pid);
    `writer` names the process that first changed a path, where the checkpoint's watch saw it."""
    from stockade.proxy.audit import KINDS, FindingRecord

    run = run_fields(launch, session, who)

    def record(kind: str, rule: str, **fields: object) -> FindingRecord:
        return FindingRecord(kind=kind, rule=rule, **run, **fields)  # type: ignore[arg-type]

    found = [record("limit", _limit_rule(launch, name), limit=name) for name in [*hits, *(["wall_time"] if timed_out else [])]]
    found += [
        record("moved", MOVED_RULE, path=original, moved_to=moved, process=writer(original) if writer is not None else None)
        for original, moved in quarantined
    ]
    for data, pid in refused:
        found.append(
            record(
                "file", str(data.get("rule") or ""), path=str(data.get("path") or ""), operation=str(data.get("operation") or "") or None,
                error=str(data.get("errno") or "") or None, process={"host_pid": pid} if pid > 0 else None,
            )
        )  # fmt: skip
    if len(found) <= MAX_RECORDS:
        return found
    kept, rest = found[: MAX_RECORDS - len(KINDS)], found[MAX_RECORDS - len(KINDS) :]
    for kind in KINDS:
        more = sum(1 for item in rest if item.kind == kind)
        if more:
            kept.append(record(kind, f"{more} more {kind} findings of this run, not written one by one (its summary counts them)", repeats=more))
    return kept


def run_fields(launch: Launch, session: str, who: dict[str, str | None]) -> dict[str, object]:
    """What every record a run writes itself says of the run: its session, its command as records keep
    it, and the MCP server, agent session and tool call it was."""
    from stockade.proxy.audit import redacted_command

    marks = {name: who.get(name) or None for name in ("mcp", "agent_session", "tool_call")}
    return {"session": session, "command": list(redacted_command(tuple(launch.command))), **marks}


def _limit_rule(launch: Launch, name: str) -> str:
    from stockade.profiles.units import format_duration, format_size

    if name == "memory":
        return f"[limits] memory {format_size(launch.memory or 0)} reached: the kernel killed a process of the run"
    if name == "pids":
        return f"[limits] pids {launch.pids} reached: new processes were refused"
    if name == "file_size":
        return f"[limits] file_size {format_size(launch.file_size or 0)} reached: the command was killed writing past it"
    if name == "wall_time":
        return f"[limits] wall_time {format_duration(launch.wall_time or 0)} reached: the whole sandbox was killed"
    return f"[limits] {name} reached"


def write(launch: Launch, records: list[FindingRecord]) -> str:
    """Append the records to the run's audit log (and hand them to the collector); a line saying
    what failed, or "" when all went well. The run goes on either way: its command has ended."""
    from stockade.proxy.audit import AuditError, AuditWriter

    log, collector = launch.audit
    lines: list[bytes] = []  # every line written, the chain's own notes among them: all go to the collector
    try:
        writer = AuditWriter(log)
    except AuditError as error:
        return f"{len(records)} finding(s) of this run are not in the audit log: {error}"
    writer.tee = lines.append
    written = 0
    try:
        for record in records:
            writer.write(record)
            written += 1
    except AuditError as error:
        return f"{len(records) - written} finding(s) of this run are not in the audit log: {error}"
    finally:
        writer.close()
    if collector and lines:
        return export(log, collector, lines)
    return ""


def export(log: str, collector: str, lines: list[bytes]) -> str:
    """Start the exporter and leave it: the settings come from this process's own environment, the
    user's (proxy/export_settings.py), never the sandbox's."""
    import json
    import os
    import subprocess
    import sys

    from stockade.proxy.export_settings import settings_for

    message = {"log": log, "settings": settings_for(collector, os.environ).to_dict(), "lines": [line.decode("ascii") for line in lines]}
    try:
        child = subprocess.Popen(
            [sys.executable, "-I", "-m", "stockade.proxy.daemon.export_once"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        )  # fmt: skip
        assert child.stdin is not None
        with child.stdin:
            child.stdin.write(json.dumps(message).encode())
    except OSError as error:
        return f"this run's findings are in the audit log but were not sent to the collector {collector}: {error.strerror or error}"
    child.returncode = 0  # never waited for: it outlives the run (and no warning that it still runs)
    return ""
