"""ssh and git over ssh through the filter, through real runs against a loopback sshd.

The sshd (tests/sshkit.py: Debian's, unpacked, never installed) listens on
127.0.0.1; the daemon reaches it as `git.test` through its test resolver.
Each refusal test has its allowed twin: what must fail fails, at the daemon
(its audit record says so, and sshd saw no connection), and the same run
with the rule that allows it works.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from stockade.proxy.client.sshroute import SCRIPT_TEXT
from stockade.proxy.filter.tunnels import RAW_TCP
from tests.e2e.netfixtures import make_box, state_dir, wait_for
from tests.netkit import stop_daemon
from tests.sshkit import Sshd, keygen, sshd_binary, unusable
from tests.visible import force_rmtree, visible_root

pytestmark = pytest.mark.e2e

HOST = "git.test"
q = shlex.quote


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    why = unusable()
    if why:
        pytest.skip(why)
    root = visible_root("s")
    scratch = tmp_path_factory.mktemp("ssh")
    box = make_box(root / "box")
    keys = root / "keys"
    keys.mkdir(mode=0o700)
    secret = keygen(box.home / ".ssh" / "id_ed25519")  # hidden inside: only the agent may use it
    visible_key = keygen(keys / "id_visible")  # a key the sandbox can read (what `-i` tests use)
    binary = sshd_binary()
    assert binary is not None
    sshd = Sshd(binary, scratch / "sshd", [secret, visible_key])
    other = 1 if sshd.port < 65535 else -1
    known = box.home / ".ssh" / "known_hosts"
    known.write_text(sshd.known_hosts_line(HOST) + "elsewhere.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHiddenHostList\n")
    names = scratch / "names.json"
    upstreams = [f"127.0.0.1:{p}" for p in (sshd.port, sshd.port + other, 443, 80)]
    names.write_text(json.dumps({"names": {HOST: ["127.0.0.1"]}, "upstreams": upstreams}))
    box.env.update(STOCKADE_PROXY_TEST_RESOLVER=str(names), STOCKADE_PROXY_IDLE="60")
    repo = root / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True)
    proxy_script = box.project / "ssh-proxy"  # the daemon's refusals, tried with stockade's own ProxyCommand
    proxy_script.write_text(SCRIPT_TEXT)
    yield SimpleNamespace(
        box=box,
        sshd=sshd,
        port=sshd.port,
        other=sshd.port + other,
        key=visible_key,
        secret=secret,
        repo=repo,
        root=root,
        proxy_script=proxy_script,
    )
    stop_daemon(state_dir(box) / "run")
    sshd.stop()
    force_rmtree(root)


def policy(*allow: str, extra: str = "") -> str:
    return f'extends = ["default"]\n[network]\nallow = {json.dumps(list(allow))}\n{extra}'


def audit(world: SimpleNamespace) -> list[dict[str, object]]:
    path = state_dir(world.box) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def ssh(world: SimpleNamespace, command: str, *, port: int | None = None, key: bool = True, proxy: bool = False) -> str:
    """A shell line: plain `ssh` to git.test (the sandbox's ssh config sends it through the proxy)."""
    options = "-o BatchMode=yes -o ConnectTimeout=10"
    if key:
        options += f" -o IdentitiesOnly=yes -i {q(str(world.key))}"
    if proxy:  # stockade's ProxyCommand named by hand: for policies that bind no ssh config
        options += f" -o {q('ProxyCommand=/bin/bash ' + str(world.proxy_script) + ' %h %p')}"
    return f"ssh {options} -p {port or world.port} {HOST} {q(command)}"


def last(world: SimpleNamespace, before: int, **match: object) -> list[dict[str, object]]:
    """The end records since `before` that match; a tunnel's is written once its connection closed, so wait for one."""

    def found() -> list[dict[str, object]]:
        return [r for r in audit(world)[before:] if r.get("phase") == "end" and all(r.get(k) == v for k, v in match.items())]

    wait_for(lambda: bool(found()), timeout=10)
    return found()


def test_ssh_runs_a_remote_command_through_the_daemon_and_is_audited(world: SimpleNamespace) -> None:
    before, accepted, connections = len(audit(world)), world.sshd.accepted(), world.sshd.connections()
    result = world.box.run(ssh(world, "echo hello-from-sshd; head -c 100000 /dev/zero"), policy=policy(f"{HOST}:{world.port}"))
    assert result.returncode == 0, result
    assert "hello-from-sshd" in result.stdout
    assert (world.sshd.accepted(), world.sshd.connections()) == (accepted + 1, connections + 1)
    (record,) = last(world, before, host=HOST, port=world.port)
    assert (record["decision"], record["scheme"], record["rule"]) == ("allow", "ssh", f'allow "{HOST}:{world.port}"')
    assert int(record["bytes_up"]) > 1000 and int(record["bytes_down"]) > 100000  # counted both ways


def test_the_port_not_in_allow_is_refused(world: SimpleNamespace) -> None:
    before, connections = len(audit(world)), world.sshd.connections()
    # Another port of the same host is allowed: the ssh config is there, and sends ssh to the daemon, which refuses.
    result = world.box.run(ssh(world, "echo NOPE"), policy=policy(f"{HOST}:{world.other}"))
    assert result.returncode != 0 and "NOPE" not in result.stdout
    assert f"the proxy refused {HOST}:{world.port}: HTTP/1.1 403" in result.stderr  # and why, from the daemon
    assert world.sshd.connections() == connections  # refused before any dial
    (record,) = last(world, before, host=HOST, port=world.port)
    assert record["decision"] == "deny" and record["rule"] == f"no allow rule matches port {world.port}"


def test_a_rule_without_a_port_opens_no_raw_tcp(world: SimpleNamespace) -> None:
    before, connections = len(audit(world)), world.sshd.connections()
    result = world.box.run(ssh(world, "echo NOPE", proxy=True), policy=policy(HOST))
    assert result.returncode != 0 and "NOPE" not in result.stdout
    assert world.sshd.connections() == connections  # the tunnel was cut before its dial
    (record,) = last(world, before, host=HOST, port=world.port)
    assert (record["decision"], record["rule"], record["scheme"]) == ("deny", RAW_TCP, "tcp")
    assert record["hint"] == f'allow = ["{HOST}:{world.port}"]'


@pytest.mark.parametrize("port", [443, 80])
def test_raw_tcp_on_http_ports_stays_refused(world: SimpleNamespace, port: int) -> None:
    before = len(audit(world))
    result = world.box.run(ssh(world, "echo NOPE", port=port, proxy=True), policy=policy(f"{HOST}:{port}", f"{HOST}:{world.port}"))
    assert result.returncode != 0 and "NOPE" not in result.stdout
    (record,) = last(world, before, host=HOST, port=port)
    assert (record["decision"], record["rule"]) == ("deny", RAW_TCP)
    assert not record.get("hint")  # no rule opens raw TCP there


def test_git_clone_and_push_over_ssh(world: SimpleNamespace) -> None:
    before = len(audit(world))
    url = f"ssh://{HOST}:{world.port}{world.repo}"
    script = (
        f'export GIT_SSH_COMMAND="$GIT_SSH_COMMAND -o BatchMode=yes -o IdentitiesOnly=yes -i {q(str(world.key))}"\n'
        f"cd {q(str(world.box.project))} && rm -rf clone && git clone -q {q(url)} clone && cd clone\n"
        "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m from-the-sandbox\n"
        "git push -q origin HEAD:main && git ls-remote origin main\n"
    )
    result = world.box.run(script, policy=policy(f"{HOST}:{world.port}"), timeout=120)
    assert result.returncode == 0, result
    log = subprocess.run(["git", "--git-dir", str(world.repo), "log", "--format=%s", "main"], capture_output=True, text=True, check=True)
    assert log.stdout.split() == ["from-the-sandbox"]
    schemes = [(r["decision"], r["scheme"]) for r in last(world, before, host=HOST, port=world.port)]
    assert schemes and set(schemes) == {("allow", "ssh")}  # clone, push, ls-remote: one tunnel each


def test_keys_under_home_ssh_stay_unreadable(world: SimpleNamespace) -> None:
    script = (
        "cat ~/.ssh/id_ed25519 ~/.ssh/known_hosts 2>&1; echo @@CONFIG@@; cat /etc/ssh/ssh_config; echo @@KNOWN@@; cat /run/stockade/ssh_known_hosts\n"
        + ssh(world, "echo NOPE", key=False)
    )
    result = world.box.run(script, policy=policy(f"{HOST}:{world.port}"))
    assert "PRIVATE KEY" not in result.stdout and "NOPE" not in result.stdout
    assert "Permission denied (publickey)" in result.stderr  # ssh got through, but had no key to offer
    own, rest = result.stdout.split("@@CONFIG@@\n", 1)
    config, known = rest.split("@@KNOWN@@\n", 1)
    assert "ProxyCommand /bin/bash /run/stockade/ssh-proxy %h %p" in config
    assert f"[{HOST}]:{world.port} ssh-ed25519" in known and "elsewhere.example" not in known  # only the allowed host's line
    # The control: the same key, readable where the policy shows it, gets in.
    shown = world.box.run(ssh(world, "echo YES"), policy=policy(f"{HOST}:{world.port}"))
    assert shown.returncode == 0 and "YES" in shown.stdout, shown


def test_an_agent_socket_in_unix_sockets_signs_for_the_sandbox(world: SimpleNamespace) -> None:
    sock = world.root / "agent.sock"
    agent = subprocess.run(["ssh-agent", "-a", str(sock), "-s"], capture_output=True, text=True, check=True)
    pid = int(agent.stdout.split("SSH_AGENT_PID=", 1)[1].split(";", 1)[0])
    try:
        subprocess.run(["ssh-add", "-q", str(world.secret)], env={**os.environ, "SSH_AUTH_SOCK": str(sock)}, check=True, capture_output=True)
        env_line = f'[env]\nset = {{ SSH_AUTH_SOCK = "{sock}" }}\n'
        listed = policy(f"{HOST}:{world.port}", extra=f'unix_sockets = ["{sock}"]\n{env_line}')
        result = world.box.run(ssh(world, "echo signed-by-agent", key=False), policy=listed)
        assert result.returncode == 0 and "signed-by-agent" in result.stdout, result
        # Without the socket listed, the same agent is out of reach: no key, no login.
        unlisted = world.box.run(ssh(world, "echo NOPE", key=False), policy=policy(f"{HOST}:{world.port}", extra=env_line))
        assert unlisted.returncode != 0 and "NOPE" not in unlisted.stdout
        assert "Permission denied (publickey)" in unlisted.stderr
    finally:
        os.kill(pid, 15)
