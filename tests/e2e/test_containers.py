"""Containers from inside the sandbox, through the gate, against a real engine (podman's Docker API).

Each refusal is tried next to a control that the same run makes and the engine
runs; what the run made is gone when it ends (or kept, with `keep`), what it
did not make is invisible to it, and a run killed with -9 leaves nothing the
next run does not remove.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers_engine import IMAGE, OTHER_IMAGE, WEB_IMAGE, Engine, start_engine
from tests.e2e.boxes import Box

pytestmark = [pytest.mark.sandbox]

CLIENT = r"""
import http.client, json, socket, sys

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/run/docker.sock")

results = []
for method, path, body in json.loads(sys.argv[1]):
    connection = Unix("docker", timeout=60)
    connection.request(method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": "application/json"})
    answer = connection.getresponse()
    data = answer.read()
    try:
        shown = json.loads(data) if data.strip() else None
    except ValueError:
        shown = data.decode("latin-1")
    results.append([answer.status, shown])
    if answer.status == 201 and isinstance(shown, dict) and "Id" in shown:
        sys.stderr.write("created " + shown["Id"] + "\n")
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    root = Path("/var/tmp") / f"stockade-podman-{os.getpid()}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    found = start_engine(root)
    try:
        yield found
    finally:
        found.stop()
        shutil.rmtree(root, ignore_errors=True)


def _policy(engine: Engine, extra: str = "") -> str:
    return f'extends = ["default"]\n[containers]\nengine = "podman"\nsocket = "{engine.socket}"\nimages = ["localhost/stockade-test:*"]\n{extra}'


def _calls(
    box: Box, engine: Engine, calls: list[list[object]], extra: str = "", after: str = ""
) -> tuple[list[list[object]], subprocess.CompletedProcess[str]]:
    (box.project / "client.py").write_text(CLIENT)
    script = f"python3 client.py '{json.dumps(calls)}'{after}"
    done = box.run(script, policy=_policy(engine, extra), timeout=180)
    assert done.stdout.strip(), done
    return json.loads(done.stdout.strip().splitlines()[0]), done


def _create(command: list[str], **fields: object) -> dict[str, object]:
    return {"Image": IMAGE, "Cmd": command, **fields}


def test_a_container_runs_and_is_gone_after_the_run_and_others_stay_unseen(vbox: Box, engine: Engine) -> None:
    foreign = engine.run("create", "--name", "foreign-one", IMAGE, "sleep", "1000").stdout.strip()
    calls = [
        ["POST", "/v1.41/containers/create?name=mine", _create(["sh", "-c", "echo hi-from-inside"])],
        ["POST", "/v1.41/containers/mine/start", None],
        ["POST", "/v1.41/containers/mine/wait", None],
        ["GET", "/v1.41/containers/mine/logs?stdout=1", None],
        ["GET", "/v1.41/containers/json?all=1", None],
        ["GET", "/v1.41/containers/foreign-one/json", None],
        ["GET", f"/v1.41/containers/{foreign}/json", None],
        ["POST", "/v1.41/containers/foreign-one/exec", {"Cmd": ["id"]}],
        ["DELETE", f"/v1.41/containers/{foreign[:12]}?force=1", None],
        ["POST", "/v1.41/containers/mine/start", None],  # a second start: refused (each start makes the working folder on the host side)
        ["PUT", "/v1.41/containers/mine/archive?path=/", None],  # into a stopped container: refused
        ["GET", f"/v1.41/images/{OTHER_IMAGE}/json", None],  # an image the policy does not allow: not shown
    ]
    results, done = _calls(vbox, engine, calls)
    assert [status for status, _ in results] == [201, 204, 200, 200, 200, 404, 404, 404, 404, 403, 403, 404], (results, done.stderr)
    assert results[2][1]["StatusCode"] == 0 and "hi-from-inside" in str(results[3][1])
    assert [item["Names"] for item in results[4][1]] in ([["/mine"]], [["mine"]])  # its own, and nothing of the host's
    assert engine.names() == []  # removed when the run ended
    assert "foreign-one" in engine.run("ps", "-a", "--format", "{{.Names}}").stdout  # control: the host's own stays


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        pytest.param({"HostConfig": {"Privileged": True}}, "privileged", id="privileged"),
        pytest.param({"HostConfig": {"CapAdd": ["SYS_ADMIN"]}}, "capabilities", id="cap-add"),
        pytest.param({"HostConfig": {"Binds": ["/etc:/host-etc"]}}, "bind mount", id="bind-host-folder"),
        pytest.param({"HostConfig": {"Mounts": [{"Type": "bind", "Source": "/", "Target": "/host"}]}}, "bind mounts", id="mount-bind"),
        pytest.param({"HostConfig": {"NetworkMode": "host"}}, "sandbox's own network", id="host-network"),
        pytest.param({"HostConfig": {"PidMode": "host"}}, "pid namespace", id="host-pid"),
        pytest.param({"HostConfig": {"IpcMode": "host"}}, "ipc namespace", id="host-ipc"),
        pytest.param({"HostConfig": {"UsernsMode": "host"}}, "user namespace", id="host-userns"),
        pytest.param({"HostConfig": {"UTSMode": "host"}}, "uts namespace", id="host-uts"),
        pytest.param(
            {"HostConfig": {"Devices": [{"PathOnHost": "/dev/sda", "PathInContainer": "/dev/sda", "CgroupPermissions": "rwm"}]}},
            "devices",
            id="device",
        ),
        pytest.param({"HostConfig": {"SecurityOpt": ["seccomp=unconfined"]}}, "security option", id="seccomp-off"),
        pytest.param({"HostConfig": {"SecurityOpt": ["apparmor=unconfined"]}}, "security option", id="apparmor-off"),
        pytest.param({"HostConfig": {"Sysctls": {"kernel.shm_rmid_forced": "1"}}}, "sysctls", id="sysctl"),
        pytest.param({"HostConfig": {"Runtime": "crun"}}, "runtime", id="other-runtime"),
        pytest.param({"HostConfig": {"MaskedPaths": []}}, "unmasking", id="unmask-proc"),
        pytest.param({"HostConfig": {"CgroupParent": "/"}}, "cgroup", id="host-cgroup"),
        pytest.param(
            {"HostConfig": {"LogConfig": {"Type": "syslog", "Config": {"syslog-address": "udp://1.2.3.4:514"}}}}, "log driver", id="log-elsewhere"
        ),
        pytest.param({"HostConfig": {"Annotations": {"run.oci.keep_original_groups": "1"}}}, "annotations", id="annotations"),
        pytest.param({"HostConfig": {"NewIsolationField": True}}, "not one stockade knows", id="unknown-host-field"),
        pytest.param({"Unknown": 1}, "not one stockade knows", id="unknown-field"),
        pytest.param({"Image": OTHER_IMAGE}, "images allows", id="image-not-allowed"),
        pytest.param(
            {"HostConfig": {"Mounts": [{"Type": "volume", "Source": "fresh1", "Target": "/h", "type": "bind", "source": "/etc"}]}},
            "differ only in case",
            id="mount-case-twin",
        ),
        pytest.param(
            {"HostConfig": {"LogConfig": {"Type": "k8s-file", "config": {"path": "/var/tmp/written-by-sandbox.log"}}}},
            "LogConfig field",
            id="log-path-by-case",
        ),
        pytest.param({"Volumes": {"/var/tmp:/h": {}}}, "container paths only", id="volumes-key-host-bind"),
        pytest.param({"HostConfig": {"Binds": ["newvol:/x:O,upperdir=/var/tmp/up,workdir=/var/tmp/wk"]}}, "volume option", id="bind-overlay-options"),
        pytest.param({"HostConfig": {"OomScoreAdj": -1000}}, "OomScoreAdj", id="oom-score-below-host"),
        pytest.param({"HostConfig": {"Mounts": [{"Target": "/host", "Consistency": "c,type=bind,src=/"}]}}, "Type", id="mount-type-by-consistency"),
        pytest.param(
            {"HostConfig": {"Mounts": [{"Type": "volume", "Target": "/h", "Consistency": "c,volume-opt=o=bind,volume-opt=device=/"}]}},
            "consistency",
            id="mount-options-by-consistency",
        ),
        pytest.param({"Env": ["HOME*"]}, "Env entry", id="env-copied-from-the-engine"),
        pytest.param({"WorkingDir": "/var/run/made-on-the-host"}, "WorkingDir", id="workdir-made-on-the-host"),
        pytest.param({"StopTimeout": 3600}, "StopTimeout", id="stop-timeout-outliving-the-run"),
        pytest.param({"Entrypoint": ["/sbin/init"]}, "systemd mode", id="systemd-mode-entrypoint"),
        pytest.param({"Cmd": ["sh", "-c", "exec /usr/lib/systemd/systemd"]}, "systemd mode", id="systemd-mode-in-a-script"),
        pytest.param({"Labels": {"io.stockade.session=gone": "x"}}, "label", id="label-over-the-session-label"),
        pytest.param({"HostConfig": {"RestartPolicy": {"Name": "always"}}}, "restart policies", id="restart-always"),
        pytest.param({"HostConfig": {"Ulimits": [{"Name": "rtprio", "Soft": 99, "Hard": 99}]}}, "ulimit", id="ulimit-realtime"),
        pytest.param({"HostConfig": {"Ulimits": [{"Name": "nofile", "Soft": 1, "Hard": 1 << 40}]}}, "past this run's own", id="ulimit-past-the-run"),
        pytest.param({"Healthcheck": {"Test": ["CMD", "true"], "Interval": 1000}}, "Healthcheck", id="healthcheck-every-microsecond"),
        pytest.param({"Image": "stockade-other:1"}, "images allows", id="short-name-of-a-local-image"),
        pytest.param({"Image": "LOCALHOST/stockade-test:1"}, "lower-case", id="registry-in-capitals"),
        pytest.param({"HostConfig": {"GroupAdd": ["keep-groups"]}}, "GroupAdd", id="keep-host-groups"),
        pytest.param(
            {
                "HostConfig": {
                    "Mounts": [
                        {
                            "Type": "volume",
                            "Source": "v1",
                            "Target": "/d",
                            "VolumeOptions": {"DriverConfig": {"Name": "local", "Options": {"type": "none", "o": "bind", "device": "/etc"}}},
                        }
                    ]
                }
            },
            "driver options",
            id="volume-bind-by-driver",
        ),
    ],
)
def test_each_loosening_field_is_refused_next_to_a_control_that_runs(vbox: Box, engine: Engine, fields: dict[str, object], said: str) -> None:
    calls = [
        ["POST", "/v1.41/containers/create?name=control", _create(["true"])],
        ["POST", "/v1.41/containers/create?name=tried", _create(["true"], **fields)],
    ]
    results, _done = _calls(vbox, engine, calls)
    assert results[0][0] == 201, results  # the control
    assert results[1][0] == 403 and said in results[1][1]["message"] and results[1][1]["message"].startswith("stockade: "), results
    assert "tried" not in engine.run("ps", "-a", "--format", "{{.Names}}").stdout


