from __future__ import annotations

import pytest

from stockade.proxy import summary


@pytest.mark.parametrize(
    "denial, expected",
    [
        pytest.param(
            {"host": "pypi.org", "port": 443, "rule": "no allow rule matches", "hint": 'allow = ["pypi.org"]', "count": 1},
            "network: denied pypi.org:443; to allow it, run: stockade allow pypi.org --policy /p/.stockade.toml",
            id="hint",
        ),
        pytest.param(
            {"host": "10.0.0.1", "port": 80, "rule": "private address", "hint": None, "count": 3},
            "network: denied 10.0.0.1:80 (3 times) (private address); no policy change allows this",
            id="no hint, counted",
        ),
        pytest.param(
            {"host": "x.test", "port": 443, "rule": "r", "hint": "not a rule line"},
            "network: denied x.test:443; to allow it, add not a rule line under [network] in /p/.stockade.toml",
            id="hint that names no rule",
        ),
    ],
)
def test_describe_denial(denial: dict[str, object], expected: str) -> None:
    assert summary.describe_denial(denial, "/p/.stockade.toml") == expected


@pytest.mark.parametrize(
    "refused, expected",
    [
        pytest.param(None, "", id="none"),
        pytest.param({"count": 0, "why": "w"}, "", id="zero"),
        pytest.param({"count": "2", "why": "w"}, "", id="not a number"),
        pytest.param({"count": 1, "why": "too many"}, "network: 1 connection refused with a 503: too many", id="one"),
        pytest.param({"count": 2, "why": "too many"}, "network: 2 connections refused with a 503: too many", id="two"),
    ],
)
def test_refused_line(refused: object, expected: str) -> None:
    assert summary.refused_line(refused) == expected


def test_trouble_lines_name_the_cause() -> None:
    assert "(connection refused)" in summary.daemon_gone(ConnectionRefusedError("connection refused"))
    assert summary.audit_failed("disk full") == "the audit log could not be written (disk full): every request after that was refused"


def test_http_denials_say_which_table_takes_the_entry_and_denials_say_where_they_are_listed() -> None:
    line = summary.describe_denial(
        {"host": "api.test", "port": 443, "rule": "no HTTP rule allows PUT /x", "hint": '[network.http."api.test"] allow = ["PUT /x"]'},
        "/p/.stockade.toml",
    )
    assert line.endswith('to allow it, add "PUT /x" to allow under [network.http."api.test"] in /p/.stockade.toml'), line
    listed = summary.describe_denial({"host": "api.test", "port": 443, "rule": "http deny * /x", "hint": ""}, "/p/.stockade.toml")
    assert listed.endswith("it is under deny in /p/.stockade.toml"), listed
    plain = summary.describe_denial({"host": "b.test", "port": 443, "rule": 'deny "b.test"', "hint": ""}, "/p/.stockade.toml")
    assert plain.endswith("it is under deny in /p/.stockade.toml"), plain


def test_a_profile_runs_hint_says_to_run_without_the_profile_afterwards() -> None:
    denial = {"host": "example.com", "port": 443, "rule": "no allow rule matches", "hint": 'allow = ["example.com"]'}
    line = summary.describe_denial(denial, "builtin:github")
    assert "stockade allow example.com --profile github" in line
    assert "then run without --profile, which reads that file" in line
    control = summary.describe_denial(denial, "/p/.stockade.toml")  # a file's run: the command alone is enough
    assert control.endswith("stockade allow example.com --policy /p/.stockade.toml")


def test_a_credential_denial_says_which_table_decides_where_it_goes() -> None:
    denial = {"host": "api.test", "port": 443, "rule": "credential GH_TOKEN in the header x-debug, where it may not travel", "hint": ""}
    line = summary.describe_denial(denial, "/p/policy.toml")
    assert line.endswith("where it may go is [credentials.GH_TOKEN] in /p/policy.toml")
    assert "no policy change" not in line


def test_a_refused_secret_of_a_tool_file_names_the_file_not_a_credentials_table() -> None:
    from stockade.proxy.summary import credential_fix

    assert credential_fix("~/.npmrc#2", "/p/.stockade.toml") == (
        "it is a secret of your ~/.npmrc, which goes only to the host it is for (`stockade explain` lists it)"
    )
    assert credential_fix("GH_TOKEN", "/p/.stockade.toml") == "where it may go is [credentials.GH_TOKEN] in /p/.stockade.toml"


def test_a_name_the_sandboxs_resolver_refused_is_said_without_a_port() -> None:
    line = summary.describe_denial(
        {"host": "example.com", "port": 0, "rule": "no allow rule matches", "hint": 'allow = ["example.com"]', "count": 2}, "/p/.stockade.toml"
    )
    assert line.startswith("network: denied example.com (its address was asked for) (2 times); to allow it, run: stockade allow example.com")


def test_the_resolvers_counts_are_read_from_the_end_reply_and_said_with_the_session() -> None:
    assert summary.names_of({"answered": 3, "refused": 1}) == (3, 1)
    for wrong in (None, [], {"answered": "3", "refused": 1}, {"answered": True, "refused": 0}, {"answered": 1}):
        assert summary.names_of(wrong) is None
    assert summary.names_line((1, 2), "abc123") == (
        "network: the sandbox's resolver answered 1 name and refused 2; each query is in the audit log (stockade audit --session abc123)"
    )


def test_an_ipv6_destination_is_shown_in_brackets_and_a_ping_without_a_port() -> None:
    v6 = summary.describe_denial({"host": "2001:db8::1", "port": 4500, "rule": "UDP does not leave the sandbox: only TCP ..."}, "p.toml")
    assert v6.startswith("network: denied [2001:db8::1]:4500 (UDP does not leave the sandbox")
    ping = summary.describe_denial({"host": "x.test", "port": 0, "rule": "ping (ICMP echo) does not leave the sandbox: ..."}, "p.toml")
    assert ping.startswith("network: denied x.test (ping (ICMP echo)")
    name = summary.describe_denial({"host": "x.test", "port": 0, "rule": "A: no allow rule matches", "hint": ""}, "p.toml")
    assert name.startswith("network: denied x.test (its address was asked for)")  # control: a refused name
