"""The asking side of approvals: the prompt's text and how a typed answer is read."""

from __future__ import annotations

import pytest

from stockade.proxy.client.asking import choice, question_text
from stockade.proxy.control import SessionSpec

QUESTION = {"id": "ab12", "rule": "pypi.org", "host": "pypi.org", "port": 443, "command": ["pip", "install", "x"],
            "origin": "/p/.stockade.toml", "seconds_left": 60}  # fmt: skip


def test_the_prompt_says_what_wants_which_host_and_how_long_it_waits() -> None:
    said, asked = question_text(QUESTION)
    assert said == "stockade: `pip install x` wants pypi.org:443, which /p/.stockade.toml does not allow."
    assert "allow pypi.org?" in asked and "[o]nce" in asked and "(60 s)" in asked


def test_what_the_sandbox_chose_is_shown_safely() -> None:
    said, _asked = question_text({**QUESTION, "command": ["curl", "\x1b]52;c;evil\x07", "x" * 500]})
    assert "\x1b" not in said and len(said) < 300


@pytest.mark.parametrize(("typed", "answer"), [("o\n", "once"), ("R", "run"), (" always ", "always"), ("\n", "deny"), ("y", "deny"), ("", "deny")])
def test_anything_but_a_choice_is_no(typed: str, answer: str) -> None:
    assert choice(typed) == answer


@pytest.mark.parametrize("value", [-1, 3601, "60", True, 1.5])
def test_the_spec_takes_a_bounded_number_of_seconds(value: object) -> None:
    spec = SessionSpec("s", ["x"], "/p", audit_path="/a", approve=60).to_dict()
    assert SessionSpec.from_dict(spec).approve == 60
    with pytest.raises(ValueError, match="spec.approve"):
        SessionSpec.from_dict({**spec, "approve": value})


def _asked_at_a_pty(keys: bytes, question: dict[str, object] | None = None) -> tuple[str | None, str]:
    """(the answer, what the terminal showed): the question put on a real pty, `keys` typed at it."""
    import os
    import pty
    import threading

    from stockade.proxy.client import asking

    master, slave = pty.openpty()
    result: list[str | None] = []
    seconds = {**(question or QUESTION), "seconds_left": 10}
    worker = threading.Thread(target=lambda: result.append(asking._answer(slave, seconds, threading.Event())))
    worker.start()
    shown = b""
    sent = False
    while worker.is_alive():
        worker.join(0.05)
        try:
            import select

            while select.select([master], [], [], 0)[0]:
                shown += os.read(master, 65536)
        except OSError:
            break
        if not sent and b" s): " in shown:  # the prompt is up: keys typed before it are thrown away
            os.write(master, keys)
            sent = True
    os.close(slave)
    os.close(master)
    return result[0], shown.decode("utf-8", "replace")


@pytest.mark.parametrize(("keys", "answer"), [(b"o\n", "once"), (b"r\n", "run"), (b"\x04", "deny"), (b"a\npypi.org\n", "always"),
                                              (b"always\nPyPI.org.\n", "always")])  # fmt: skip
def test_always_is_taken_only_with_the_hosts_name_typed(keys: bytes, answer: str) -> None:
    assert _asked_at_a_pty(keys)[0] == answer


def test_always_for_a_name_other_than_the_one_asked_for_allows_this_run_only() -> None:
    """Issue 34: a command draws "allow registry.npmjs.org?" ahead of stockade's question about evil.test; the user
    answers always believing it; the name typed is the trusted one, so evil.test is not written into the policy."""
    answer, shown = _asked_at_a_pty(b"a\nregistry.npmjs.org\n", {**QUESTION, "host": "evil.test", "rule": "evil.test"})
    assert answer == "run"
    assert "to add evil.test to the policy for good" in shown and "evil.test is allowed for this run only" in shown


def test_the_question_is_drawn_on_a_terminal_put_right_first() -> None:
    """Whatever the command left: a scroll region, a line-drawing character set, hidden text, lines drawn below."""
    _answer, shown = _asked_at_a_pty(b"o\n")
    start = shown.index("stockade: `pip install x`")
    for sequence in ("\x1b[r", "\x1b[0m", "\x1b(B", "\x1b[?25h", "\x1b[J"):
        assert sequence in shown[:start], sequence
