"""SeatbeltPlanner: the plan (argv, env, notes), explain, and run's supervision.

`run` is exercised with a fake `sandbox-exec` that checks the option shape
and then executes the command unsandboxed: this tests everything around the
sandbox (exit codes, signals, wall time, temp dir, violation report) on any
Unix. The real sandbox is tested in tests/macos.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from stockade.core.backend import RunRequest
from stockade.core.errors import CommandNotFoundError, SandboxSetupError, UsageError
from stockade.profiles.model import Limits, Policy
from stockade.seatbelt.planner import SANDBOX_EXEC, HostPaths, SeatbeltPlanner, proxy_env
from stockade.seatbelt.supervise import exit_code_of, supervise
from tests.seatbelt import seatbelt_support as sup

HOST_ENV = {
    "HOME": str(sup.HOME),
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "AWS_SECRET_ACCESS_KEY": "CANARY1",
    "GITHUB_TOKEN": "CANARY2",
    "SSH_AUTH_SOCK": "/tmp/agent.sock",
    "HTTPS_PROXY": "http://evil.example:1",
    "TMPDIR": "/somewhere/else",
}


def _policy(profile: str = "default", project: Path = sup.PROJECT) -> Policy:
    return sup.resolve(project, sup.locations(), profile=profile).policy


def _local_policy(root: Path) -> Policy:
    """The default profile for a project and home folder that really exist (under tmp_path)."""
    return sup.resolve(root, sup.locations(root), profile="default").policy


def _request(policy: Policy, command: tuple[str, ...] = ("make", "test"), *, cwd: Path = sup.PROJECT, quiet: bool = False) -> RunRequest:
    return RunRequest(policy=policy, command=command, cwd=cwd, host_env=HOST_ENV, locations=sup.locations(), quiet=quiet)


# ---- build ----


def test_argv_shape(tmp_path: Path) -> None:
    plan = SeatbeltPlanner(session_id="abc", temp_base=tmp_path).build(_request(_policy()))
    argv = plan.argv
    assert argv[0] == SANDBOX_EXEC == "/usr/bin/sandbox-exec"
    assert argv[1:3] == ("-p", plan.profile.text)
    separator = argv.index("--")
    assert argv[separator + 1 :] == ("make", "test")
    options = argv[3:separator]
    assert options[0::2] == ("-D",) * len(plan.params)
    assert options[1::2] == tuple(f"{k}={v}" for k, v in plan.params)
    assert plan.tag == "stockade-abc"
    assert plan.temp_dir == Path(os.path.realpath(tmp_path)) / "stockade-abc"
    assert dict(plan.params)["TEMP_0"] == str(plan.temp_dir)


def test_environment_offline(tmp_path: Path) -> None:
    plan = SeatbeltPlanner(temp_base=tmp_path).build(_request(_policy()))
    env = plan.environment
    assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env and "SSH_AUTH_SOCK" not in env
    assert not {"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy"} & set(env)
    assert env["TMPDIR"] == str(plan.temp_dir)
    assert env["PATH"] == "/usr/bin:/bin"
    assert {"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK"} <= set(plan.withheld_env)
    assert plan.proxy_port is None


def test_environment_with_proxy(tmp_path: Path) -> None:
    plan = SeatbeltPlanner(proxy_port=41234, temp_base=tmp_path).build(_request(_policy("npm")))
    env = plan.environment
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        assert env[name] == "http://127.0.0.1:41234"
    assert env["NO_PROXY"] == env["no_proxy"] == ""
    assert '(remote tcp "localhost:41234")' in plan.profile.text
    assert proxy_env(1)["HTTPS_PROXY"] == "http://127.0.0.1:1"


def test_dry_run_placeholder_port(tmp_path: Path) -> None:
    backend = SeatbeltPlanner(temp_base=tmp_path)
    plan = backend.build(_request(_policy("github")))
    assert plan.proxy_port == 0
    assert '(remote tcp "localhost:0")' in plan.profile.text
    assert any("placeholder" in note for note in plan.notes)
    text = backend.explain(plan)
    assert "placeholder" in text and "127.0.0.1:0" in text


def test_limits_and_ignored_sockets_are_noted(tmp_path: Path) -> None:
    policy = _policy()
    policy = replace(policy, limits=Limits(memory=1 << 30, pids=64, wall_time=5.0, file_size=1 << 20))
    policy = replace(policy, network=replace(policy.network, unix_sockets=("/var/run/docker.sock",)))
    plan = SeatbeltPlanner(temp_base=tmp_path).build(_request(policy))
    assert plan.wall_time == 5.0 and plan.file_size == 1 << 20
    notes = " ".join(plan.notes)
    assert "limits.memory" in notes and "limits.pids" in notes
    assert "unix_sockets" in notes
    assert "docker.sock" not in dict(plan.params).values()


def test_build_refuses_bad_requests(tmp_path: Path) -> None:
    backend = SeatbeltPlanner(temp_base=tmp_path)
    with pytest.raises(UsageError):
        backend.build(_request(_policy(), ()))
    with pytest.raises(UsageError):
        backend.build(_request(_policy(), ("a\0b",)))
    with pytest.raises(ValueError):
        SeatbeltPlanner(proxy_port=70000)


def test_explain_shows_everything_safely(tmp_path: Path) -> None:
    project = sup.HOME / "evil\x1b[2Jname"
    backend = SeatbeltPlanner(session_id="x1", temp_base=tmp_path)
    plan = backend.build(_request(_policy(project=project), ("echo", "hi\x07")))
    text = backend.explain(plan)
    assert "(version 1)" in text and "--- parameters (sandbox-exec -D) ---" in text
    assert "WRITABLE_0=/Users/test/evil\\x1b[2Jname" in text
    assert "\x1b" not in text and "\x07" not in text
    assert "withheld: AWS_SECRET_ACCESS_KEY" in text
    assert text.rstrip().splitlines()[-2].startswith('/usr/bin/sandbox-exec -p "$PROFILE" -D ')
    assert "-- echo $'hi\\x07'" in text


def test_host_paths(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "link-to-proj").symlink_to(project)
    (project / "planted").symlink_to(outside)
    paths = HostPaths(writable_roots=(str(project),))
    real = os.path.realpath
    # a link outside every writable root is followed for allows
    assert real(project) in paths.allow_spellings(str(tmp_path / "link-to-proj"))
    # a link the sandbox could have planted is not
    assert real(outside) not in " ".join(paths.allow_spellings(str(project / "planted" / "x")))
    # denies always follow links
    assert f"{real(outside)}/x" in paths.deny_spellings(str(project / "planted" / "x"))
    assert paths.exists(str(project / "planted")) and not paths.exists(str(project / "nope"))


def test_symlinks_inside_denied_folders_are_denied_at_their_target(tmp_path: Path) -> None:
    """ESCAPES 8: ~/.ssh/id_alias -> ~/dotfiles/id_alias; Seatbelt sees only the target's path."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / "dotfiles").mkdir()
    (home / "dotfiles" / "id_alias").write_text("CANARY")
    (home / ".ssh" / "id_alias").symlink_to(home / "dotfiles" / "id_alias")
    (home / ".ssh" / "dangling").symlink_to(home / "later" / "key")
    policy = sup.resolve(tmp_path / "proj", sup.locations(home), profile="default").policy
    request = RunRequest(policy=policy, command=("true",), cwd=tmp_path, host_env={}, locations=sup.locations(home))
    plan = SeatbeltPlanner(temp_base=tmp_path).build(request)
    ssh = next(e for e in plan.profile.index.deny_read if e.text == str(home / ".ssh"))
    real = os.path.realpath
    assert real(home / "dotfiles" / "id_alias") in ssh.spellings
    assert real(home / "later") + "/key" in ssh.spellings  # a dangling link cannot be retargeted later
    assert ssh.matches(real(home / "dotfiles" / "id_alias"))
    paths = HostPaths(scan_limit=1)
    paths.link_targets(str(home / ".ssh"))
    assert paths.truncated == [str(home / ".ssh")]


