"""`stockade audit`: what sandboxed commands tried to reach, and what was decided."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from stockade.cli.console import stdout
from stockade.cli.selection import select
from stockade.core.errors import UsageError
from stockade.core.locations import locate
from stockade.profiles.text import say, shown


def printable(value: object) -> str:
    """Control and format characters as visible escapes: an audit row can never drive the terminal."""
    return shown("" if value is None else str(value))


def _log_path(log: Path | None) -> Path:
    if log is not None:
        return log
    from stockade.core.errors import PolicyError

    try:
        policy = select().policy
    except PolicyError as error:
        raise PolicyError(f"{error.reason}; `stockade audit --log PATH` reads a log without the policy", file=error.file, line=error.line) from None
    return Path(policy.audit.log) if policy.audit.log else locate().default_audit_log


def audit(
    session: Annotated[str | None, typer.Option("--session", help="Only this session id (any part of its start that only it has).")] = None,
    denied: Annotated[bool, typer.Option("--denied", help="Only denials.")] = False,
    host: Annotated[str | None, typer.Option("--host", help="Only this host (or *.suffix).")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only newer records: 10m, 2h, 1d or an ISO time.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON record per line.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new records.")] = False,
    log: Annotated[Path | None, typer.Option("--log", help="Audit log file (default: the policy's).")] = None,
    mcp: Annotated[str | None, typer.Option("--mcp", help="Only this MCP server's runs (`stockade run --mcp NAME`).", metavar="NAME")] = None,
    tool_call: Annotated[
        str | None, typer.Option("--tool-call", help="Only the run of this agent tool call (its id in the transcript).", metavar="ID")
    ] = None,
    agent_session: Annotated[str | None, typer.Option("--agent-session", help="Only the runs of this agent session.", metavar="ID")] = None,
    pid: Annotated[int | None, typer.Option("--pid", help="Only what this process inside made, or those it started.", metavar="PID", min=1)] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Check that no line of the log (or an older file of it) was changed or removed.")] = False,
) -> None:
    from stockade.proxy.audit import AuditFilter, dropped_by_rotation, follow_records, parse_since, read_records

    if pid is not None and session is None:
        raise UsageError(f"--pid {pid}: every sandbox numbers its processes from 1; give the run's --session too")
    since_time = parse_since(since) if since else None
    path = _log_path(log)
    if verify:
        _verify(path, given=log is not None)
        return
    if log is not None and not follow and not os.path.lexists(path):  # a mistyped --log is no empty log (--follow waits for it)
        raise UsageError(f"no audit log at {log}; runs write to {locate().default_audit_log} unless [audit] log names another")
    if session is not None and not follow:
        session = _whole_session(path, session)
    where = AuditFilter(
        session=session, denied_only=denied, host=host, since=since_time, mcp=mcp, tool_call=tool_call, agent_session=agent_session, pid=pid
    )
    records = follow_records(path, where) if follow else read_records(path, where)
    if as_json or follow:
        for record in records:
            print(json.dumps(record, ensure_ascii=True) if as_json else _line(record), flush=True)
        return
    for lost in dropped_by_rotation(path):
        say(f"stockade: note: older records were deleted when the log was rotated: {lost.get('file')} "
            f"({lost.get('bytes')} bytes, records up to {lost.get('last_record') or 'an unknown time'})")  # fmt: skip
    ordered = sorted(records, key=lambda record: str(record.get("time", "")))  # a flow's record is written when it ends
    if not ordered:
        print(f"stockade: no matching audit records in {path}")
        return
    console = stdout()
    if not console.is_terminal and not os.environ.get("COLUMNS"):  # a pipe or a file: whole rows, not folded at a guess of 80
        console.width = max(console.width, WIDE)
    narrow = console.width < 110  # an 80-column terminal: one session's rows, bytes in one cell
    columns = ["time", "decision", "destination", "request", "rule", "bytes up/down"] if narrow else [
        "time", "session", "command", "decision", "destination", "request", "rule", "up", "down"]  # fmt: skip
    noted = any(record.get("incomplete") for record in ordered)
    if noted:
        columns.append("note")
    days = sorted({str(record.get("time", ""))[:10] for record in ordered})
    one_day = len(days) == 1 and len(days[0]) == 10
    title = f"records of {days[0]} (UTC)" if one_day else ""
    if narrow:
        title += ("; " if title else "") + "session and command: a wider terminal, or --json"
    table = Table(show_header=True, header_style="bold", expand=False, title=title or None)
    for column in columns:
        whole = column not in ("request", "rule", "command", "note")  # short ones are never folded, headers included
        folded = min(len(column), 12)
        table.add_column(column, overflow="fold", no_wrap=whole, min_width=None if whole else folded, ratio=3 if column == "rule" else None)
    for record in ordered:
        cells = _cells(record)
        if not one_day:  # records of several days: each row says its day
            stamp = printable(record.get("time", ""))
            cells[0] = f"{stamp[5:10]} {stamp[11:19]}" if len(stamp) >= 19 else stamp
        if narrow:
            moved = f"{_short(record.get('bytes_up'))}/{_short(record.get('bytes_down'))}" if cells[6] or cells[7] else ""
            cells = [cells[0], *cells[2:6], moved, cells[8]]
        else:
            cells.insert(2, _command(record))
        table.add_row(*(cells if noted else cells[:-1]))
    console.print(table)


WIDE = 400  # columns of a table printed to a pipe or a file


def _cells(record: dict[str, object]) -> list[str]:
    """Short cells for a terminal: time of day, 8-character session, host:port, first 40 characters of the path."""
    stamp = printable(record.get("time", ""))
    if "kind" in record:  # a finding of the run (proxy/audit.FindingRecord): a file or a limit, not a host
        destination, request = _finding_cells(record)
    else:
        destination = _middle(printable(f"{record.get('host')}:{record.get('port')}"), 40)
        path = printable(record.get("path") or "")
        method, scheme = record.get("method"), record.get("scheme")
        tunnelled = method == "CONNECT" and scheme in ("ssh", "tls", "tcp")  # what the tunnel turned out to carry
        verb = printable((scheme if tunnelled else method) or scheme or "")
        request = f"{verb[:40]} {path[:40]}{'...' if len(path) > 40 else ''}".strip()
    return [
        stamp[11:19] or stamp,
        printable(record.get("session", ""))[:8],
        printable(record.get("decision", "")),
        destination,
        request,
        printable(record.get("rule", "")),
        printable(record.get("bytes_up", "")),
        printable(record.get("bytes_down", "")),
        "incomplete: no end record (the daemon stopped under it)" if record.get("incomplete") else "",
    ]


def _finding_cells(record: dict[str, object]) -> tuple[str, str]:
    """(what, how) of a finding: the file (its end, where the name is) or the limit, and the kind."""
    kind = printable(record.get("kind"))
    if kind == "limit":
        return printable(record.get("limit")), "limit"
    if kind == "container":
        return _middle(printable(record.get("path") or "container engine"), 40), printable(record.get("operation") or "")[:60]
    what = _middle(printable(record.get("path") or ""), 40)
    if kind == "moved":
        return what, f"moved to {printable(os.path.basename(str(record.get('moved_to') or '')))[:40]}"
    return what, f"file {printable(record.get('operation') or '')}".strip()


def _whole_session(path: Path, prefix: str) -> str:
    """The one session id in the log that starts with `prefix` (the table shows 8 characters)."""
    from stockade.proxy.audit import read_records

    found = sorted({str(record.get("session", "")) for record in read_records(path) if str(record.get("session", "")).startswith(prefix)})
    if len(found) > 1:
        shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        raise UsageError(f"--session {prefix} starts {len(found)} sessions' ids ({shown}): give more of the one you mean")
    return found[0] if found else prefix


def _command(record: dict[str, object]) -> str:
    """The run's command in at most 30 characters (`sh -c SCRIPT` as its script)."""
    import shlex

    words = record.get("command")
    if not isinstance(words, list) or not words:
        return ""
    words = [str(word) for word in words]
    text = words[2].strip() if len(words) == 3 and words[1] == "-c" and words[0].endswith("sh") else shlex.join(words)
    process = record.get("process")
    if isinstance(process, dict) and process.get("exe"):  # the process inside that made it, first
        text = f"{os.path.basename(str(process['exe']))}[{process.get('pid')}] in {text}"
    text = printable(text)
    return text if len(text) <= 30 else text[:27] + "..."