def test_unknown_and_engine_wide_calls_are_refused(vbox: Box, engine: Engine) -> None:
    calls = [
        ["GET", "/v1.41/_ping", None],
        ["POST", "/v1.41/build", None],
        ["GET", "/v1.41/networks", None],
        ["GET", "/v4.0.0/libpod/info", None],
        ["POST", "/v1.41/volumes/create", {"Name": "sneaky", "Driver": "local", "DriverOpts": {"type": "none", "o": "bind", "device": "/etc"}}],
        ["POST", "/v1.41/images/create?fromImage=docker.io/library/alpine&tag=latest", None],
        ["POST", "/v1.41/volumes/create", {"Name": "plain"}],
        ["POST", "/v1.41/images/create?fromImage=localhost/stockade-test&tag=1&fromImage=127.0.0.1:9/evil/x", None],
        ["POST", "/v1.41/images/create?fromImage=localhost/stockade-test&tag=1&FromImage=127.0.0.1:9/evil/x", None],
        ["POST", "/v1.41/volumes/create", {"Name": "hostvol"}],
        ["POST", "/v1.41/volumes/create", {"Name": "h"}],
        ["DELETE", "/v1.41/volumes/h", None],
        ["DELETE", "/v1.41/volumes/h", None],  # the engine's remove takes a prefix when no name matches: never the host's hostvol
        ["POST", "/v1.23/containers/create", {"Image": IMAGE}],
        ["POST", "/v1.41/images/create?fromImage=stockade-other&tag=1", None],
        ["GET", "/v1.41/images/json", None],
    ]
    engine.run("volume", "create", "hostvol")
    results, _done = _calls(vbox, engine, calls)
    assert [status for status, _ in results] == [200, 403, 403, 403, 403, 403, 201, 403, 403, 403, 201, 204, 404, 403, 403, 200], results
    assert {tag for image in results[15][1] for tag in image["RepoTags"]} <= {IMAGE, WEB_IMAGE}  # the host's other images are not listed
    assert "exists and is not this run's" in results[9][1]["message"]
    assert "hostvol" in engine.run("volume", "ls", "--format", "{{.Name}}").stdout  # the host's own: neither taken nor removed
    engine.run("volume", "rm", "-f", "hostvol")
    assert "sneaky" not in engine.run("volume", "ls", "--format", "{{.Name}}").stdout
    assert "plain" not in engine.run("volume", "ls", "--format", "{{.Name}}").stdout  # the run's own volume: removed at its end


