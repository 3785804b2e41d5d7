"""The administrator's baseline: every policy a run can resolve stays within it, table by table;
keys it leaves out bound nothing; a broken or vanished required baseline stops runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stockade.core.errors import PolicyError
from stockade.core.locations import Locations
from stockade.profiles import baseline
from stockade.profiles.domains import parse_rule
from stockade.profiles.model import NetworkMode, Policy
from stockade.profiles.paths import is_within
from stockade.profiles.resolve import resolve
from stockade.profiles.trust import TrustStore, chain_digest


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def admin(tmp_path: Path) -> Path:
    return tmp_path / "admin" / "policy.toml"


def env_for(admin: Path) -> dict[str, str]:
    return {**os.environ, baseline.VARIABLE: str(admin)}


BASELINE = """
[filesystem]
allow_write = ["."]
allow_read = ["~/.cargo/bin"]
home = "private"
deny_read = ["~/.corp-token"]
deny_write = ["./.github"]
tool_config = false

[network]
allow = ["pypi.org", "*.github.com"]
deny = ["evil.github.com"]
unix_sockets = []
unix_datagram = false

[network.http."api.github.com"]
allow = ["GET /**"]

[env]
deny = ["CORP_*"]
pass = ["TERM"]
set = { CORP_PROXY_NOTE = "baseline" }

[limits]
memory = "2G"
pids = 256
wall_time = "1h"

[audit]
log = "/var/tmp/corp-audit.jsonl"

[devices]
gpu = false

[checkpoints]
enabled = true
stage = true
accept = "review"
"""

WIDER = """
extends = ["default"]
[filesystem]
allow_write = [".", "~/elsewhere", "/srv"]
allow_read = ["~/.cargo/bin", "~/.aws", "~/.ssh"]
home = "host"
tool_config = true

[network]
mode = "open"
allow = ["pypi.org", "files.pythonhosted.org", "api.github.com", "127.0.0.1:5432"]
unix_sockets = ["/run/docker.sock"]
unix_datagram = true

[network.http."api.github.com"]
allow = ["POST /**"]

[env]
pass = ["TERM", "AWS_SECRET_ACCESS_KEY", "CORP_TOKEN"]

[limits]
memory = "64G"

[audit]
log = "/home/me/mine.jsonl"

[devices]
gpu = true

