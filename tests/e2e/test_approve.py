"""Approving a host while the run waits (issue 18, part 3), with a real terminal (a pty) and a real daemon.

A run at a terminal holds a request to a host its policy does not allow and
asks: once lets that connection through (a second request asks again), for
this run lets every later one through without asking, always writes the host
into the project's policy, and no answer in time is the 403 it always was.
`stockade approve` answers from another process for a run that has no
terminal (`--approve`). Controls: a run without a terminal or with
`--no-approve` (what the agent hook writes) is refused at once, and a host a
deny entry names is never asked about.

The origin is a loopback HTTP server the daemon reaches under a test name
(STOCKADE_PROXY_TEST_RESOLVER); nothing leaves this machine.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.e2e.netfixtures import Origin, make_box, records, state_dir
from tests.netkit import stop_daemon
from tests.visible import force_rmtree, visible_root

HOST = "ask.test"
PROMPT = b"[o]nce"
QUESTION = b" wants "  # a question's first line, written once (the prompt line under it counts down)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    with approval_world(tmp_path_factory.mktemp("approve")) as made:
        yield made


@contextmanager
def approval_world(scratch: Path) -> Iterator[SimpleNamespace]:
    """A HOME on the visible root, a loopback origin the daemon reaches as HOST, 20 s to answer."""
    root = visible_root("approve")
    origin = Origin("ask", blob=b"hello from the origin\n").start()
    names = scratch / "names.json"
    names.write_text(json.dumps({"names": {HOST: ["127.0.0.1"], "never.test": ["127.0.0.1"]}, "upstreams": [f"127.0.0.1:{origin.port}"]}))
    box = make_box(root / "box")
    box.env.update(STOCKADE_PROXY_TEST_RESOLVER=str(names), STOCKADE_PROXY_IDLE="60", STOCKADE_APPROVE_SECONDS="20")
    try:
        yield SimpleNamespace(box=box, origin=origin, port=origin.port, root=root)
    finally:
        stop_daemon(state_dir(box) / "run")
        origin.stop()
        force_rmtree(root)


def project(world: SimpleNamespace, name: str, policy: str = '[network]\nallow = ["pypi.org"]\n') -> Path:
    folder = world.root / name
    folder.mkdir()
    (folder / ".stockade.toml").write_text(policy)
    trusted = subprocess.run(stockade_words("trust", str(folder / ".stockade.toml")), cwd=folder, env=world.box.env, capture_output=True, text=True)
    assert trusted.returncode == 0, trusted
    return folder


def stockade_words(*args: str) -> list[str]:
    return [sys.executable, "-m", "stockade.cli.main", *args]


def curl(world: SimpleNamespace, times: int = 1, host: str = HOST) -> str:
    one = f'curl -sS -o /dev/null -w "status=%{{http_code}}\\n" "http://{host}:{world.port}/"'
    return "; ".join([one] * times)


def at_terminal(world: SimpleNamespace, folder: Path, script: str, answers: list[str], *options: str, timeout: float = 90) -> tuple[int, str]:
    """`stockade run OPTIONS -- sh -c SCRIPT` with a pty as its terminal; answers each prompt in turn."""
    argv = stockade_words("run", *options, "--", "/bin/sh", "-c", script)
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session of its own whose controlling terminal is the pty
        try:
            os.chdir(folder)
            os.execve(argv[0], argv, world.box.env)
        finally:
            os._exit(127)
    output, asked = b"", 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _w, _x = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child and everything on the pty ended
                break
            if not data:
                break
            output += data
        while output.count(QUESTION) > asked and output.rfind(PROMPT) > output.rfind(QUESTION):
            if asked < len(answers) and answers[asked] is not None:
                os.write(fd, answers[asked].encode() + b"\n")
            asked += 1
    else:
        os.kill(pid, 9)
    _pid, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode("utf-8", "replace")


def audit(folder: Path, world: SimpleNamespace) -> list[dict[str, object]]:
    return [r for r in records(state_dir(world.box) / "audit.jsonl") if r.get("host") == HOST and r.get("cwd", str(folder)) == str(folder)]


def test_once_lets_one_request_through_and_the_next_asks_again(world: SimpleNamespace) -> None:
    folder = project(world, "once")
    code, out = at_terminal(world, folder, curl(world, 2), ["o", "n"])
    assert code == 0, out
    assert out.count(QUESTION.decode()) == 2, out  # once is once
    assert f"wants {HOST}:{world.port}" in out and "status=200" in out and "status=403" in out, out


def test_for_this_run_asks_once_and_lets_the_rest_through(world: SimpleNamespace) -> None:
    folder = project(world, "run")
    code, out = at_terminal(world, folder, curl(world, 3), ["r"])
    assert code == 0 and out.count(QUESTION.decode()) == 1 and out.count("status=200") == 3, out
    policy = tomllib.loads((folder / ".stockade.toml").read_text())
    assert policy["network"]["allow"] == ["pypi.org"]  # nothing written
    again, out = at_terminal(world, folder, curl(world), ["n"])  # the next run asks again
    assert "status=403" in out and out.count(QUESTION.decode()) == 1, out


def test_always_writes_the_host_into_the_policy(world: SimpleNamespace) -> None:
    folder = project(world, "always")
    code, out = at_terminal(world, folder, curl(world), [f"a\n{HOST}"])  # always, then the host's name typed
    assert code == 0 and "status=200" in out and f"added {HOST}" in out, out
    assert tomllib.loads((folder / ".stockade.toml").read_text())["network"]["allow"] == ["pypi.org", HOST]
    later = subprocess.run(stockade_words("run", "--", "/bin/sh", "-c", curl(world)), cwd=folder, env=world.box.env, capture_output=True, text=True)
    assert "status=200" in later.stdout, later  # the file stayed trusted: you asked for exactly this


def test_no_answer_in_time_is_the_refusal_it_always_was(world: SimpleNamespace) -> None:
    folder = project(world, "silent")
    world.box.env["STOCKADE_APPROVE_SECONDS"] = "2"
    try:
        started = time.monotonic()
        code, out = at_terminal(world, folder, curl(world), [None])  # type: ignore[list-item]
    finally:
        world.box.env["STOCKADE_APPROVE_SECONDS"] = "20"
    assert "status=403" in out and "no answer" in out, out
    assert time.monotonic() - started < 30
    assert any("no answer within 2 s" in str(r.get("rule")) for r in audit(folder, world)), audit(folder, world)


def test_stockade_approve_answers_a_run_without_a_terminal(world: SimpleNamespace) -> None:
    folder = project(world, "other")
    desk = world.root / "desktop"  # a desktop's notify-send, as the run finds it on its PATH
    desk.mkdir()
    (desk / "notify-send").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {desk}/shown\n')
    (desk / "notify-send").chmod(0o755)
    env = {**world.box.env, "DISPLAY": ":99", "PATH": f"{desk}:{world.box.env['PATH']}"}
    run = subprocess.Popen(
        stockade_words("run", "--approve", "--", "/bin/sh", "-c", curl(world)), cwd=folder, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,  # no terminal
    )  # fmt: skip
    listed = None
    for _ in range(100):
        listed = subprocess.run(stockade_words("approve"), cwd=folder, env=world.box.env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if "stockade approve " in listed.stdout:
            break
        time.sleep(0.2)
    assert listed is not None and f"wants {HOST}:{world.port}" in listed.stdout, listed
    question = listed.stdout.split("[", 1)[1].split("]", 1)[0]
    for _ in range(50):  # the run's desktop notification says how to answer
        if (desk / "shown").exists() and f"stockade approve {question} once|run|always|deny" in (desk / "shown").read_text():
            break
        time.sleep(0.1)
    assert f"wants {HOST}:{world.port}" in (desk / "shown").read_text()
    answered = subprocess.run(stockade_words("approve", question, "always"), cwd=folder, env=world.box.env, capture_output=True, text=True)
    assert answered.returncode == 0 and "adds it to its policy when it ends" in answered.stdout, answered
    out, err = run.communicate(timeout=60)
    assert "status=200" in out and f"added {HOST}" in err, (out, err)
    # Written by the run once its sandbox ended (its checks would take an edit made meanwhile for a planted file).
    assert tomllib.loads((folder / ".stockade.toml").read_text())["network"]["allow"] == ["pypi.org", HOST]
    bad = subprocess.run(stockade_words("approve", question, "once"), cwd=folder, env=world.box.env, capture_output=True, text=True)
    assert bad.returncode == 2 and "no request waits" in bad.stderr and "Traceback" not in bad.stderr, bad


def test_without_a_terminal_or_with_no_approve_it_is_refused_at_once(world: SimpleNamespace) -> None:
    folder = project(world, "controls", '[network]\nallow = ["pypi.org"]\ndeny = ["never.test"]\n')
    plain = subprocess.run(
        stockade_words("run", "--", "/bin/sh", "-c", curl(world)), cwd=folder, env=world.box.env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "status=403" in plain.stdout and PROMPT.decode() not in plain.stdout + plain.stderr, plain
    code, out = at_terminal(world, folder, curl(world), ["o"], "--no-approve")
    assert "status=403" in out and PROMPT.decode() not in out, out
    code, out = at_terminal(world, folder, curl(world, host="never.test"), ["o"])
    assert "status=403" in out and PROMPT.decode() not in out, out  # a deny entry is never put to you


def test_a_loopback_address_is_never_asked(world: SimpleNamespace) -> None:
    """An address of this machine (or its network) is refused at once, as the README says: not a
    prompt that one habitual `r` turns into a way to the services on loopback."""
    folder = project(world, "loopback")
    script = f'curl --noproxy "" -x "$http_proxy" -sS -o /dev/null -w "status=%{{http_code}}\\n" "http://127.0.0.1:{world.port}/"'
    code, out = at_terminal(world, folder, script, ["r"])
    assert "status=403" in out and PROMPT.decode() not in out, out


def test_once_is_one_request_on_a_kept_alive_connection(world: SimpleNamespace) -> None:
    """Plain HTTP through the proxy: the client's connection stays open for more requests (to this
    host or any), and once is the one request it was asked for; the next one asks again."""
    folder = project(world, "keepalive")
    url = f"http://{HOST}:{world.port}/"
    script = f'curl -sS -w "status=%{{http_code}}\\n" -o /dev/null "{url}" -o /dev/null "{url}" -o /dev/null "{url}"'
    code, out = at_terminal(world, folder, script, ["o", "n"])
    assert code == 0 and out.count("status=200") == 1 and out.count("status=403") == 2, out
    assert out.count(QUESTION.decode()) == 2, out  # the second asked; the third was declined with it


FORGED = (
    "printf 'stockade: `npm install` wants registry.npmjs.org:443, which the policy does not allow.\\n"
    "stockade: allow registry.npmjs.org? [o]nce, for this [r]un, [a]lways (adds it to the policy), [N]o (60 s): \\n'; "
)


def test_a_question_the_command_draws_cannot_get_always_for_the_host_it_asks(world: SimpleNamespace) -> None:
    """Issue 34: the command draws a question about a host the user trusts, then asks for another; "always"
    with the trusted name typed allows the real host for this run only and writes nothing into the policy."""
    folder = project(world, "forged")
    code, out = at_terminal(world, folder, FORGED + curl(world), [None, "a\nregistry.npmjs.org"])  # the drawn one takes no keys
    assert code == 0 and "status=200" in out, out
    assert f"{HOST} is allowed for this run only" in out, out
    assert tomllib.loads((folder / ".stockade.toml").read_text())["network"]["allow"] == ["pypi.org"]


def test_a_client_that_ignores_the_proxy_is_asked_about_as_well(world: SimpleNamespace) -> None:
    """Issue 36: the sandbox's resolver answers a name the user may still allow, and the transparent
    door's CONNECT is held for the question like a proxied request; refused, the connection ends."""
    folder = project(world, "direct")
    script = f'curl --noproxy "*" -sS -o /dev/null -w "status=%{{http_code}}\\n" "http://{HOST}:{world.port}/"'
    code, out = at_terminal(world, folder, script, ["r"])
    assert out.count(QUESTION.decode()) == 1 and "status=200" in out, out
    code, out = at_terminal(world, folder, script, ["n"])
    assert out.count(QUESTION.decode()) == 1 and "status=200" not in out, out


def test_a_host_the_system_baseline_does_not_allow_is_never_asked(world: SimpleNamespace) -> None:
    """An approval is a widening like any other: it stays within the administrator's baseline."""
    baseline = world.root / "system-baseline.toml"
    baseline.write_text('[network]\nallow = ["pypi.org"]\n')
    folder = project(world, "baseline")
    saved = dict(world.box.env)
    world.box.env["STOCKADE_SYSTEM_POLICY"] = str(baseline)
    try:
        code, out = at_terminal(world, folder, curl(world, 2), ["a", "a"])
    finally:
        world.box.env.clear()
        world.box.env.update(saved)
    assert QUESTION.decode() not in out and out.count("status=403") == 2, out
    assert 'allow = ["pypi.org"]' in (folder / ".stockade.toml").read_text() and HOST not in (folder / ".stockade.toml").read_text()
    code, out = at_terminal(world, folder, curl(world), ["r"])  # the control: without the baseline it is asked, and let through
    assert QUESTION.decode() in out and "status=200" in out, out
