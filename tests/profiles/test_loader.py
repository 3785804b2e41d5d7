"""Policy files: every load error names the file, the line and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.errors import PolicyError
from stockade.profiles.loader import builtin_names, load_file, parse_layer
from stockade.profiles.model import NetworkMode

ERRORS = [
    pytest.param('[network]\nalow = ["x.com"]\n', 2, "unknown key 'alow' in [network] (did you mean 'allow'?)", id="unknown-key-suggestion"),
    pytest.param('extnds = ["default"]\n', 1, "unknown key 'extnds' at the top level (did you mean 'extends'?)", id="unknown-top-key"),
    pytest.param('[netwrok]\nmode = "none"\n', 1, "unknown table [netwrok] (did you mean [network]?)", id="unknown-table"),
    pytest.param('[filesystem]\nallow_write = "."\n', 2, "'filesystem.allow_write' must be a list of paths", id="wrong-type-list"),
    pytest.param('[network]\nmode = "closed"\n', 2, 'must be "none", "allowlist" or "open", not \'closed\'', id="bad-mode"),
    pytest.param('[limits]\nmemory = "4X"\n', 2, "bad size '4X'", id="bad-size"),
    pytest.param('[limits]\nwall_time = "soon"\n', 2, "bad duration 'soon'", id="bad-duration"),
    pytest.param("[limits]\npids = -3\n", 2, "must be a positive integer", id="negative-pids"),
    pytest.param("[limits]\npids = true\n", 2, "must be a positive integer", id="bool-pids"),
    pytest.param('[network]\nallow = [\n  "ok.test",\n  "bad..name",\n]\n', 4, "'bad..name' is not a valid host name", id="bad-domain-line-of-item"),
    pytest.param('[network]\nallow = ["*"]\n', 2, 'use mode = "open"', id="bare-star"),
    pytest.param('[network]\nallow = ["a.*.test"]\n', 2, "only allowed as the first label", id="inner-star"),
    pytest.param('[network]\nallow = ["x.test:99999"]\n', 2, "port must be a number from 1 to 65535", id="bad-port"),
    pytest.param('[network]\ndeny = ["10.0.0.0/33"]\n', 2, "not a valid CIDR block", id="bad-cidr"),
    pytest.param('[filesystem]\nallow_write = ["/tmp/../etc"]\n', 2, "climbs with '..'", id="dotdot"),
    pytest.param('[filesystem]\ndeny_read = [".."]\n', 2, "climbs with '..'", id="dotdot-deny"),
    pytest.param('[filesystem]\nallow_write = ["./build/*"]\n', 2, "globs are only allowed in deny_read and deny_write", id="glob-in-allow"),
    pytest.param('[filesystem]\nallow_write = ["~bob/x"]\n', 2, "only '~' and '~/...'", id="tilde-user"),
    pytest.param('[env]\nset = { "1BAD" = "x" }\n', 2, "'1BAD' is not a variable name", id="bad-env-name"),
    pytest.param("[env]\nset = { CI = 1 }\n", 2, "value of CI must be a string", id="env-not-string"),
    pytest.param('[env]\npass = ["A-B"]\n', 2, "'A-B' is not a variable name", id="bad-pass-name"),
    pytest.param('[network]\nmode = "none"\n[network]\n', 3, "not valid TOML", id="toml-duplicate-table"),
    pytest.param("[network\n", 1, "not valid TOML", id="toml-syntax"),
    pytest.param("# comment\n\n[audit]\nlog = 3\n", 4, "must be a path string", id="audit-not-path"),
]


@pytest.mark.parametrize(("text", "line", "message"), ERRORS)
def test_errors_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    policy = tmp_path / ".stockade.toml"
    policy.write_text(text)
    with pytest.raises(PolicyError) as caught:
        load_file(policy, home=tmp_path)
    assert str(caught.value).startswith(f"{policy}:{line}: "), str(caught.value)
    assert message in str(caught.value)


def test_paths_resolve_against_the_file_and_home(tmp_path: Path) -> None:
    layer = parse_layer(
        '[filesystem]\nallow_write = [".", "./build/", "~/.cache/pip", "/abs//x"]\ndeny_read = ["**/.env"]\n',
        "p.toml",
        base=tmp_path / "proj",
        home=tmp_path / "home",
    )
    fs = layer.values["filesystem"]
    assert fs["allow_write"] == (str(tmp_path / "proj"), str(tmp_path / "proj/build"), str(tmp_path / "home/.cache/pip"), "/abs/x")
    assert fs["deny_read"] == (str(tmp_path / "proj/**/.env"),)


def test_domains_are_canonical() -> None:
    layer = parse_layer(
        '[network]\nallow = ["PyPI.org.", "*.Example.COM:443", "bücher.test", "[2001:DB8::1]:8443", "10.1.2.3/16"]\n',
        "p",
        base=Path("/"),
        home=Path("/h"),
    )
    assert layer.values["network"]["allow"] == ("pypi.org", "*.example.com:443", "xn--bcher-kva.test", "[2001:db8::1]:8443", "10.1.0.0/16")


def test_mode_is_an_enum() -> None:
    layer = parse_layer('[network]\nmode = "open"\n', "p", base=Path("/"), home=Path("/h"))
    assert layer.values["network"]["mode"] is NetworkMode.OPEN


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_parses(name: str) -> None:
    from stockade.profiles.loader import load_builtin

    layer = load_builtin(name, project_dir=Path("/p"), home=Path("/h"))
    assert layer.source == f"builtin:{name}"


def test_builtins_include_the_required_ones() -> None:
    assert {"default", "offline", "pypi", "npm", "github", "agent"} <= set(builtin_names())


HTTP_POLICY = """[network]
allow = ["api.test"]