[checkpoints]
enabled = false
stage = false
accept = "unmarked"
"""


def assert_within(policy: Policy, bound: Policy, project: Path) -> None:
    """Every allowance of `policy` is one the baseline's (the test's reading of BASELINE) gives."""
    fs = policy.filesystem
    assert all(is_within(os.path.realpath(path), str(project)) for path in fs.allow_write), fs.allow_write
    assert all(is_within(path, str(bound.filesystem.allow_read[0])) for path in fs.allow_read), fs.allow_read
    assert fs.home == "private" and fs.tool_config is False
    assert set(bound.filesystem.deny_read) <= set(fs.deny_read) and set(bound.filesystem.deny_write) <= set(fs.deny_write)
    net = policy.network
    assert net.mode is not NetworkMode.OPEN
    rules = [parse_rule(rule) for rule in ("pypi.org", "*.github.com")]
    assert all(any(rule.covers(parse_rule(allowed)) for rule in rules) for allowed in net.allow), net.allow
    assert "evil.github.com" in net.deny and net.unix_sockets == () and net.unix_datagram is False
    assert all("POST /**" not in allow for host, allow, _deny in net.http if host == "api.github.com"), net.http
    assert "CORP_*" in policy.env.deny and set(policy.env.passthrough) <= {"TERM"} and dict(policy.env.set)["CORP_PROXY_NOTE"] == "baseline"
    assert policy.limits.memory is not None and policy.limits.memory <= 2 << 30 and policy.limits.pids == 256 and policy.limits.wall_time == 3600
    assert policy.audit.log == "/var/tmp/corp-audit.jsonl"
    assert policy.devices.gpu is False
    assert policy.checkpoints.enabled and policy.checkpoints.stage and policy.checkpoints.accept == "review"


def test_a_user_a_trusted_project_a_policy_file_and_a_profile_each_stay_within_every_table(project: Path, locations: Locations, admin: Path) -> None:
    write(admin, BASELINE)
    env = env_for(admin)
    bound = baseline.load(env, locations.state, project, locations.home)
    assert bound is not None
    write(locations.user_config_file, WIDER)
    mine = resolve(project, locations, env=env)
    assert_within(mine.policy, bound.policy, project)
    assert mine.baseline == (str(admin),) and any("allow_write" in note for note in mine.bounded)

    project_file = write(project / ".stockade.toml", WIDER)
    store = TrustStore(locations.trust_file)
    store.trust(project_file, chain_digest(resolve.__globals__["project_chain"](project_file, locations)))
    trusted = resolve(project, locations, env=env)
    assert trusted.trusted
    assert_within(trusted.policy, bound.policy, project)

    named = resolve(project, locations, policy_file=write(project / "wide.toml", WIDER), env=env)
    assert_within(named.policy, bound.policy, project)
    for profile in ("default", "agent", "pypi", "open"):
        try:
            profiled = resolve(project, locations, profile=profile, env=env)
        except PolicyError:
            continue  # no such built-in here
        assert_within(profiled.policy, bound.policy, project)
    assert f"{baseline.SOURCE_PREFIX}{admin}" in named.policy.sources and str(admin) in named.policy.protected_files


def test_without_the_baseline_the_same_policies_are_wider(project: Path, locations: Locations) -> None:
    """The control: what the baseline takes away is there without it."""
    write(locations.user_config_file, WIDER)
    policy = resolve(project, locations, env={**os.environ}).policy
    assert policy.network.mode is NetworkMode.OPEN and policy.filesystem.home == "host" and policy.devices.gpu
    assert "/srv" in policy.filesystem.allow_write and policy.audit.log == "/home/me/mine.jsonl"


def test_keys_the_baseline_leaves_out_bound_nothing(project: Path, locations: Locations, admin: Path) -> None:
    write(admin, '[network]\nallow = ["pypi.org"]\n[filesystem]\ndeny_read = ["~/.corp"]\n')
    write(locations.user_config_file, 'extends = ["default"]\n[filesystem]\nallow_write = ["~/work"]\nhome = "host"\n[limits]\nmemory = "8G"\n')
    policy = resolve(project, locations, env=env_for(admin)).policy
    assert str(locations.home / "work") in policy.filesystem.allow_write and policy.filesystem.home == "host"
    assert policy.limits.memory == 8 << 30
    assert str(locations.home / ".corp") in policy.filesystem.deny_read
    assert policy.network.mode is NetworkMode.NONE  # the user's default had no network; the baseline gives none


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(st.sampled_from([".", "./build", "~/x", "/srv", "/", "~"]), max_size=4),
    hosts=st.lists(st.sampled_from(["pypi.org", "a.github.com", "github.com", "evil.test", "127.0.0.1", "*.github.com", "*.pypi.org"]), max_size=4),
    mode=st.sampled_from(["open", "allowlist", "none"]),
    home=st.sampled_from(["private", "host"]),
    memory=st.sampled_from(["", "1G", "16G"]),
    gpu=st.booleans(),
    passed=st.lists(st.sampled_from(["TERM", "HOME_TOKEN", "PATH"]), max_size=3),
)
def test_any_user_policy_stays_within_the_baseline(
    project: Path, locations: Locations, admin: Path, writes: list[str], hosts: list[str], mode: str, home: str, memory: str, gpu: bool,
    passed: list[str],
) -> None:  # fmt: skip
    write(admin, BASELINE)
    memory_line = f'[limits]\nmemory = "{memory}"\n' if memory else ""
    text = (
        f'extends = ["default"]\n[filesystem]\nallow_write = {writes!r}\nhome = "{home}"\n'
        f'[network]\nmode = "{mode}"\nallow = {hosts!r}\n[env]\npass = {passed!r}\n{memory_line}[devices]\ngpu = {str(gpu).lower()}\n'
    ).replace("'", '"')
    write(locations.user_config_file, text)
    env = env_for(admin)
    bound = baseline.load(env, locations.state, project, locations.home)
    assert bound is not None
    assert_within(resolve(project, locations, env=env).policy, bound.policy, project)


def test_a_broken_baseline_stops_every_run_with_its_file_and_line(project: Path, locations: Locations, admin: Path) -> None:
    write(admin, '[network]\nallow = ["pypi.org"\n')
    with pytest.raises(PolicyError, match=rf"{admin}:3: not valid TOML"):
        resolve(project, locations, env=env_for(admin))
    write(admin, "[network]\nalow = []\n")
    with pytest.raises(PolicyError, match=rf"{admin}:2: unknown key 'alow'"):
        resolve(project, locations, env=env_for(admin))
    write(admin, 'extends = ["default"]\n')
    with pytest.raises(PolicyError, match=r":1: a system baseline extends nothing"):
        resolve(project, locations, env=env_for(admin))
    write(admin, '[credentials.gh]\nenv = "GH_TOKEN"\nhosts = ["github.com"]\n')
    with pytest.raises(PolicyError, match="a system baseline holds no credentials"):
        resolve(project, locations, env=env_for(admin))
    admin.unlink()
    with pytest.raises(PolicyError, match="the system baseline cannot be read"):
        resolve(project, locations, env=env_for(admin))
    with pytest.raises(PolicyError, match="not an absolute path"):
        resolve(project, locations, env={baseline.VARIABLE: "policy.toml"})
    os.mkfifo(admin)
    with pytest.raises(PolicyError, match="not a regular file"):
        resolve(project, locations, env=env_for(admin))


def test_required_is_the_baseline_s_key_alone(project: Path, locations: Locations) -> None:
    write(locations.user_config_file, "\nrequired = true\n")
    with pytest.raises(PolicyError, match=r"config.toml:2: 'required' is a key of the system baseline"):
        resolve(project, locations, env={})


def test_a_required_baseline_that_goes_missing_stops_runs_until_restored(
    project: Path, locations: Locations, admin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = admin.parent / "etc-policy.toml"
    monkeypatch.setattr(baseline, "SYSTEM_FILE", str(system))
    write(system, 'required = true\n[network]\nallow = ["pypi.org"]\n')
    assert resolve(project, locations, env={}).baseline == (str(system),)
    assert (locations.state / baseline.REMEMBERED).read_text() == f"{system}\n"
    system.unlink()
    with pytest.raises(PolicyError, match="is required and is gone"):
        resolve(project, locations, env={})
    write(system, 'required = true\n[network]\nallow = ["pypi.org"]\n')
    assert resolve(project, locations, env={}).baseline == (str(system),)

    # Without required, a baseline taken away is simply gone (the control).
    (locations.state / baseline.REMEMBERED).unlink()
    write(system, '[network]\nallow = ["pypi.org"]\n')
    resolve(project, locations, env={})
    system.unlink()
    assert resolve(project, locations, env={}).baseline == ()


def test_the_variable_adds_a_baseline_and_never_replaces_the_system_s(
    project: Path, locations: Locations, admin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = admin.parent / "etc-policy.toml"
    monkeypatch.setattr(baseline, "SYSTEM_FILE", str(system))
    write(system, '[network]\nallow = ["pypi.org"]\n')
    write(admin, "")  # an empty file named by the variable: it bounds nothing, and the system's still does
    write(locations.user_config_file, 'extends = ["default"]\n[network]\nallow = ["pypi.org", "evil.test"]\n')
    result = resolve(project, locations, env={baseline.VARIABLE: str(admin)})
    assert result.baseline == (str(system), str(admin)) and result.policy.network.allow == ("pypi.org",)


def test_the_run_s_own_flags_and_an_mcp_server_s_policy_stay_within_it_too(project: Path, locations: Locations, admin: Path) -> None:
    from stockade.core.invocation import Invocation
    from stockade.profiles.resolve import request_for

    write(admin, "[devices]\ngpu = false\n[checkpoints]\nstage = true\n")
    env = {**env_for(admin), "HOME": str(locations.home)}
    request, _note = request_for(Invocation(["true"], str(project), env, gpu=True, quiet=True))
    assert request.policy.devices.gpu is False and request.policy.checkpoints.stage
    control, _note = request_for(Invocation(["true"], str(project), {**os.environ, "HOME": str(locations.home)}, gpu=True, quiet=True))
    assert control.policy.devices.gpu is True and not control.policy.checkpoints.stage
    mcp, _note = request_for(Invocation(["true"], str(project), env, profile="mcp", mcp="server", quiet=True))
    assert mcp.policy.checkpoints.stage and f"{baseline.SOURCE_PREFIX}{admin}" in mcp.policy.sources


def test_the_baseline_s_collector_is_the_one_used(project: Path, locations: Locations, admin: Path) -> None:
    write(admin, '[audit]\notlp = "https://otel.corp.example"\n')
    write(locations.user_config_file, 'extends = ["default"]\n[audit]\notlp = "http://127.0.0.1:4318"\nlog = "/var/tmp/mine.jsonl"\n')
    policy = resolve(project, locations, env=env_for(admin)).policy
    assert policy.audit.otlp == "https://otel.corp.example" and policy.audit.log == "/var/tmp/mine.jsonl"  # log: not set by the baseline


def test_a_pass_of_your_own_never_lets_through_a_name_the_baseline_denies(project: Path, locations: Locations, admin: Path) -> None:
    write(admin, '[env]\ndeny = ["CORP_*"]\n')
    write(locations.user_config_file, 'extends = ["default"]\n[env]\npass = ["CORP_TOKEN", "TERM", "EDITOR"]\n')
    result = resolve(project, locations, env=env_for(admin))
    assert "CORP_TOKEN" not in result.policy.env.passthrough and {"TERM", "EDITOR"} <= set(result.policy.env.passthrough)
    assert any("env pass CORP_TOKEN" in note for note in result.bounded)
    write(admin, '[env]\ndeny = ["CORP_*"]\npass = ["CORP_TOKEN", "TERM", "EDITOR"]\n')  # the baseline may pass it itself
    assert "CORP_TOKEN" in resolve(project, locations, env=env_for(admin)).policy.env.passthrough


def test_a_baseline_with_no_network_closes_the_host_s_sockets_too(project: Path, locations: Locations, admin: Path) -> None:
    write(admin, '[network]\nmode = "none"\n')
    write(locations.user_config_file, 'extends = ["default"]\n[network]\nmode = "open"\nunix_sockets = ["/run/docker.sock"]\nunix_datagram = true\n')
    network = resolve(project, locations, env=env_for(admin)).policy.network
    assert network.mode is NetworkMode.NONE and network.unix_sockets == () and network.unix_datagram is False and network.ceiling == ()
    write(admin, '[network]\nmode = "none"\nunix_sockets = ["/run/docker.sock"]\n')  # unless it lists some itself
    assert resolve(project, locations, env=env_for(admin)).policy.network.unix_sockets == ("/run/docker.sock",)