def _middle(text: str, width: int) -> str:
    """`text` whole when it fits, else its start and end around an ellipsis: a host name is never broken."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep - keep // 2] + "…" + text[-(keep // 2) :]


def _short(value: object) -> str:
    """A byte count in four characters or so: 1.2K, 52M."""
    try:
        count = float(str(value or 0))
    except ValueError:
        return printable(value)
    for unit in ("", "K", "M", "G", "T"):
        if count < 1000:
            return f"{count:.0f}{unit}" if unit == "" or count >= 10 else f"{count:.1f}{unit}"
        count /= 1000
    return f"{count:.0f}P"


def _line(record: dict[str, object]) -> str:
    return "  ".join(cell for cell in _cells(record) if cell)


def _verify(path: Path, given: bool) -> None:
    """`--verify`: each generation's hash chain (proxy/audit_chain.py), oldest first."""
    from stockade.proxy.audit import KEEP_ROTATED, rotated_path
    from stockade.proxy.audit_chain import verify

    files = [rotated_path(path, generation) for generation in range(KEEP_ROTATED, -1, -1)]
    try:
        verdict = verify(files)
    except OSError as exc:
        raise UsageError(f"cannot read audit log {path}: {exc.strerror or exc}") from None
    if not verdict.files:
        if given:
            raise UsageError(f"no audit log at {path}")
        print(f"stockade: no audit log at {path} yet: nothing to verify")
        return
    torn = f"; {verdict.torn} line(s) cut short by a failed write, skipped" if verdict.torn else ""
    older = f"; {verdict.unchained} line(s) from before chaining began, unchecked" if verdict.unchained else ""
    if not verdict.ok:
        say(f"stockade: audit log NOT intact: {verdict.broken}")
        raise typer.Exit(1)
    print(f"stockade: audit log intact: {verdict.records} line(s) in {len(verdict.files)} file(s) chained, head {verdict.head}{torn}{older}")