# ---- run (fake sandbox-exec) ----


@pytest.fixture
def runner(tmp_path: Path, fake_sandbox_exec: Path):
    """Build and run a plan through the fake sandbox-exec; returns the exit code."""

    def run(
        command: tuple[str, ...], *, policy: Policy | None = None, proxy_port: int | None = None, log: str = "/nonexistent/log", quiet: bool = True
    ) -> int:
        backend = SeatbeltPlanner(
            proxy_port=proxy_port, session_id="testrun", temp_base=tmp_path, sandbox_exec=str(fake_sandbox_exec), log_command=log
        )
        request = RunRequest(
            policy=policy or _local_policy(tmp_path),
            command=command,
            cwd=tmp_path,
            host_env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
            locations=sup.locations(tmp_path),
            quiet=quiet,
        )
        return backend.run(backend.build(request))

    return run


def test_run_needs_sandbox_exec(tmp_path: Path) -> None:
    backend = SeatbeltPlanner(temp_base=tmp_path, sandbox_exec=str(tmp_path / "missing"))
    plan = backend.build(_request(_policy()))
    with pytest.raises(SandboxSetupError, match="macOS only"):
        backend.run(plan)


def test_run_refuses_a_proxied_plan_without_a_port(tmp_path: Path, fake_sandbox_exec: Path) -> None:
    backend = SeatbeltPlanner(temp_base=tmp_path, sandbox_exec=str(fake_sandbox_exec))
    plan = backend.build(_request(_policy("npm"), ("true",)))
    with pytest.raises(SandboxSetupError, match="proxy"):
        backend.run(plan)


