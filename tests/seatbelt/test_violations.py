"""Parsing `log stream --style ndjson` denials, and the policy line each one points to.

`fixtures/log-stream.ndjson` holds sample lines written in the shape macOS
prints (kernel `Sandbox:` messages with the run's tag on their own line or
at the end), plus lines that must be ignored.
"""

from __future__ import annotations

import pytest

from stockade.seatbelt.violations import (
    Violation,
    display_path,
    file_findings,
    hint,
    merge,
    parse_line,
    parse_lines,
    parse_message,
    printable,
    summary,
)
from tests.seatbelt import seatbelt_support as sup

TAG = "stockade-5f1c2a9e4b7d3c60"
LINES = (sup.FIXTURES / "log-stream.ndjson").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def parsed() -> list[Violation]:
    return parse_lines(LINES, TAG)


@pytest.fixture(scope="module")
def offline() -> sup.Case:
    return sup.builtin_case("default")


@pytest.fixture(scope="module")
def proxied() -> sup.Case:
    return sup.builtin_case("npm")


def test_parses_only_this_runs_denials(parsed: list[Violation]) -> None:
    assert len(parsed) == 16
    assert all(v.target != "/etc/master.passwd" for v in parsed)  # another run's tag
    first = parsed[0]
    assert first == Violation(process="cat", operation="file-read-data", target="/Users/test/.ssh/id_test", pid=48211, count=1)


def test_duplicates_and_tag_at_line_end(parsed: list[Violation]) -> None:
    assert parsed[1] == Violation(process="cat", operation="file-read-data", target="/Users/test/.ssh/id_test", pid=None, count=3)
    assert parsed[2].target == "/Users/test/.aws"  # the trailing tag is not part of the path
    merged = merge(parsed)
    assert merged[0].count == 4 and len(merged) == 15


def test_process_names_with_spaces_and_parentheses(parsed: list[Violation]) -> None:
    chrome = next(v for v in parsed if v.pid == 48221)
    assert chrome.process == "Google Chrome Helper (Renderer)"
    assert chrome.target == "/Users/test/proj/sub/.env"


def test_non_violations_are_ignored() -> None:
    assert parse_line(LINES[0], TAG) is None  # log's banner
    assert parse_line("", TAG) is None
    assert parse_line("{", TAG) is None
    assert parse_line('["x"]', TAG) is None
    assert parse_line('{"eventMessage": 3}', TAG) is None
    assert parse_message(f"kernel: unrelated {TAG}", TAG) is None
    assert parse_message("Sandbox: cat(1) deny(1) file-read-data /x", TAG) is None  # untagged


def test_operation_without_target() -> None:
    v = parse_message(f"Sandbox: sh(7) deny(1) lsopen\n{TAG}", TAG)
    assert v == Violation(process="sh", operation="lsopen", target="", pid=7)


def _hint_for(parsed: list[Violation], pid: int, case: sup.Case) -> str:
    return hint(next(v for v in parsed if v.pid == pid), case.profile.index)


def test_hint_deny_read(parsed: list[Violation], offline: sup.Case) -> None:
    text = _hint_for(parsed, 48211, offline)
    assert 'deny_read "~/.ssh"' in text and "builtin:default" in text
    assert 'deny_read "~/proj/**/.env"' in _hint_for(parsed, 48221, offline)
    assert 'deny_read "~/.aws"' in _hint_for(parsed, 48213, offline)  # a rename is blocked by deny_read too


def test_hint_allow_write(parsed: list[Violation], offline: sup.Case) -> None:
    assert _hint_for(parsed, 48214, offline) == 'add "~/.cache/tool" to [filesystem] allow_write in builtin:default'
    assert '"/tmp/shared-scratch"' in _hint_for(parsed, 48222, offline)  # /private/tmp written as /tmp


def test_hint_floor_and_guards(parsed: list[Violation], offline: sup.Case) -> None:
    assert _hint_for(parsed, 48215, offline).startswith('mandatory floor: "~/proj/.git/hooks"')
    assert "cannot be created" in _hint_for(parsed, 48224, offline)
    assert "hidden" in _hint_for(parsed, 48223, offline)


def test_hint_network(parsed: list[Violation], offline: sup.Case, proxied: sup.Case) -> None:
    assert "the network is off" in _hint_for(parsed, 48216, offline)
    assert "198.51.100.1:80" in _hint_for(parsed, 48216, offline)
    assert "only the proxy" in _hint_for(parsed, 48216, proxied)
    assert '"/tmp/agent.sock" to [network] unix_sockets' in _hint_for(parsed, 48217, proxied)
    assert 'mode = "allowlist"' in _hint_for(parsed, 48217, offline)


def test_hint_never_allowed(parsed: list[Violation], offline: sup.Case) -> None:
    for pid in (48218, 48219, 48220, 48225):
        assert "never" in _hint_for(parsed, pid, offline) or "no policy line" in _hint_for(parsed, pid, offline)


def test_file_denials_are_handed_over_in_the_shape_linux_gives(parsed: list[Violation], offline: sup.Case) -> None:
    found = file_findings(parsed, offline.profile.index)
    assert found and all(set(item) == {"path", "operation", "syscall", "errno", "rule", "wall"} for item in found)
    assert all(item["operation"] in ("read", "write") and str(item["syscall"]).startswith("file-") for item in found)
    assert all(not str(item["path"]).startswith("/private/tmp/") for item in found)  # as a user spells it
    walls = {item["wall"] for item in found}
    assert "deny_read" in walls and "outside_write" in walls, found


def test_summary_is_safe_for_a_terminal(parsed: list[Violation], offline: sup.Case) -> None:
    lines = summary(parsed, offline.profile.index)
    assert lines[0] == "stockade: the sandbox denied 18 operations (policy: builtin:default):"
    assert any("(cat x4)" in line for line in lines)
    assert all(line.isprintable() for line in lines)
    assert any("\\x1b]52" in line for line in lines)
    short = summary(parsed, offline.profile.index, limit=3)
    assert len(short) == 5 and short[-1] == "  ... and 12 more"
    assert summary([], offline.profile.index) == []
    noise = Violation(process="date", operation="mach-lookup", target="com.apple.diagnosticd")
    assert summary([noise], offline.profile.index) == []


def test_helpers() -> None:
    assert display_path("/Users/test/x", "/Users/test") == "~/x"
    assert display_path("/Users/testing", "/Users/test") == "/Users/testing"
    assert printable("a\nb\x1b") == "a\\nb\\x1b"