def test_keep_leaves_what_the_run_made(vbox: Box, engine: Engine) -> None:
    calls = [["POST", "/v1.41/containers/create?name=kept", _create(["true"])]]
    results, _done = _calls(vbox, engine, calls, extra="keep = true\n")
    assert results[0][0] == 201
    assert engine.names("io.stockade.kept") == ["kept"]
    again, _done = _calls(vbox, engine, [["GET", "/v1.41/_ping", None]])  # the next run's sweep takes only what a killed run left
    assert again[0][0] == 200 and engine.names("io.stockade.kept") == ["kept"]
    engine.run("rm", "-f", "kept")


def test_a_run_killed_with_sigkill_leaves_what_the_next_run_removes(vbox: Box, engine: Engine) -> None:
    (vbox.project / "client.py").write_text(CLIENT)
    calls = json.dumps(
        [["POST", "/v1.41/containers/create?name=orphan", _create(["sleep", "1000"])], ["POST", "/v1.41/containers/orphan/start", None]]
    )
    words = [*vbox.command_words(["--policy", str(vbox.policy(_policy(engine)))]), "--", "/bin/sh", "-c", f"python3 client.py '{calls}'; sleep 1000"]
    process = subprocess.Popen(words, cwd=vbox.project, env=vbox.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "orphan" not in engine.names() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "orphan" in engine.names()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
    time.sleep(0.5)
    assert "orphan" in engine.names()  # nothing removed it: the run was killed
    results, _done = _calls(vbox, engine, [["GET", "/v1.41/_ping", None]])
    assert results[0][0] == 200 and engine.names() == []  # the next run with the engine removed it


def test_ctrl_c_of_the_run_removes_its_containers(vbox: Box, engine: Engine) -> None:
    (vbox.project / "client.py").write_text(CLIENT)
    calls = json.dumps(
        [["POST", "/v1.41/containers/create?name=interrupted", _create(["sleep", "1000"])], ["POST", "/v1.41/containers/interrupted/start", None]]
    )
    words = [*vbox.command_words(["--policy", str(vbox.policy(_policy(engine)))]), "--", "/bin/sh", "-c", f"python3 client.py '{calls}'; sleep 1000"]
    process = subprocess.Popen(words, cwd=vbox.project, env=vbox.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while "interrupted" not in engine.names() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "interrupted" in engine.names()
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    assert process.returncode in (130, -signal.SIGINT), err  # stockade ends by the signal that ended the command
    assert engine.names() == [] and b"Traceback" not in err


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker CLI (the client only)")
def test_the_docker_cli_runs_a_container_and_prints_a_refusal(vbox: Box, engine: Engine) -> None:
    script = (
        f"docker run --rm {IMAGE} echo hi-from-docker; echo rc=$?; docker run --rm --privileged {IMAGE} true; echo rc=$?; "
        f"docker run -d --name ex {IMAGE} sleep 100 >/dev/null; docker exec ex echo exec-ok"
    )
    done = vbox.run(script, policy=_policy(engine), timeout=180)
    assert "hi-from-docker" in done.stdout and "rc=0" in done.stdout and "exec-ok" in done.stdout, done
    assert "Error response from daemon: stockade: privileged containers" in done.stderr and "rc=125" in done.stdout, done
    assert engine.names() == []


def test_without_an_engine_the_run_says_so_and_calls_fail_clearly(vbox: Box) -> None:
    (vbox.project / "client.py").write_text(CLIENT)
    policy = 'extends = ["default"]\n[containers]\nengine = "docker"\nsocket = "/nonexistent/docker.sock"\n'
    done = vbox.run(f"python3 client.py '{json.dumps([['GET', '/_ping', None]])}'", policy=policy, timeout=120)
    assert done.returncode == 0, done
    assert json.loads(done.stdout)[0][0] == 502 and "no engine listens at /nonexistent/docker.sock" in done.stderr, done
    assert sys.executable  # the run itself went on


def _web(engine: Engine) -> None:
    if not engine.web:
        pytest.skip("needs a static busybox on the host for the image's httpd and nc (apt-get install busybox-static; .ci/run does)")


def test_a_podman_container_shares_the_sandbox_s_own_network(vbox: Box, engine: Engine) -> None:
    """The sandbox reaches a container's server on its own loopback (the port shown as published there),
    and the container reaches nothing the offline sandbox cannot."""
    _web(engine)
    (vbox.project / "client.py").write_text(CLIENT)
    calls = json.dumps([
        ["POST", "/v1.41/containers/create?name=web", {"Image": WEB_IMAGE, "Cmd": ["httpd", "-f", "-p", "18099", "-h", "/www"],
                                                     "ExposedPorts": {"18099/tcp": {}}, "HostConfig": {"PortBindings": {"18099/tcp": [{"HostPort": ""}]}}}],
        ["POST", "/v1.41/containers/web/start", None],
        ["GET", "/v1.41/containers/web/json", None],
        ["POST", "/v1.41/containers/create?name=out", {"Image": WEB_IMAGE, "Cmd": ["sh", "-c", "nc -w 2 10.1.2.3 80 </dev/null; echo nc=$?"]}],
        ["POST", "/v1.41/containers/out/start", None],
        ["POST", "/v1.41/containers/out/wait", None],
        ["GET", "/v1.41/containers/out/logs?stdout=1&stderr=1", None],
    ])  # fmt: skip
    script = f"python3 client.py '{calls}' > calls.json; sleep 1; curl -s http://127.0.0.1:18099/"
    done = vbox.run(script, policy=_policy(engine), timeout=180)
    results = json.loads((vbox.project / "calls.json").read_text())
    assert [status for status, _ in results] == [201, 204, 200, 201, 204, 200, 200], (results, done.stderr)
    assert done.stdout.strip() == "served-from-a-container", done  # the sandbox's loopback is the container's
    assert results[2][1]["NetworkSettings"]["Ports"] == {"18099/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18099"}]}
    assert "nc=1" in str(results[6][1]) and "unreachable" in str(results[6][1]), results[6]  # offline: no way out
    assert engine.names() == []


