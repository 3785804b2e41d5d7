"""An untrusted project policy narrows the user's own, never widens it, and says what it dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.profiles.model import AuditRules, EnvRules, FilesystemRules, Limits, NetworkMode, NetworkRules, Policy
from stockade.profiles.narrow import kept_notes, narrow


def fs(**rules: object) -> Policy:
    return Policy(filesystem=FilesystemRules(**rules))  # type: ignore[arg-type]


def net(mode: NetworkMode, *allow: str, **rest: object) -> Policy:
    return Policy(network=NetworkRules(mode=mode, allow=allow, **rest))  # type: ignore[arg-type]


def env(**rules: object) -> Policy:
    return Policy(env=EnvRules(**rules))  # type: ignore[arg-type]


def test_denials_union_and_bookkeeping_comes_from_the_project() -> None:
    base = Policy(
        filesystem=FilesystemRules(deny_read=("/a",), deny_write=("/w",)),
        network=NetworkRules(deny=("10.0.0.0/8",)),
        env=EnvRules(deny=("A*",)),
        sources=("builtin:default", "/me.toml"),
        protected_files=("/me.toml",),
        origin="/me.toml",
    )
    project = Policy(
        filesystem=FilesystemRules(deny_read=("/b", "/a"), deny_write=("/x",)),
        network=NetworkRules(deny=("evil.test",)),
        env=EnvRules(deny=("B*",)),
        project_dir=Path("/proj"),
        origin="/proj/.stockade.toml",
        sources=("builtin:default", "/proj/.stockade.toml"),
        protected_files=("/proj/.stockade.toml",),
    )
    effective, notes = narrow(base, project)
    assert effective.filesystem.deny_read == ("/a", "/b")
    assert effective.filesystem.deny_write == ("/w", "/x")
    assert effective.network.deny == ("10.0.0.0/8", "evil.test")
    assert effective.env.deny == ("A*", "B*")
    assert effective.project_dir == Path("/proj")
    assert effective.origin == "/proj/.stockade.toml"
    assert effective.sources == ("builtin:default", "/me.toml", "/proj/.stockade.toml")
    assert effective.protected_files == ("/me.toml", "/proj/.stockade.toml")
    assert notes == []
    assert kept_notes(base, effective) == ["1 deny_read rule", "1 deny_write rule", "1 network deny rule", "1 env deny rule"]


@pytest.mark.parametrize(
    ("mine", "theirs", "kept", "notes"),
    [
        pytest.param(("/proj",), ("/proj/build",), ("/proj/build",), [], id="inside-kept"),
        pytest.param(("/proj",), ("/proj",), ("/proj",), [], id="same-kept"),
        pytest.param(
            ("/proj/build",),
            ("/proj",),
            ("/proj/build",),
            ["allow_write /proj (outside what your own policy lets you write)"],
            id="wider-cut-to-mine",
        ),
        pytest.param(("/proj",), ("/etc",), (), ["allow_write /etc (outside what your own policy lets you write)"], id="outside-dropped"),
        pytest.param(
            ("/proj",), ("/projector",), (), ["allow_write /projector (outside what your own policy lets you write)"], id="prefix-not-inside"
        ),
        pytest.param(("/proj",), (), (), [], id="project-writes-nothing"),
    ],
)
def test_allow_write_is_intersected(mine: tuple[str, ...], theirs: tuple[str, ...], kept: tuple[str, ...], notes: list[str]) -> None:
    effective, said = narrow(fs(allow_write=mine), fs(allow_write=theirs))
    assert effective.filesystem.allow_write == kept
    assert said == notes


def test_allow_write_through_a_symlink_out_of_the_project_is_dropped(tmp_path: Path) -> None:
    project, outside = tmp_path / "proj", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "w").symlink_to(outside)
    effective, notes = narrow(fs(allow_write=(str(project),)), fs(allow_write=(str(project / "w"), str(project / "ok"))))
    assert effective.filesystem.allow_write == (str(project / "ok"),)
    assert notes == [f"allow_write {project / 'w'} (outside what your own policy lets you write)"]


@pytest.mark.parametrize(
    ("mine", "theirs", "kept", "notes"),
    [
        pytest.param(("/h/notes",), ("/h/notes/a",), ("/h/notes/a",), [], id="inside-kept"),
        pytest.param(
            ("/h/notes",), ("/h/.ssh",), (), ["allow_read /h/.ssh (outside what your own policy lets a sandbox read)"], id="outside-dropped"
        ),
        pytest.param(
            ("/h/notes/a",), ("/h",), ("/h/notes/a",), ["allow_read /h (outside what your own policy lets a sandbox read)"], id="wider-cut-to-mine"
        ),
    ],
)
def test_allow_read_is_intersected(mine: tuple[str, ...], theirs: tuple[str, ...], kept: tuple[str, ...], notes: list[str]) -> None:
    effective, said = narrow(fs(allow_read=mine), fs(allow_read=theirs))
    assert effective.filesystem.allow_read == kept
    assert said == notes


@pytest.mark.parametrize(
    ("mine", "theirs", "home", "notes"),
    [
        ("private", "private", "private", []),
        ("private", "host", "private", ['home = "host"']),
        ("host", "private", "private", []),
        ("host", "host", "host", []),
    ],
)
def test_home_may_only_become_private(mine: str, theirs: str, home: str, notes: list[str]) -> None:
    effective, said = narrow(fs(home=mine), fs(home=theirs))
    assert effective.filesystem.home == home
    assert said == notes


@pytest.mark.parametrize(("mine", "theirs", "shown"), [(True, True, True), (True, False, False), (False, True, False), (False, False, False)])
def test_a_project_may_only_hide_the_tools_own_settings(mine: bool, theirs: bool, shown: bool) -> None:
    effective, _said = narrow(fs(tool_config=mine), fs(tool_config=theirs))
    assert effective.filesystem.tool_config is shown


NONE, ALLOWLIST, OPEN = NetworkMode.NONE, NetworkMode.ALLOWLIST, NetworkMode.OPEN


@pytest.mark.parametrize(
    ("mine", "theirs", "mode", "allow", "notes"),
    [
        pytest.param((NONE,), (OPEN,), NONE, (), ['network mode "open" (yours is "none")'], id="none-stays-none"),
        pytest.param((ALLOWLIST, "a.test"), (NONE,), NONE, (), [], id="project-closes"),
        pytest.param(
            (ALLOWLIST, "*.a.test"), (ALLOWLIST, "x.a.test", "b.test"), ALLOWLIST, ("x.a.test",), ["network allow b.test"], id="allowlist-intersected"
        ),
        pytest.param((ALLOWLIST, "a.test"), (OPEN,), ALLOWLIST, ("a.test",), ['network mode "open" (yours is "allowlist")'], id="open-cut-to-mine"),
        pytest.param((OPEN,), (ALLOWLIST, "b.test"), ALLOWLIST, ("b.test",), [], id="open-narrowed-to-theirs"),
        pytest.param((OPEN, "kept.test"), (OPEN,), OPEN, ("kept.test",), [], id="both-open"),
        pytest.param(  # open reaches no loopback, private or metadata address: a project may not list one into it
            (OPEN,),
            (ALLOWLIST, "b.test", "127.0.0.1:5432", "localhost:80", "169.254.169.254", "10.0.0.0/8", "::/0", "203.0.113.9"),
            ALLOWLIST,
            ("b.test", "203.0.113.9"),
            [
                f"network allow {r} (not a public address, and your open network does not list it)"
                for r in ("127.0.0.1:5432", "localhost:80", "169.254.169.254", "10.0.0.0/8", "::/0")
            ],
            id="open-narrowed-to-theirs-public-only",
        ),  # fmt: skip
        pytest.param((OPEN, "127.0.0.1:5432"), (ALLOWLIST, "127.0.0.1:5432"), ALLOWLIST, ("127.0.0.1:5432",), [], id="open-listing-it-keeps-it"),
    ],
)
def test_network_mode_and_allow(mine: tuple, theirs: tuple, mode: NetworkMode, allow: tuple[str, ...], notes: list[str]) -> None:
    """ESCAPES 87: under an open network, a project lists only public hosts (or what you list)."""
    effective, said = narrow(net(*mine), net(*theirs))
    assert effective.network.mode is mode
    assert effective.network.allow == allow
    assert said == notes


def test_unix_sockets_and_datagrams_only_as_the_user_allows() -> None:
    base = net(ALLOWLIST, unix_sockets=("/run/a.sock",), unix_datagram=False)
    project = net(ALLOWLIST, unix_sockets=("/run/a.sock", "/run/docker.sock"), unix_datagram=True)
    effective, notes = narrow(base, project)
    assert effective.network.unix_sockets == ("/run/a.sock",)
    assert effective.network.unix_datagram is False
    assert notes == ["unix_sockets /run/docker.sock", "unix_datagram = true"]
    closed, _ = narrow(net(ALLOWLIST, unix_datagram=True), net(NONE, unix_datagram=True))
    assert closed.network.unix_datagram is True and closed.network.mode is NONE


def test_env_set_drops_loader_and_secret_names() -> None:
    base = env(set=(("KEEP", "mine"), ("OVER", "mine")))
    project = env(set=(("LD_PRELOAD", "/x.so"), ("MY_TOKEN", "t"), ("OVER", "theirs"), ("PLAIN", "1")))
    effective, notes = narrow(base, project)
    assert effective.env.set == (("KEEP", "mine"), ("OVER", "theirs"), ("PLAIN", "1"))
    assert notes == ["env set LD_PRELOAD", "env set MY_TOKEN"]


@pytest.mark.parametrize(
    ("mine", "theirs", "kept", "notes"),
    [
        pytest.param(("A", "B"), (), ("A", "B"), [], id="project-silent-keeps-mine"),
        pytest.param(("A", "B"), ("A",), ("A",), [], id="project-narrows"),
        pytest.param(("A",), ("A", "SECRET_X"), ("A",), ["env pass SECRET_X"], id="project-adds-dropped"),
    ],
)
def test_env_pass(mine: tuple[str, ...], theirs: tuple[str, ...], kept: tuple[str, ...], notes: list[str]) -> None:
    effective, said = narrow(env(passthrough=mine), env(passthrough=theirs))
    assert effective.env.passthrough == kept
    assert said == notes


def test_limits_take_the_lower_of_each() -> None:
    base = Policy(limits=Limits(memory=100, pids=None, wall_time=5.0, file_size=10))
    project = Policy(limits=Limits(memory=200, pids=7, wall_time=2.5, tmp_size=3))
    effective, notes = narrow(base, project)
    assert effective.limits == Limits(memory=100, pids=7, wall_time=2.5, file_size=10, tmp_size=3)
    assert notes == []
    assert kept_notes(base, effective) == ["tighter pids, wall_time, tmp_size"]


@pytest.mark.parametrize(
    ("mine", "theirs", "notes"),
    [
        (None, "/tmp/log.jsonl", ["audit log /tmp/log.jsonl"]),
        ("/a.jsonl", "/b.jsonl", ["audit log /b.jsonl"]),
        ("/a.jsonl", "/a.jsonl", []),
        ("/a.jsonl", None, []),
    ],
)
def test_the_audit_log_stays_the_users(mine: str | None, theirs: str | None, notes: list[str]) -> None:
    effective, said = narrow(Policy(audit=AuditRules(log=mine)), Policy(audit=AuditRules(log=theirs)))
    assert effective.audit.log == mine
    assert said == notes


def test_kept_notes_counts_hosts_left_out_and_the_closed_mode() -> None:
    base = net(ALLOWLIST, "a.test", "b.test", "c.test")
    effective, _ = narrow(base, net(NONE))
    assert kept_notes(base, effective) == ["3 of your allowed hosts left out", 'network mode "none"']
    one, _ = narrow(base, net(ALLOWLIST, "a.test", "b.test"))
    assert kept_notes(base, one) == ["1 of your allowed hosts left out"]


def test_kept_notes_of_an_unchanged_policy_is_empty() -> None:
    base = Policy(filesystem=FilesystemRules(deny_read=("/a", "/b")), limits=Limits(pids=3))
    assert kept_notes(base, base) == []
    assert kept_notes(base, narrow(base, Policy())[0]) == []


def test_http_rules_of_an_untrusted_project_only_narrow() -> None:
    mine = (("api.test", ("GET /repos/**",), ()),)
    theirs = (
        ("api.test", ("GET /repos/**", "DELETE /repos/**"), ("GET /repos/private/**",)),
        ("free.test", ("GET /only/**",), ()),  # a host your policy allows whole: any table narrows it
    )
    narrowed, notes = narrow(
        net(NetworkMode.ALLOWLIST, "api.test", "free.test", http=mine), net(NetworkMode.ALLOWLIST, "api.test", "free.test", http=theirs)
    )
    assert narrowed.network.http == (
        ("api.test", ("GET /repos/**",), ("GET /repos/private/**",)),
        ("free.test", ("GET /only/**",), ()),
    )
    assert notes == ['HTTP rule "allow DELETE /repos/**" for api.test (your own policy limits that host)']


def test_your_own_http_rules_stay_when_the_project_has_none() -> None:
    mine = (("api.test", ("GET /a",), ("POST /b",)),)
    narrowed, notes = narrow(net(NetworkMode.ALLOWLIST, "api.test", http=mine), net(NetworkMode.ALLOWLIST, "api.test"))
    assert narrowed.network.http == mine and notes == []


@pytest.mark.parametrize(
    ("mine_host", "their_host"),
    [
        ("api.test", "*.test"),  # their wildcard reaches your host
        ("api.test", "api.test:443"),  # their port-bound table reaches your any-port one
        ("api.test:443", "api.test"),
        ("*.test", "api.test"),  # your wildcard limits their host too
        ("*.test", "*.api.test"),
        ("*.test:443", "api.test"),
    ],
)
def test_a_project_table_for_an_overlapping_host_adds_no_allow_rule(mine_host: str, their_host: str) -> None:
    """The daemon lets a request through when any table matching its host allows it: a project's table
    for another spelling of a host you limit must not bring its allow rules there (it still adds denials)."""
    mine = ((mine_host, ("GET /repos/**",), ()),)
    theirs = ((their_host, ("GET /repos/**", "* /**"), ("GET /repos/private/**",)),)
    narrowed, notes = narrow(net(NetworkMode.ALLOWLIST, "api.test", http=mine), net(NetworkMode.ALLOWLIST, "api.test", http=theirs))
    tables = dict((host, (allow, deny)) for host, allow, deny in narrowed.network.http)
    assert tables[mine_host][0] == ("GET /repos/**",)
    assert "* /**" not in tables[their_host][0] and tables[their_host][1] == ("GET /repos/private/**",)
    assert notes == [f'HTTP rule "allow * /**" for {their_host} (your own policy limits that host)']


def test_a_project_table_for_a_host_you_do_not_limit_keeps_its_allow_rules() -> None:
    """Control: tables that cannot meet yours (another name, another port) apply whole."""
    mine = (("api.test:443", ("GET /repos/**",), ()), ("*.a.test", ("GET /x",), ()))
    theirs = (("api.test:8443", ("* /**",), ()), ("b.test", ("* /**",), ()), ("*.b.test", ("* /**",), ()))
    narrowed, notes = narrow(net(NetworkMode.ALLOWLIST, "api.test", http=mine), net(NetworkMode.ALLOWLIST, "api.test", http=theirs))
    assert notes == []
    assert {host: allow for host, allow, _deny in narrowed.network.http if host in ("api.test:8443", "b.test", "*.b.test")} == dict.fromkeys(
        ("api.test:8443", "b.test", "*.b.test"), ("* /**",)
    )


def test_a_project_keeps_only_the_push_patterns_your_own_tables_list() -> None:
    from stockade.profiles.model import NetworkMode, NetworkRules, Policy
    from stockade.profiles.narrow import narrow

    def policy(push: tuple[tuple[str, tuple[str, ...]], ...], http: tuple = (("git.test", (), ()),)) -> Policy:  # type: ignore[type-arg]
        return Policy(network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("git.test",), http=http, push=push))

    mine = policy((("git.test", ("refs/heads/agent/*",)),))
    theirs = policy((("git.test", ("refs/heads/agent/*", "refs/heads/main")),))
    effective, notes = narrow(mine, theirs)
    assert effective.network.push == (("git.test", ("refs/heads/agent/*",)),)
    assert any('push "refs/heads/main"' in note for note in notes)
    effective, notes = narrow(policy(()), theirs)  # your table lists no push: none of theirs is kept
    assert effective.network.push == ()


@pytest.mark.parametrize(
    ("mine", "theirs", "gpu", "gpus", "noted"),
    [
        ((False, ()), (True, ()), False, (), True),  # an untrusted project cannot give itself the GPUs
        ((True, ()), (True, ()), True, (), False),
        ((True, ()), (False, ()), False, (), False),  # it may take them away
        ((True, ()), (True, ("1",)), True, ("1",), False),  # or choose fewer
        ((True, ("0",)), (True, ("0", "1")), True, ("0",), False),  # never more than mine
        ((True, ("0",)), (True, ("1",)), False, (), False),
    ],
)
def test_gpus_only_as_the_user_gives_them(mine: tuple, theirs: tuple, gpu: bool, gpus: tuple[str, ...], noted: bool) -> None:
    from stockade.profiles.model import DeviceRules

    base = Policy(devices=DeviceRules(gpu=mine[0], gpus=mine[1]))
    project = Policy(devices=DeviceRules(gpu=theirs[0], gpus=theirs[1]))
    effective, notes = narrow(base, project)
    assert (effective.devices.gpu, effective.devices.gpus) == (gpu, gpus)
    assert ("[devices] gpu = true" in notes) is noted


def test_a_project_may_stage_its_runs_and_keep_every_change_for_review() -> None:
    from stockade.profiles.model import CheckpointRules

    base = Policy(checkpoints=CheckpointRules(stage=True, accept="unmarked"))
    assert narrow(base, Policy(checkpoints=CheckpointRules(stage=True, accept="review")))[0].checkpoints.accept == "review"
    assert narrow(Policy(), Policy(checkpoints=CheckpointRules(stage=True)))[0].checkpoints.stage is True
    assert narrow(base, Policy())[0].checkpoints == base.checkpoints, "a project that says nothing changes nothing"


def test_an_untrusted_project_cannot_send_your_records_to_a_collector_of_its_choosing() -> None:
    base = Policy(audit=AuditRules(log="/me/audit.jsonl", otlp="https://otel.mine.example"))
    project = Policy(audit=AuditRules(otlp="https://collector.attacker.example"))
    effective, notes = narrow(base, project)
    assert effective.audit.otlp == "https://otel.mine.example"
    assert any("audit otlp https://collector.attacker.example" in note for note in notes)
    same, quiet = narrow(base, Policy(audit=AuditRules(otlp="https://otel.mine.example")))
    assert same.audit.otlp == "https://otel.mine.example" and quiet == []
