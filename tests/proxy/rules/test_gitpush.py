"""The command section of a git push, read as its bytes come, and the gate that holds the body back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stockade.proxy.rules.gitpush import CommandReader, PushGate, judge_refs

ZERO, ONE = "0" * 40, "1" * 40


def pkt(text: str) -> bytes:
    data = text.encode()
    return b"%04x" % (len(data) + 4) + data


def body(*refs: str, delete: bool = False) -> bytes:
    lines = [f"{ONE} {ZERO if delete else ONE} {ref}" + ("\0report-status\n" if n == 0 else "\n") for n, ref in enumerate(refs)]
    return b"".join(pkt(line) for line in lines) + b"0000" + b"PACK" + b"x" * 100


def read(data: bytes) -> CommandReader:
    reader = CommandReader()
    reader.feed(data)
    return reader


def test_commands_are_read_up_to_the_flush() -> None:
    reader = read(body("refs/heads/agent/x", "refs/heads/main"))
    assert reader.done and [c.ref for c in reader.commands] == ["refs/heads/agent/x", "refs/heads/main"]


@settings(deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=50), max_size=20))
def test_any_split_of_the_body_reads_the_same(cuts: list[int]) -> None:
    data = body("refs/heads/agent/x", "refs/tags/v1", delete=True)
    reader = CommandReader()
    position = 0
    for cut in cuts:
        reader.feed(data[position : position + cut])
        position += cut
    reader.feed(data[position:])
    assert reader.done and [c.ref for c in reader.commands] == ["refs/heads/agent/x", "refs/tags/v1"]
    assert all(c.deletes for c in reader.commands)


@settings(deadline=None)
@given(st.binary(max_size=300))
def test_garbage_is_never_read_as_an_allowed_push(data: bytes) -> None:
    reader = read(data)
    if reader.done:
        assert all(c.ref.startswith("refs/") for c in reader.commands)


def test_malformed_sections_are_refused() -> None:
    assert read(b"zzzz").error
    assert read(b"0003").error  # shorter than its own header
    assert read(pkt("push-cert\0report-status\n")).error  # signed pushes are not read
    assert read(pkt(f"{ONE} {ONE} refs/heads/a..b\n") + b"0000").error
    assert read(pkt(f"{ONE} {ONE} HEAD\n") + b"0000").error
    assert read(pkt(f"{ONE} {ONE}\n") + b"0000").error
    assert read(pkt(f"{ONE} {ONE} refs/heads/x\n") + pkt(f"shallow {ONE}\n") + b"0000").error  # shallow after a command
    long = CommandReader(limit=100)
    long.feed(b"".join(pkt(f"{ONE} {ONE} refs/heads/x{n}\n") for n in range(3)))
    assert long.error and "longer than" in long.error


def test_shallow_lines_before_the_commands_are_skipped() -> None:
    reader = read(pkt(f"shallow {ONE}\n") + body("refs/heads/main"))
    assert reader.done and [c.ref for c in reader.commands] == ["refs/heads/main"]


def test_a_push_is_all_or_nothing() -> None:
    commands = read(body("refs/heads/agent/x", "refs/heads/main")).commands
    allowed, rule, ref = judge_refs(("refs/heads/agent/*",), commands)
    assert not allowed and ref == "refs/heads/main" and "refs/heads/agent/x, refs/heads/main" in rule
    allowed, rule, ref = judge_refs(("refs/heads/agent/*", "refs/heads/main"), commands)
    assert allowed and ref is None and rule.startswith("http push refs/heads/agent/*, refs/heads/main")


def test_the_gate_holds_everything_until_judged() -> None:
    events: list[str] = []
    gate = PushGate(("refs/heads/agent/*",), lambda rule: events.append(rule), lambda rule, ref: events.append(f"no {ref}"))
    data = body("refs/heads/agent/x")
    assert gate(data[:10]) == [] and events == []  # held, and never an empty chunk
    out = gate(data[10:])
    assert out == [data] and events[0].startswith("http push")
    assert gate(b"more") == [b"more"] and gate(b"") == []

    refused: list[str] = []
    gate = PushGate(("refs/heads/agent/*",), refused.append, lambda rule, ref: refused.append(f"no {ref}"))
    assert gate(body("refs/heads/main")) == [] and refused == ["no refs/heads/main"]
    assert gate(b"PACK more") == []  # nothing after a refusal either

    ended: list[str] = []
    gate = PushGate(("refs/**",), ended.append, lambda rule, ref: ended.append(rule))
    assert gate(pkt(f"{ONE} {ONE} refs/heads/x\n")) == [] and gate(b"") == [] and "ended before" in ended[0]


def test_long_refs_cannot_stall_the_daemon() -> None:
    """A megabyte of refs thousands of components deep, judged against patterns with `**`, at once."""
    import time

    refused: list[str] = []
    gate = PushGate(("refs/**/agent/*", "refs/**/a/**/b"), refused.append, lambda rule, ref: refused.append(rule))
    deep = "refs/" + "a/" * 30000 + "c"
    started = time.monotonic()
    assert gate(b"".join(pkt(f"{ONE} {ONE} {deep}\n") for _ in range(16)) + b"0000") == []
    assert time.monotonic() - started < 2 and "longer than" in refused[0]
    allowed: list[str] = []
    gate = PushGate(("refs/**/agent/*",), allowed.append, lambda rule, ref: allowed.append(f"no {ref}"))
    assert gate(body("refs/heads/x/agent/y")) and allowed[0].startswith("http push refs/**/agent/*")  # control


def test_push_options_are_refused_on_any_line() -> None:
    assert "push options" in str(read(pkt(f"{ONE} {ONE} refs/heads/x\0report-status push-options\n") + b"0000").error)
    later = pkt(f"{ONE} {ONE} refs/heads/x\0report-status\n") + pkt(f"{ONE} {ONE} refs/heads/y\0push-options\n") + b"0000"
    assert "push options" in str(read(later).error)  # receive-pack reads capabilities on every line
    assert read(body("refs/heads/x")).done  # control: capabilities without them pass
