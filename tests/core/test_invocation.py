"""Invocation: one run's plain inputs, its defaults and session id, and no stray attributes; RunResult: what the run reports."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from stockade.core.invocation import Invocation, RunResult, new_session_id


def test_a_session_id_is_twelve_fresh_hex_digits() -> None:
    ids = {new_session_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[0-9a-f]{12}", one) for one in ids)


def test_the_defaults() -> None:
    env = {"PATH": "/bin"}
    request = Invocation(["make", "test"], "/proj", env)
    assert request.command == ["make", "test"] and request.cwd == "/proj" and request.env is env
    assert request.policy_file is None and request.profile is None
    assert (request.quiet, request.verbose, request.dry_run, request.reuse_plans) == (False, False, False, True)
    assert re.fullmatch(r"[0-9a-f]{12}", request.session_id)
    assert request.want_findings is False
    for output in ("policy", "locations", "troubles", "findings", "policy_note"):  # a backend writes none of them here
        assert not hasattr(request, output)


def test_every_option_is_kept() -> None:
    request = Invocation(
        ["true"], "/p", {}, policy_file="/p/x.toml", profile="python", quiet=True, verbose=True, dry_run=True, reuse_plans=False, session_id="abc"
    )
    assert (request.policy_file, request.profile, request.session_id) == ("/p/x.toml", "python", "abc")
    assert (request.quiet, request.verbose, request.dry_run, request.reuse_plans) == (True, True, True, False)


def test_each_run_gets_its_own_id_and_each_result_its_own_lists() -> None:
    one, two = Invocation(["a"], "/", {}), Invocation(["a"], "/", {})
    assert one.session_id != two.session_id
    first, second = RunResult(want_findings=True), RunResult(want_findings=True)
    first.troubles.append("the daemon died")
    assert first.findings is not None
    first.findings["files"] = []
    assert second.troubles == [] and second.findings == {}


def test_a_result_keeps_findings_only_when_they_were_asked_for() -> None:
    plain = RunResult()
    assert (plain.status, plain.policy, plain.locations, plain.policy_note, plain.troubles, plain.findings) == (0, None, None, "", [], None)
    assert RunResult(want_findings=True).findings == {}


def test_a_misspelled_field_is_an_error_not_a_new_attribute() -> None:
    request = Invocation(["a"], "/", {})
    with pytest.raises(AttributeError):
        request.dryrun = True  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        request.troubles = ["set by the backend"]  # type: ignore[attr-defined]  # inputs only
    result = RunResult()
    with pytest.raises(AttributeError):
        result.finding = {}  # type: ignore[attr-defined]


@pytest.mark.parametrize("options", [{"session_id": ""}, {}])
def test_an_empty_session_id_gets_a_new_one(options: dict[str, str]) -> None:
    assert len(Invocation(["a"], "/", {}, **options).session_id) == 12


def test_importing_it_loads_no_dataclasses() -> None:
    probe = "import sys, stockade.core.invocation as i; i.Invocation(['a'], '/', {}); i.RunResult(); print('dataclasses' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    )
    assert out.stdout.strip() == "False"
