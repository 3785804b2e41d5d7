"""The Linux planner's pure parts: explain's text for a small plan, CI channels, sealing flags, the working folder."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stockade.bwrap.after.sweep import LINK_PIN
from stockade.bwrap.parts import args as bw
from stockade.bwrap.plan import planner
from stockade.bwrap.plan.mounts import View
from stockade.bwrap.plan.planner import BwrapPlan, BwrapPlanner
from stockade.core.errors import SandboxSetupError
from stockade.profiles.model import AuditRules, EnvRules, FilesystemRules, Limits, NetworkMode, NetworkRules, Policy


def view(**kwargs: Any) -> Any:
    fields: dict[str, Any] = {"socket_masks": [], "shared_files": [], "unguarded": [], "notes": [], "details": [], "cache_layers": []}
    return SimpleNamespace(**{**fields, **kwargs})


def plan(policy: Policy, view_: Any = None, env: dict[str, str] | None = None, host_env: dict[str, str] | None = None) -> BwrapPlan:
    return BwrapPlan(
        bwrap="/usr/bin/bwrap",
        policy=policy,
        pieces=[bw.Flag("--unshare-pid"), bw.Chdir("/home/me/my proj")],
        command=("echo", "hi there"),
        env=env if env is not None else {"PATH": "/usr/bin", "STOCKADE_SANDBOX": "1"},
        cwd="/home/me/my proj",
        view=view_ if view_ is not None else view(),
        session="abc123abc123",
        interactive=False,
        quiet=False,
        locations=None,  # type: ignore[arg-type]
        host_env=host_env or {},
    )


def test_explain_of_a_small_plan_without_network() -> None:
    text = BwrapPlanner().explain(plan(Policy(origin="/p/.stockade.toml")))
    assert text == (
        "# stockade plan: linux, /usr/bin/bwrap\n"
        "# policy: /p/.stockade.toml\n"
        "/usr/bin/bwrap --args FD --seccomp FD --info-fd FD -- echo 'hi there'\n"
        "# --args FD carries, NUL-separated:\n"
        "  --unshare-pid\n"
        "  --chdir '/home/me/my proj'\n"
        "# seccomp: AF_UNIX stream sockets only (host sockets hidden); see `stockade explain`\n"
        "# network: none (a private namespace with only an empty loopback)\n"
        "# environment: bwrap starts with none; --clearenv and 2 --setenv in the memfd; withheld: none\n"
        "# limits: no limits\n"
    )


def test_explain_names_network_sockets_withheld_wall_time_and_protections() -> None:
    policy = Policy(
        network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("pypi.org",), unix_sockets=("/run/x.sock",), unix_datagram=True),
        env=EnvRules(deny=("SECRET_*",)),
        limits=Limits(wall_time=30),
    )
    v = view(
        socket_masks=["/run/docker.sock"],
        shared_files=["/p/a", "/p/b"],
        cache_layers=[("/h/.cargo/git", "/c/layers/p/git/upper", "/c/layers/p/git/work", "/c/layers/p/git/mount")],
        unguarded=[("/p/.git/hooks", "absent"), ("/p/.envrc", f"{LINK_PIN}/x"), ("/p/.envrc", f"{LINK_PIN}/y")],
        notes=["a note"],
        details=["a detail"],
    )
    lines = BwrapPlanner().explain(plan(policy, v, host_env={"SECRET_KEY": "s", "HOME": "/h"})).splitlines()
    assert "  --ro-bind /dev/null /run/docker.sock  # a host socket, if still there at the start" in lines
    assert (
        "# cache layer: /h/.cargo/git reads the host's cache; what the sandbox writes there lands in /c/layers/p/git/upper "
        "(this project's, never run by the host)"
    ) in lines
    assert "# seccomp: AF_UNIX stream and datagram sockets; host sockets reachable: /run/x.sock; see `stockade explain`" in lines
    assert any(line.startswith("# network: allowlist: a private namespace whose only way out is 127.0.0.1:3128") for line in lines)
    assert any(line.endswith("withheld: SECRET_KEY") for line in lines)
    assert any(line.startswith("# limits: ") and line.endswith("; wall_time 30s") for line in lines)
    assert any(line.startswith("# hard links: 2 files") for line in lines)
    assert any(line.startswith("# absent protected paths: 1,") for line in lines)
    assert "# protected behind symlinks: /p/.envrc; protected at their targets, and a link the run replaces is put back" in lines
    assert lines[-2:] == ["# note: a note", "# note: a detail"]


def test_ci_channels_keeps_absolute_channels_not_granted(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    host_env = {
        "GITHUB_ENV": str(tmp_path / "env"),
        "GITHUB_PATH": "relative/path",
        "GITHUB_OUTPUT": str(granted),
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "OTHER": "/elsewhere",
    }
    policy = Policy(filesystem=FilesystemRules(allow_write=(str(granted),)))
    assert planner.ci_channels(host_env, policy) == (str(tmp_path / "env"), str(tmp_path / "temp"))


def test_ci_channels_outside_ci_are_none() -> None:
    assert planner.ci_channels({"PATH": "/usr/bin"}, Policy()) == ()


def test_a_granted_channel_is_matched_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    policy = Policy(filesystem=FilesystemRules(allow_write=(str(tmp_path / "link"),)))
    assert planner.ci_channels({"RUNNER_TEMP": str(tmp_path / "real")}, policy) == ()


@pytest.mark.parametrize(
    ("interactive", "network", "unshare_net", "new_session"),
    [(False, False, True, True), (True, False, True, False), (False, True, False, True), (True, True, False, False)],
)
def test_sealing(interactive: bool, network: bool, unshare_net: bool, new_session: bool) -> None:
    words = [word for piece in planner._sealing(interactive, network) for word in piece.to_args()]
    assert words[: len(planner.SEALED)] == list(planner.SEALED)
    assert ("--unshare-net" in words) is unshare_net
    assert ("--new-session" in words) is new_session
    assert words[-2:] == ["--hostname", "stockade"]


def test_working_dir_hidden_missing_invisible_and_fine(tmp_path: Path) -> None:
    shown = view(masked=[], writable=[str(tmp_path)], home=None, shown=[], carve_outs=[])
    assert planner._working_dir(str(tmp_path), shown) == os.path.realpath(tmp_path)
    with pytest.raises(SandboxSetupError, match="hidden by the policy"):
        planner._working_dir(str(tmp_path), view(masked=[str(tmp_path)], writable=[str(tmp_path)], home=None, shown=[], carve_outs=[]))
    with pytest.raises(SandboxSetupError, match="does not exist"):
        planner._working_dir(str(tmp_path / "gone"), shown)
    with pytest.raises(SandboxSetupError, match="not visible inside the sandbox"):
        planner._working_dir("/tmp", view(masked=[], writable=[], home=None, shown=[], carve_outs=[]))
    (tmp_path / "out").mkdir()
    carved = view(masked=[str(tmp_path)], writable=[str(tmp_path / "out")], home=None, shown=[], carve_outs=[str(tmp_path / "out")])
    assert planner._working_dir(str(tmp_path / "out"), carved) == os.path.realpath(tmp_path / "out")  # a carve-out is seen


def test_ensure_audit_log_makes_every_generation(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "audit.jsonl"
    planner._ensure_audit_log(Policy(audit=AuditRules(log=str(log))))
    assert sorted(p.name for p in log.parent.iterdir()) == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert log.stat().st_mode & 0o777 == 0o600


def test_ensure_audit_log_leaves_a_symlink_alone(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    log.symlink_to(tmp_path / "elsewhere")
    planner._ensure_audit_log(Policy(audit=AuditRules(log=str(log))))
    assert not (tmp_path / "elsewhere").exists()


def ssh_request(tmp_path: Path, allow: tuple[str, ...], *, mode: NetworkMode = NetworkMode.ALLOWLIST, dry_run: bool = False) -> Any:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "known_hosts").write_text("github.com ssh-ed25519 AAAAC3Nza\nelsewhere.example ssh-ed25519 AAAAC3Nzb\n")
    policy = Policy(origin="/p/.stockade.toml", network=NetworkRules(mode=mode, allow=allow))
    return SimpleNamespace(policy=policy, dry_run=dry_run, locations=SimpleNamespace(cache=tmp_path / "cache", home=home))


def test_a_raw_tcp_rule_binds_ssh_its_proxy_command_config_and_host_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os.path, "isfile", lambda path: path == "/etc/ssh/ssh_config" or os.path.exists(path) and not os.path.isdir(path))
    files, binds, env = planner._ssh(ssh_request(tmp_path, ("pypi.org", "github.com:22")), View())
    targets = {piece.dest: piece.source for piece in binds if isinstance(piece, bw.ReadOnlyBindFrom)}
    script, config, known = files
    assert targets == {
        "/run/stockade/ssh-proxy": script,
        "/run/stockade/ssh_config": config,
        "/run/stockade/ssh_known_hosts": known,
        "/etc/ssh/ssh_config": config,  # a plain `ssh` reads ours
    }
    assert env == {"GIT_SSH_COMMAND": "ssh -F /run/stockade/ssh_config", "STOCKADE_SSH_CONFIG": "/run/stockade/ssh_config"}
    assert Path(known).read_text() == "github.com ssh-ed25519 AAAAC3Nza\n"
    assert "the host's /etc/ssh/ssh_config" in Path(config).read_text()


@pytest.mark.parametrize(
    "allow, mode, dry_run",
    [
        (("github.com", "pypi.org:443", "plain.test:80"), NetworkMode.ALLOWLIST, False),  # no raw-TCP port named
        (("github.com:22",), NetworkMode.NONE, False),
        (("github.com:22",), NetworkMode.ALLOWLIST, True),  # a dry run makes nothing
    ],
)
def test_without_a_raw_tcp_rule_nothing_of_ssh_is_made(tmp_path: Path, allow: tuple[str, ...], mode: NetworkMode, dry_run: bool) -> None:
    assert planner._ssh(ssh_request(tmp_path, allow, mode=mode, dry_run=dry_run), View()) == ((), [], {})
    assert not (tmp_path / "cache").exists()


def test_the_host_ssh_config_copies_in_only_what_the_sandbox_could_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy of /etc/ssh/ssh_config is readable inside: an Include of a file the sandbox cannot read (a private
    home, a path the policy hides, anything outside /etc/ssh, through a link too) must not be copied into it."""
    from stockade.proxy.client import sshroute

    etc = tmp_path / "etc" / "ssh"
    (etc / "ssh_config.d").mkdir(parents=True)
    request = ssh_request(tmp_path, ("github.com:22",))
    home = Path(request.locations.home)
    (home / ".ssh" / "leak.conf").write_text("# HOME-SECRET\nHost home-only.example\n")
    (etc / "ssh_config.d" / "ok.conf").write_text("Host visible.example\n    Port 2200\n")
    (etc / "ssh_config.d" / "masked.conf").write_text("# MASKED-SECRET\n")
    (etc / "ssh_config.d" / "link.conf").symlink_to(home / ".ssh" / "leak.conf")
    outside = tmp_path / "outside.conf"
    outside.write_text("# OUTSIDE-SECRET\n")
    (etc / "ssh_config").write_text(f"Include ssh_config.d/*.conf\nInclude {home}/.ssh/leak.conf\nInclude {outside}\nHost *\n    SendEnv LANG\n")
    monkeypatch.setattr(sshroute, "SYSTEM_CONFIG", str(etc / "ssh_config"))
    view = View(home=str(home), writable=[str(tmp_path / "etc"), str(outside)], masked=[str(etc / "ssh_config.d" / "masked.conf")])
    files, _binds, _env = planner._ssh(request, view)
    text = Path(files[1]).read_text()
    assert "Host visible.example" in text and "SendEnv LANG" in text  # the control: what the sandbox sees is copied
    for secret in ("HOME-SECRET", "home-only.example", "MASKED-SECRET", "OUTSIDE-SECRET"):
        assert secret not in text
    # The host config itself hidden by the policy: none of it is copied.
    hidden = planner._ssh(request, View(home=str(home), writable=[str(tmp_path / "etc")], masked=[str(etc)]))
    assert "SendEnv" not in Path(hidden[0][1]).read_text()