NETWORKED = r"""
import json, os, socket, subprocess, sys
allowed, denied = socket.gethostbyname("allowed.test"), "10.1.2.3"  # a name the policy refuses does not even resolve
ask = "(printf 'GET /from-a-container HTTP/1.0\\r\\nHost: allowed.test\\r\\n\\r\\n'; sleep 2) | nc -w 5 {0} {1} | head -c 12; echo; (printf 'GET /x HTTP/1.0\\r\\n\\r\\n'; sleep 1) | nc -w 3 {2} {3}; echo denied-nc=$?"
command = ask.format(allowed, os.environ["HP"], denied, "80")
calls = [["POST", "/v1.41/containers/create?name=net", {"Image": sys.argv[1], "Cmd": ["sh", "-c", command]}],
         ["POST", "/v1.41/containers/net/start", None], ["POST", "/v1.41/containers/net/wait", None],
         ["GET", "/v1.41/containers/net/logs?stdout=1&stderr=1", None]]
print(subprocess.run([sys.executable, "client.py", json.dumps(calls)], capture_output=True, text=True).stdout)
"""


@pytest.mark.network
def test_a_container_s_traffic_meets_the_sandbox_s_filter_and_audit(net_world: object, engine: Engine) -> None:
    from tests.e2e.netfixtures import NetWorld

    assert isinstance(net_world, NetWorld)
    _web(engine)
    w = net_world
    (w.box.project / "client.py").write_text(CLIENT)
    (w.box.project / "networked.py").write_text(NETWORKED)
    policy = w.policy("containers") + f'[containers]\nengine = "podman"\nsocket = "{engine.socket}"\nimages = ["localhost/stockade-test:*"]\n'
    mark = w.origins["http"].mark()
    done = w.run(f"export HP DP; python3 networked.py {WEB_IMAGE}", tag="containers", policy=policy, timeout=180)
    assert done.stdout.strip(), done
    results = json.loads(done.stdout.strip().splitlines()[0])
    assert [status for status, _ in results] == [201, 204, 200, 200], (results, done.stderr)
    logs = str(results[3][1])
    assert " 200" in logs and "HTTP/1." in logs and "denied-nc=" in logs, logs  # the allowed host answered the container
    seen, _ = w.origins["http"].since(mark)
    assert any("/from-a-container" in str(getattr(request, "path", request)) for request in seen), seen  # it went through
    records = w.records("containers", 2)
    assert any(r.get("host") == "allowed.test" and r.get("decision") == "allow" for r in records), records
    assert any(r.get("host") == "10.1.2.3" and r.get("decision") == "deny" for r in records), records  # refused, and audited
    assert engine.names() == []