[network.http."API.test"]
allow = ["HEAD,GET /repos/**"]
deny = ["* /repos/*/admin"]

[network.http."*.cdn.test"]
allow = ["GET /**"]
"""


def test_http_tables_are_read_in_one_spelling(tmp_path: Path) -> None:
    layer = parse_layer(HTTP_POLICY, str(tmp_path / "p.toml"), base=tmp_path, home=tmp_path)
    assert layer.values["network"]["http"] == {
        "api.test": (("GET,HEAD /repos/**",), ("* /repos/*/admin",), ()),
        "*.cdn.test": (("GET /**",), (), ()),
    }


@pytest.mark.parametrize(
    "text, line, message",
    [
        ('[network.http."api.test"]\nallow = ["GET /a", "POST b"]\n', 2, "must start with /"),
        ('[network.http."api.test"]\nallowed = ["GET /a"]\n', 2, "unknown key 'allowed'"),
        ('[network.http."api.test"]\nallow = "GET /a"\n', 2, "must be a list"),
        ('[network.http."10.0.0.1"]\nallow = ["GET /a"]\n', 1, "name hosts, not addresses"),  # the header names the host
        ('[network.http."a b"]\nallow = ["GET /a"]\n', 1, "not a valid host name"),
        ("[network]\nhttp = 3\n", 2, "'network.http' must be a table"),
        ('[network.http]\n"api.test" = 3\n', 1, "must be a table with allow and deny"),
    ],
)
def test_http_table_errors_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    with pytest.raises(PolicyError, match=message) as caught:
        parse_layer(text, str(tmp_path / "p.toml"), base=tmp_path, home=tmp_path)
    assert caught.value.line == line, caught.value


@pytest.mark.parametrize("value", ["4", '"512"', '"512K"', '"15M"'])
def test_a_memory_limit_too_small_to_start_anything_is_refused_with_its_line(tmp_path: Path, value: str) -> None:
    with pytest.raises(PolicyError, match="too little for any command to start") as caught:
        parse_layer(f"[limits]\nmemory = {value}\n", str(tmp_path / "p.toml"), base=tmp_path, home=tmp_path)
    assert caught.value.line == 2


def test_a_memory_limit_of_sixteen_megabytes_or_more_is_kept(tmp_path: Path) -> None:
    layer = parse_layer('[limits]\nmemory = "16M"\n', str(tmp_path / "p.toml"), base=tmp_path, home=tmp_path)
    assert layer.values["limits"]["memory"] == 16 << 20


def test_a_file_named_through_dot_dot_is_named_by_its_real_folder(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "p.toml").write_text("[network]\nallow = []\n")
    layer = load_file(tmp_path / "proj" / ".." / "p.toml", home=tmp_path)
    assert layer.source == str(tmp_path / "p.toml")
    linked = tmp_path / "link"
    linked.symlink_to(tmp_path / "proj")
    assert load_file(linked / ".." / "p.toml", home=tmp_path).source == str(tmp_path / "p.toml")  # `..` of the real folder, as the kernel reads it


def test_an_unquoted_host_with_dots_is_told_to_quote_it_at_its_line() -> None:
    text = '[network]\nallow = ["api.example.com"]\n\n[network.http.api.example.com]\nallow = ["GET /x"]\n'
    with pytest.raises(PolicyError) as caught:
        parse_layer(text, "/p/policy.toml", base=Path("/p"), home=Path("/h"))
    assert caught.value.line == 4
    assert 'a host with dots must be quoted, as in [network.http."api.example.com"]' in str(caught.value)


def test_a_misspelt_credentials_table_is_named_at_its_header() -> None:
    with pytest.raises(PolicyError, match=r"unknown table \[credential\] \(did you mean \[credentials\]\?\)") as caught:
        parse_layer('# mine\n[credential.T]\nenv = "X"\n', "/p/policy.toml", base=Path("/p"), home=Path("/h"))
    assert caught.value.line == 2


def test_push_patterns_are_checked_with_their_line(tmp_path: Path) -> None:
    from stockade.core.errors import PolicyError

    good = parse_layer('[network.http."git.test"]\npush = ["refs/heads/agent/*"]\n', "p.toml", base=tmp_path, home=tmp_path)
    assert good.values["network"]["http"]["git.test"] == ((), (), ("refs/heads/agent/*",))
    with pytest.raises(PolicyError, match="not a full ref name") as caught:
        parse_layer('[network.http."git.test"]\nallow = []\npush = ["agent/*"]\n', "p.toml", base=tmp_path, home=tmp_path)
    assert ":3" in str(caught.value)
    with pytest.raises(PolicyError, match="must be a list of"):
        parse_layer('[network.http."git.test"]\npush = "refs/heads/x"\n', "p.toml", base=tmp_path, home=tmp_path)


def test_devices_gpus_are_gpu_numbers(tmp_path: Path) -> None:
    from stockade.core.errors import PolicyError
    from stockade.profiles.loader import load_file

    good = tmp_path / "good.toml"
    good.write_text('[devices]\ngpu = true\ngpus = ["0", "3"]\n')
    assert load_file(good, home=tmp_path).values["devices"] == {"gpu": True, "gpus": ("0", "3")}
    bad = tmp_path / "bad.toml"
    bad.write_text('[devices]\ngpu = true\ngpus = ["all"]\n')
    with pytest.raises(PolicyError, match="not a GPU number") as raised:
        load_file(bad, home=tmp_path)
    assert raised.value.line == 3


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ('"http://collector:4318/"', None),
        ('"https://otel.corp.example:443"', None),
        ('"collector:4318"', "must be an http:// or https:// URL"),
        ('"ftp://collector"', "must be an http:// or https:// URL"),
        ('"http://user:pw@collector:4318"', "its token goes in OTEL_EXPORTER_OTLP_HEADERS"),
        ('"http://collector:4318/?token=x"', "its token goes in OTEL_EXPORTER_OTLP_HEADERS"),
        ('"http://collector:port"', "is not a URL"),
        ("4318", "must be a URL string"),
    ],
)
def test_audit_otlp_is_a_collector_s_base_url(tmp_path: Path, value: str, error: str | None) -> None:
    text = f"[audit]\n\notlp = {value}\n"
    if error is None:
        assert parse_layer(text, "p.toml", base=tmp_path, home=tmp_path).values["audit"]["otlp"] == value.strip('"').rstrip("/")
        return
    with pytest.raises(PolicyError, match=error) as raised:
        parse_layer(text, "p.toml", base=tmp_path, home=tmp_path)
    assert raised.value.line == 3
