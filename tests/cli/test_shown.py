"""Every line stockade prints about a run shows outside text escaped (profiles/text.py)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from stockade.core.errors import PolicyError

HOSTILE = "".join(chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]) + "\x1b[2J\x1b]0;pwned\x07\u202e\u200b\ud800"


def raw(text: str) -> list[str]:
    return [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Cs")]


def test_an_error_line_is_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from stockade.cli.main import main

    # As a real argv arrives: no NUL, undecodable bytes as surrogate escapes (\udcff).
    name = HOSTILE.replace(chr(0), "").replace("\ud800", "\udcff")
    code = main(["run", "--policy", f"/nonexistent/{name}.toml", "--", "true"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("stockade: error: ") and raw(err) == [], repr(err)


def test_the_ci_line_is_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stockade.cli import ci
    from stockade.core.invocation import Invocation

    request = Invocation(["true"], str(tmp_path), {})  # failed before its policy was read

    def failing() -> int:
        raise PolicyError(f"bad {HOSTILE}")

    with pytest.raises(PolicyError):
        ci.run_ci(request, failing, report=None, announce=True)
    err = capsys.readouterr().err
    assert "stockade: ci: stockade could not run the command" in err and raw(err) == [], repr(err)


def test_a_denial_body_is_shown_escaped() -> None:
    from stockade.proxy.filter.refusal import text_response as _text_response

    one_line = HOSTILE.replace("\n", "")  # the body's own lines stay lines
    body = _text_response(403, f"stockade: denied {one_line}\nadd it under [network]").get_text() or ""
    assert raw(body) == [] and body.count("\n") == 1, repr(body)


def test_the_hook_s_refusal_is_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from stockade.cli.hook import _blocked

    assert _blocked("claude", f"cannot parse {HOSTILE}") == 2
    err = capsys.readouterr().err
    assert err.startswith("stockade hook: blocked: cannot parse") and raw(err) == [], repr(err)


# A cloned repository's .stockade.toml chooses the paths and patterns that `check` and `explain`
# print: the untrusted note (what was ignored) and explain's table (what is unreadable).
CLONED = '[filesystem]\nallow_write = ["~/x\\u001b]0;pwned\\u0007y\\u009b2J"]\ndeny_read = ["z\\u001b[2J\\u202e"]\n'


@pytest.mark.parametrize("command", [["check"], ["explain"]])
def test_check_and_explain_show_a_cloned_policy_escaped(project: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    from stockade.cli.main import main

    (project / ".stockade.toml").write_text(CLONED)
    assert main(command) == 0
    captured = capsys.readouterr()
    both = captured.out + captured.err
    flat = "".join(both.split())  # explain's console wraps at its width, within words too
    assert "nottrusted" in flat and "0;pwned" in flat  # the control: the lines are there
    assert raw(both) == [], repr(both)


@pytest.mark.parametrize("command", [["check", "--json"], ["explain", "--json"], ["check"]])
def test_json_and_toml_of_a_cloned_policy_are_escaped_and_still_parse(project: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    import json
    import tomllib

    from stockade.cli.main import main

    (project / ".stockade.toml").write_text(CLONED.replace("\\u202e", "\\u202e\\U000e0001"))
    assert main(command) == 0
    out = capsys.readouterr().out
    assert raw(out) == [], repr(out)
    data = json.loads(out) if "--json" in command else tomllib.loads(out)
    strings = "".join(_strings(data))
    assert "\u202e\U000e0001" in strings and "\x1b[2J" in strings  # the same values, only spelled escaped


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []
