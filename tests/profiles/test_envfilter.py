"""Which variables reach the sandbox (ESCAPES 75, 81)."""

from __future__ import annotations

from stockade.profiles.envfilter import sandbox_env, withheld
from stockade.profiles.model import EnvRules

HOST = {
    "PATH": "/usr/bin",
    "HOME": "/home/u",
    "LANG": "C.UTF-8",
    "AWS_SECRET_ACCESS_KEY": "CANARY1",
    "GITHUB_TOKEN": "CANARY2",
    "OPENAI_API_KEY": "CANARY3",
    "NPM_TOKEN": "CANARY4",
    "SSH_AUTH_SOCK": "/tmp/agent.sock",
    "ACTIONS_RUNTIME_TOKEN": "x",
    "CI_JOB_TOKEN": "y",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1/bus",
    "MY_DB_PASSWORD": "p",
    "HTTP_PROXY": "http://corp:3128",
    "STOCKADE_SANDBOX": "0",
    "COMPANY_THING": "c",
}


def test_secrets_never_pass_and_plain_variables_do() -> None:
    env = sandbox_env(HOST, EnvRules())
    assert set(env) == {"PATH", "HOME", "LANG", "COMPANY_THING"}


def test_policy_deny_set_and_pass() -> None:
    env = sandbox_env(HOST, EnvRules(deny=("COMPANY_*",), set=(("CI", "1"), ("HTTPS_PROXY", "evil")), passthrough=("GITHUB_TOKEN",)))
    assert env["CI"] == "1" and env["GITHUB_TOKEN"] == "CANARY2"
    assert "COMPANY_THING" not in env and "HTTPS_PROXY" not in env


def test_withheld_lists_names_only() -> None:
    names = withheld(HOST, EnvRules())
    assert "AWS_SECRET_ACCESS_KEY" in names and "CANARY1" not in " ".join(names) and "HTTP_PROXY" not in names


def test_a_collector_s_headers_never_reach_the_sandbox() -> None:
    from stockade.profiles.envfilter import SECRET_ENV, matches

    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        assert matches(name, SECRET_ENV), name
    assert not matches("OTEL_EXPORTER_OTLP_ENDPOINT", SECRET_ENV) and not matches("OTEL_SERVICE_NAME", SECRET_ENV)  # the control