TESTCONTAINERS = r"""
import sys, time, urllib.request
from testcontainers.core.container import DockerContainer

with DockerContainer(sys.argv[1]).with_command("httpd -f -p 18081 -h /www").with_exposed_ports(18081) as container:
    host, port = container.get_container_host_ip(), container.get_exposed_port(18081)
    for _ in range(100):
        try:
            print(urllib.request.urlopen(f"http://{host}:{port}/", timeout=2).read().decode().strip(), host, port)
            break
        except OSError:
            time.sleep(0.1)
"""


def test_testcontainers_starts_a_service_and_reaches_it(vbox: Box, engine: Engine) -> None:
    """The library a test suite uses, unchanged: Ryuk off and the host named by the run's environment."""
    pytest.importorskip("testcontainers")
    _web(engine)
    (vbox.project / "tc.py").write_text(TESTCONTAINERS)
    done = vbox.run(argv=[sys.executable, "tc.py", WEB_IMAGE], policy=_policy(engine), timeout=180)
    assert done.returncode == 0 and done.stdout.split() == ["served-from-a-container", "localhost", "18081"], done
    assert engine.names() == [] and "Traceback" not in done.stderr


def test_each_judged_call_is_an_audit_record_of_the_run(vbox: Box, engine: Engine) -> None:
    log = vbox.root / "audit" / "audit.jsonl"
    calls = [
        ["POST", "/v1.41/containers/create?name=rec", _create(["true"])],
        ["POST", "/v1.41/containers/rec/start", None],
        ["GET", "/v1.41/containers/rec/json", None],  # a read: not recorded
        ["POST", "/v1.41/containers/create?name=bad", _create(["true"], HostConfig={"Privileged": True})],
    ]
    (vbox.project / "client.py").write_text(CLIENT)
    policy = _policy(engine) + f'[audit]\nlog = "{log}"\n'
    done = vbox.run(f"python3 client.py '{json.dumps(calls)}'", policy=policy, options=["--tool-call", "toolu_ctr"], timeout=180)
    assert done.returncode == 0, done
    from stockade.proxy.audit import read_records

    records = [r for r in read_records(log) if r.get("kind") == "container"]
    assert [(r["decision"], r["operation"]) for r in records] == [
        ("allow", "POST /containers/create"), ("allow", f"POST /containers/{json.loads(done.stdout)[0][1]['Id']}/start"),
        ("deny", "POST /containers/create"),
    ]  # fmt: skip
    assert records[0]["path"] == IMAGE and all(r["tool_call"] == "toolu_ctr" for r in records) and "Privileged" in records[2]["rule"]


def test_a_digest_runs_only_an_image_whose_own_names_are_allowed(vbox: Box, engine: Engine) -> None:
    """The engine finds a digest in any repository: an allowed name in front of another image's digest ran it."""
    digest = engine.run("image", "inspect", OTHER_IMAGE, "--format", "{{.Digest}}").stdout.strip()
    assert digest.startswith("sha256:")
    calls = [
        ["POST", "/v1.41/containers/create?name=ok", _create(["true"])],
        ["POST", "/v1.41/containers/create?name=d1", _create(["true"], Image=f"localhost/stockade-test:1@{digest}")],
        ["POST", "/v1.41/containers/create?name=d2", _create(["true"], Image=f"localhost/stockade-test@{digest}")],
        ["POST", f"/v1.41/images/create?fromImage=localhost/stockade-test&tag=1@{digest}", None],
    ]
    results, _done = _calls(vbox, engine, calls)
    assert [status for status, _ in results] == [201, 403, 403, 403], results
    assert "both a tag and a digest" in results[1][1]["message"] and "images allows" in results[2][1]["message"]