def test_exit_codes(runner) -> None:
    assert runner(("true",)) == 0
    assert runner(("sh", "-c", "exit 7")) == 7
    assert runner(("sh", "-c", "kill -TERM $$")) == 128 + signal.SIGTERM
    with pytest.raises(CommandNotFoundError):
        runner(("no-such-command-stockade",))


def test_temp_dir_is_private_and_removed(runner, tmp_path: Path) -> None:
    out = tmp_path / "seen"
    probe = (
        "import os, stat, sys; d = os.environ['TMPDIR']; "
        f"open({str(out)!r}, 'w').write(d + ' ' + oct(stat.S_IMODE(os.stat(d).st_mode))); "
        "os.makedirs(d + '/a/b'); os.chmod(d + '/a', 0)"
    )
    assert runner((sys.executable, "-c", probe)) == 0
    assert out.read_text() == f"{os.path.realpath(tmp_path)}/stockade-testrun 0o700"
    assert not (tmp_path / "stockade-testrun").exists()


def test_wall_time_kills_the_group(runner, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    policy = replace(_local_policy(tmp_path), limits=Limits(wall_time=0.5))
    marker = tmp_path / "late"
    started = time.monotonic()
    code = runner(("sh", "-c", f"(sleep 3; touch {marker}) & sleep 30"), policy=policy)
    assert code == 128 + signal.SIGKILL
    assert time.monotonic() - started < 5
    assert "wall_time limit of 500ms reached" in capfd.readouterr().err
    time.sleep(3.5)
    assert not marker.exists()  # the background job died with the group


def test_background_leftovers_die_with_the_command(runner, tmp_path: Path) -> None:
    marker = tmp_path / "late"
    assert runner(("sh", "-c", f"(sleep 1; touch {marker}) & exit 0")) == 0
    time.sleep(1.5)
    assert not marker.exists()


def test_violation_summary_after_the_run(runner, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    record = f'{{"eventMessage": "Sandbox: cat(42) deny(1) file-read-data {tmp_path}/.ssh/id_test\\nstockade-testrun"}}'
    fake_log = tmp_path / "fake-log"
    fake_log.write_text(f"#!/bin/sh\necho \"Filtering the log data using \\\"$5 $6\\\"\"\nprintf '%s\\n' '{record}'\nexec sleep 30\n")
    fake_log.chmod(fake_log.stat().st_mode | stat.S_IXUSR)
    assert runner(("true",), log=str(fake_log), quiet=False) == 0
    err = capfd.readouterr().err
    assert "stockade: the sandbox denied 1 operation" in err
    assert 'deny_read "~/.ssh"' in err


def test_quiet_runs_do_not_start_log_stream(runner, tmp_path: Path) -> None:
    fake_log = tmp_path / "fake-log"
    fake_log.write_text(f"#!/bin/sh\ntouch {tmp_path}/log-started\nexec sleep 30\n")
    fake_log.chmod(fake_log.stat().st_mode | stat.S_IXUSR)
    assert runner(("true",), log=str(fake_log), quiet=True) == 0
    assert not (tmp_path / "log-started").exists()


# ---- supervise ----


def test_exit_code_of() -> None:
    assert exit_code_of(0) == (0, None)
    assert exit_code_of(3 << 8) == (3, None)
    assert exit_code_of(signal.SIGKILL) == (137, signal.SIGKILL)


def test_file_size_limit(tmp_path: Path) -> None:
    before = __import__("resource").getrlimit(__import__("resource").RLIMIT_FSIZE)
    outcome = supervise(["sh", "-c", "head -c 4096 /dev/zero > big"], env=os.environ, cwd=tmp_path, file_size=1024)
    assert outcome.exit_code != 0
    assert (tmp_path / "big").stat().st_size <= 1024
    assert __import__("resource").getrlimit(__import__("resource").RLIMIT_FSIZE) == before


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_to_stockade_reach_the_command(tmp_path: Path, number: int) -> None:
    """A supervisor process gets the signal; the command's group gets it too; 128+N comes back."""
    child_pid = tmp_path / "pid"
    program = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from stockade.seatbelt.supervise import supervise
        outcome = supervise(["sh", "-c", "echo $$ > {child_pid}; exec sleep 30"], env={{"PATH": "/usr/bin:/bin"}}, cwd=Path("{tmp_path}"))
        sys.exit(outcome.exit_code)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while not child_pid.exists() or not child_pid.read_text().strip():
        assert time.monotonic() < deadline, "supervised command never started"
        time.sleep(0.02)
    os.kill(proc.pid, number)
    assert proc.wait(timeout=10) == 128 + number
    with pytest.raises(ProcessLookupError):
        os.kill(int(child_pid.read_text()), 0)


def _read_until(fd: int, needle: bytes, deadline: float) -> bytes:
    import select

    seen = b""
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out waiting for {needle!r}; got {seen!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 1024)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_interactive_command_owns_the_terminal(tmp_path: Path) -> None:
    """On a terminal the command reads the keyboard and gets Ctrl-C itself (its group is foreground)."""
    import pty

    program = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from stockade.seatbelt.supervise import supervise
        outcome = supervise(["sh", "-c", "echo ready; read x; echo got:$x; exec sleep 30"], env={"PATH": "/usr/bin:/bin"}, cwd=Path("/"))
        print("exit", outcome.exit_code, flush=True)
        sys.exit(0)
        """
    )
    pid, master = pty.fork()
    if pid == 0:  # child: a session leader whose controlling terminal is the pty
        try:
            os.execv(sys.executable, [sys.executable, "-c", program])
        finally:
            os._exit(127)
    try:
        deadline = time.monotonic() + 15
        _read_until(master, b"ready", deadline)
        os.write(master, b"hello\n")
        _read_until(master, b"got:hello", deadline)
        time.sleep(0.2)
        os.write(master, b"\x03")
        _read_until(master, b"exit 130", deadline)  # 128 + SIGINT, delivered by the terminal
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(master)


def test_both_backends_set_the_same_proxy_variables() -> None:
    """One table (core/proxy_env.py): macOS used to set 8 of the 16 variables Linux sets."""
    from stockade.bwrap.running.network import proxy_environment

    linux, macos = proxy_environment(), proxy_env(4321, "t0ken")
    assert set(linux) == set(macos) and len(linux) >= 15
    assert macos["NO_PROXY"] == "" and linux["NO_PROXY"] == "localhost,127.0.0.1,::1"
    assert macos["npm_config_proxy"] == "http://stockade:t0ken@127.0.0.1:4321"


def test_hosts_with_http_rules_get_the_ca_bundle_readable_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.profiles.model import NetworkMode, NetworkRules
    from stockade.proxy.client import cabundle

    locations = sup.locations(tmp_path)
    made = str(locations.cache / "ca" / "bundle-0123456789abcdef.pem")
    monkeypatch.setattr(cabundle, "bundle", lambda files, cache: made)
    policy = replace(_policy("npm"), network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("api.test",), http=(("api.test", ("GET /**",), ()),)))
    request = RunRequest(policy=policy, command=("true",), cwd=sup.PROJECT, host_env=HOST_ENV, locations=locations)
    plan = SeatbeltPlanner(proxy_port=41234, temp_base=tmp_path).build(request)
    assert plan.environment["SSL_CERT_FILE"] == plan.environment["NODE_EXTRA_CA_CERTS"] == made
    text = plan.profile.text
    allowed = next(name for name, value in plan.profile.params if value == made)
    hidden = text.index('(subpath (param "HIDDEN_0"))')
    assert hidden < text.index(f'(allow file-read*\n  (literal (param "{allowed}"))')  # after the hidden cache's deny: it wins
    dry = SeatbeltPlanner(temp_base=tmp_path).build(request)  # a dry run makes nothing
    assert "SSL_CERT_FILE" not in dry.environment and made not in dict(dry.profile.params).values()
    plain = SeatbeltPlanner(proxy_port=41234, temp_base=tmp_path).build(_request(_policy("npm")))
    assert "SSL_CERT_FILE" not in plain.environment


def test_a_raw_tcp_rule_gets_ssh_its_files_readable_and_git_its_command(tmp_path: Path) -> None:
    """macOS cannot bind over /etc/ssh/ssh_config: ssh's files are read where stockade's cache holds them,
    each one alone through the hidden cache's deny, and GIT_SSH_COMMAND names the config."""
    from stockade.profiles.model import NetworkMode, NetworkRules

    locations = sup.locations(tmp_path)
    (locations.home / ".ssh").mkdir(parents=True, exist_ok=True)
    (locations.home / ".ssh" / "known_hosts").write_text(
        "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
        "private.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHiddenHostList\n"
    )
    policy = replace(_policy("npm"), network=NetworkRules(mode=NetworkMode.ALLOWLIST, allow=("github.com:22", "pypi.org")))
    request = RunRequest(policy=policy, command=("true",), cwd=sup.PROJECT, host_env=HOST_ENV, locations=locations)
    plan = SeatbeltPlanner(proxy_port=41234, temp_base=tmp_path).build(request)
    config = plan.environment["STOCKADE_SSH_CONFIG"]
    assert plan.environment["GIT_SSH_COMMAND"] == f"ssh -F {config}"
    assert config.startswith(str(locations.cache / "ssh"))
    text = Path(config).read_text()
    script = text.split("ProxyCommand /bin/bash ", 1)[1].split(" ", 1)[0]
    known = text.split("UserKnownHostsFile ", 1)[1].split("\n", 1)[0]
    assert Path(script).read_text().startswith("#!/bin/bash") and script.startswith(str(locations.cache))
    assert Path(known).read_text().startswith("github.com ssh-ed25519") and "private.example" not in Path(known).read_text()
    params = dict(plan.profile.params)
    hidden = plan.profile.text.index('(subpath (param "HIDDEN_0"))')
    for path in (script, config, known):
        name = next(name for name, value in params.items() if value == path)
        assert hidden < plan.profile.text.index(f'(literal (param "{name}"))')  # after the hidden cache's deny: it wins
    dry = SeatbeltPlanner(temp_base=tmp_path).build(request)  # a dry run makes nothing
    assert "GIT_SSH_COMMAND" not in dry.environment
    plain = SeatbeltPlanner(proxy_port=41234, temp_base=tmp_path).build(_request(_policy("npm")))
    assert "GIT_SSH_COMMAND" not in plain.environment and not any("ssh-proxy" in value for value in dict(plain.profile.params).values())
