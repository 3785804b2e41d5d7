"""The asking side of approvals: the prompt's text and how a typed answer is read."""

from __future__ import annotations

import pytest

from stockade.proxy.asking import choice, question_text
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
