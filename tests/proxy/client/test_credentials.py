"""Reading a run's credentials outside the sandbox: each source, each failure as one line with exit 2, no value shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.errors import PolicyError
from stockade.proxy.client.credentials import PLACEHOLDER_PREFIX, plan_entry, resolve

VALUE = "tok_1234567890abcdef"


def entry(source: str, where: list[str], origin: str = "/p/policy.toml") -> list[object]:
    return plan_entry("GH_TOKEN", source, tuple(where), ("api.test",), "Authorization", None, origin)


def test_each_source_gives_its_value_and_a_fresh_placeholder(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"{VALUE}\n")
    found = resolve([entry("env", ["HOST_TOKEN"]), entry("file", [str(token)]), entry("command", ["printf", f"  {VALUE}\n"])], {"HOST_TOKEN": VALUE})
    assert [one.value for one in found] == [VALUE] * 3
    assert all(one.placeholder.startswith(PLACEHOLDER_PREFIX + "gh-token-") for one in found)
    assert len({one.placeholder for one in found}) == 3  # one per credential and per run
    again = resolve([entry("env", ["HOST_TOKEN"])], {"HOST_TOKEN": VALUE})
    assert again[0].placeholder != found[0].placeholder
    assert VALUE not in repr(found) and VALUE not in repr(found[0])  # nothing prints it
    assert found[0].to_dict()["value"] == VALUE  # what goes to the daemon


@pytest.mark.parametrize(
    ("source", "where", "env", "words"),
    [
        ("env", ["MISSING"], {}, "the variable MISSING is not set"),
        ("env", ["EMPTY"], {"EMPTY": "  "}, "is empty"),
        ("env", ["TWO"], {"TWO": "a\nX-Injected: 1"}, "line break"),
        ("file", ["/nonexistent/x"], {}, "cannot read /nonexistent/x"),
        ("command", ["false"], {}, "exited with 1"),
        ("command", ["sh", "-c", "echo nope >&2; exit 3"], {}, "exited with 3: nope"),
        ("command", ["/nonexistent-command"], {}, "was not found"),
    ],
)
def test_each_failure_is_a_policy_error_naming_the_credential(source: str, where: list[str], env: dict[str, str], words: str) -> None:
    with pytest.raises(PolicyError) as caught:
        resolve([entry(source, where)], env)
    assert words in str(caught.value) and "[credentials.GH_TOKEN]" in str(caught.value)
    assert caught.value.exit_code == 2 and str(caught.value.file) == "/p/policy.toml"


def test_a_value_too_long_for_a_header_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_text("x" * (20 << 10))
    with pytest.raises(PolicyError, match="longer than 16 KiB"):
        resolve([entry("file", [str(big)])], {})
