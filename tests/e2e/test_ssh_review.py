"""Hostile review of ssh through the filter: attacks that must fail, each with its legitimate twin."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

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
    root = visible_root("r")
    scratch = tmp_path_factory.mktemp("sshr")
    box = make_box(root / "box")
    keys = root / "keys"
    keys.mkdir(mode=0o700)
    visible_key = keygen(keys / "id_visible")
    binary = sshd_binary()
    assert binary is not None
    sshd = Sshd(binary, scratch / "sshd", [visible_key])
    known = box.home / ".ssh" / "known_hosts"
    known.write_text(sshd.known_hosts_line(HOST))
    names = scratch / "names.json"
    names.write_text(json.dumps({"names": {HOST: ["127.0.0.1"], "inner.test": ["127.0.0.2"]}, "upstreams": [f"127.0.0.1:{sshd.port}"]}))
    box.env.update(STOCKADE_PROXY_TEST_RESOLVER=str(names), STOCKADE_PROXY_IDLE="60")
    yield SimpleNamespace(box=box, sshd=sshd, port=sshd.port, key=visible_key, root=root)
    stop_daemon(state_dir(box) / "run")
    sshd.stop()
    force_rmtree(root)


def policy(*allow: str, extra: str = "", top: str = "") -> str:
    return f'extends = ["default"]\n{top}[network]\nallow = {json.dumps(list(allow))}\n{extra}'


def audit(world: SimpleNamespace) -> list[dict[str, object]]:
    path = state_dir(world.box) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def ends(world: SimpleNamespace, before: int, **match: object) -> list[dict[str, object]]:
    def found() -> list[dict[str, object]]:
        return [r for r in audit(world)[before:] if r.get("phase") == "end" and all(r.get(k) == v for k, v in match.items())]

    wait_for(lambda: bool(found()), timeout=10)
    return found()


def ssh(world: SimpleNamespace, command: str, host: str = HOST) -> str:
    options = f"-o BatchMode=yes -o ConnectTimeout=10 -o IdentitiesOnly=yes -i {q(str(world.key))}"
    return f"ssh {options} -p {world.port} {host} {q(command)}"


RAW = r"""
import os, socket, sys
host, port, first = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode().decode("unicode_escape").encode("latin-1")
proxy = os.environ["HTTPS_PROXY"].split("://", 1)[1].rstrip("/").rsplit("@", 1)[-1]
ph, pp = proxy.rsplit(":", 1)
s = socket.create_connection((ph, int(pp)), timeout=10)
s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(1)
    if not chunk:
        break
    head += chunk
print("HEAD", head.split(b"\r\n")[0].decode())
s.sendall(first)
data = b""
try:
    while len(data) < 4096:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except Exception as e:
    print("ERR", type(e).__name__)
print("GOT", data[:200])
"""


def raw(world: SimpleNamespace, host: str, port: int, first: str) -> str:
    return f"python3 -c {q(RAW)} {q(host)} {port} {q(first)}"


def test_no_raw_tcp_to_a_credential_host(world: SimpleNamespace) -> None:
    """A host a credential goes to has every answer masked: raw TCP (ssh) there could not be, so it is refused."""
    before, connections = len(audit(world)), world.sshd.connections()
    credential = '[credentials.TOK]\nenv = "TOKV"\nhosts = ["git.test"]\n'
    result = world.box.run(ssh(world, "echo NOPE"), policy=policy(f"{HOST}:{world.port}") + credential, env={"TOKV": "s3cret-value"})
    assert result.returncode != 0 and "NOPE" not in result.stdout
    assert world.sshd.connections() == connections  # cut before the dial
    (record,) = ends(world, before, host=HOST, port=world.port)
    assert record["decision"] == "deny" and not record.get("hint")  # no rule opens it
    # The control: the same run with the credential for another host gets in.
    other = '[credentials.TOK]\nenv = "TOKV"\nhosts = ["api.test"]\n'
    allowed = world.box.run(ssh(world, "echo YES"), policy=policy(f"{HOST}:{world.port}", "api.test") + other, env={"TOKV": "s3cret-value"})
    assert allowed.returncode == 0 and "YES" in allowed.stdout, allowed


def test_a_stored_plan_follows_known_hosts_and_the_rules(world: SimpleNamespace) -> None:
    """The plan cache is on: a host key added outside reaches the next run, and a rule taken away closes ssh."""
    known = world.box.home / ".ssh" / "known_hosts"
    line = known.read_text()
    rules = policy(f"{HOST}:{world.port}")
    try:
        known.write_text("")
        first = world.box.run(ssh(world, "echo NOPE"), policy=rules)
        assert first.returncode != 0 and "Host key verification failed" in first.stderr
        known.write_text(line)  # `ssh-keyscan` outside
        second = world.box.run(ssh(world, "echo YES"), policy=rules)
        assert second.returncode == 0 and "YES" in second.stdout, second
    finally:
        known.write_text(line)
    before = len(audit(world))
    gone = world.box.run(ssh(world, "echo NOPE"), policy=policy(f"{HOST}:{world.port + 1}"))
    assert gone.returncode != 0 and "NOPE" not in gone.stdout
    # The allowed run's tunnel may end (and be recorded) after `before` was counted: only denials count here.
    (record,) = [r for r in ends(world, before, host=HOST, port=world.port) if r["decision"] == "deny"]
    assert "no allow rule matches port" in str(record["rule"]), record


def test_a_host_port_rule_keeps_the_resolved_address_check(world: SimpleNamespace) -> None:
    """inner.test resolves to 127.0.0.2: its host:port rule opens ssh to a public address only."""
    before = len(audit(world))
    result = world.box.run(ssh(world, "echo NOPE", host="inner.test"), policy=policy(f"inner.test:{world.port}"))
    assert result.returncode != 0 and "NOPE" not in result.stdout
    (record,) = ends(world, before, host="inner.test", port=world.port)
    assert record["decision"] == "deny" and "loopback" in str(record["rule"])
    # The control: the name that resolves to the test's known upstream gets in.
    allowed = world.box.run(ssh(world, "echo YES"), policy=policy(f"{HOST}:{world.port}"))
    assert allowed.returncode == 0 and "YES" in allowed.stdout, allowed
