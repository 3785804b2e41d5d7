"""`stockade approve`: answer, from another terminal, the requests a run is holding for you.

A run started with `--approve` (or at a terminal) holds each request to a
host its policy does not allow while it waits for an answer
(proxy/filter/approvals.py). This command lists those questions and asks for each,
or answers one given by its id (for scripts), with the same choices as the
run's own prompt: once, for this run, always (written to the run's policy
file, as `stockade allow` does), or no. Only the daemon's own user reaches
its control socket; a sandbox never does.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from stockade.core.errors import UsageError
from stockade.core.locations import locate
from stockade.proxy.client.asking import choice, question_text, send_answer

ANSWER_WORDS = ("once", "run", "always", "deny")


def approve(
    question: Annotated[str | None, typer.Argument(help="The id of one question (as the list shows it).", metavar="ID")] = None,
    answer: Annotated[str | None, typer.Argument(help="once, run, always or deny.", metavar="ANSWER")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="Keep asking as new requests wait, until Ctrl-C.")] = False,
) -> None:
    from stockade.proxy.client.launch import daemon_files

    files = daemon_files(locate())
    if question is not None:
        if answer is None:
            raise UsageError(f"approve: give the answer after the id: one of {', '.join(ANSWER_WORDS)}")
        if answer not in ANSWER_WORDS:
            raise UsageError(f"approve: unknown answer {answer!r}: give one of {', '.join(ANSWER_WORDS)}")
        waiting = {str(item.get("id")): item for item in _questions(files, [], 0)}
        if question not in waiting:
            raise UsageError(f"approve: no request waits under id {question!r} (answered, or its time ran out); `stockade approve` lists them")
        said = send_answer(files, waiting[question], answer)
        print(said or f"stockade: {answer}: {waiting[question].get('rule')}")
        return
    if answer is not None:
        raise UsageError("approve: give an id before the answer")
    known: list[str] = []
    if watch:
        print("stockade: waiting for requests to answer (Ctrl-C to stop)", flush=True)
    while True:
        found = _questions(files, known, 25 if watch else 0)
        if not found and not watch:
            if not known:
                print("stockade: no request is waiting for an answer")
            return
        for item in found:
            known.append(str(item.get("id")))
            print(f"[{item.get('id')}] " + "\n".join(question_text(item)), end="", flush=True)
            if not sys.stdin.isatty():
                print(f"\nstockade: answer with: stockade approve {item.get('id')} once|run|always|deny")
                continue
            typed = sys.stdin.readline()
            said = send_answer(files, item, choice(typed))
            if said:
                print(said)


def _questions(files: Any, known: list[str], wait: float) -> list[dict[str, Any]]:
    """The open questions of every run of this user; none when no daemon runs."""
    from stockade.proxy.client.launch import connect, exchange

    try:
        conn = connect(files, timeout=wait + 10)
    except OSError:
        return []
    try:
        reply = exchange(conn, {"op": "questions", "session_id": "", "known": known[-256:], "wait": wait})
    except OSError:
        return []
    finally:
        conn.close()
    found = reply.get("questions") if reply.get("ok") else None
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []
