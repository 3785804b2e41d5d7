"""`stockade learn` (issue 18, part 2) on real commands, enforced, as root and (test.sh) unprivileged.

Three commands from the issue: a pip download that needs an index and a file
host (two names, the second learned only once the first is reached), a build
writing to a cache outside the project, and a test suite reading a config in
the home. Each converges: after `--write` and `stockade trust`, the command
succeeds under the written policy, a second learn run proposes nothing, and
nothing else is allowed (a host and a folder the command never asked for are
still refused). A secret the command read is never proposed.

The registry is a loopback HTTPS origin the daemon reaches under test names
(STOCKADE_PROXY_TEST_RESOLVER); nothing leaves this machine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.e2e.netfixtures import PY, Origin, make_box, state_dir, tiny_wheel
from tests.netkit import make_certificate, stop_daemon
from tests.visible import force_rmtree, visible_root

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="learn's file refusals need strace (apt-get install strace)")

INDEX, FILES = "index.test", "files.test"
PACKAGE = "stockade-probe-pkg"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = visible_root("learn")
    scratch = tmp_path_factory.mktemp("learn")
    cert, key = make_certificate(root, [INDEX, FILES, "other.test"])
    wheel_name, wheel = tiny_wheel()
    origin = Origin("registry").start((cert, key))
    port = origin.port
    digest = hashlib.sha256(wheel).hexdigest()
    link = f"https://{FILES}:{port}/files/{wheel_name}#sha256={digest}"  # the file host is named only by the index
    origin.files.update({
        "/simple/": (f'<html><body><a href="/simple/{PACKAGE}/">{PACKAGE}</a></body></html>'.encode(), "text/html"),
        f"/simple/{PACKAGE}/": (f'<html><body><a href="{link}">{wheel_name}</a></body></html>'.encode(), "text/html"),
        f"/files/{wheel_name}": (wheel, "application/octet-stream"),
    })  # fmt: skip
    names = scratch / "names.json"
    names.write_text(json.dumps({"names": {name: ["127.0.0.1"] for name in (INDEX, FILES, "other.test")}, "upstreams": [f"127.0.0.1:{port}"]}))
    box = make_box(root / "box")
    box.env.update(STOCKADE_PROXY_TEST_RESOLVER=str(names), STOCKADE_PROXY_IDLE="60")
    yield SimpleNamespace(box=box, origin=origin, port=port, cert=cert, wheel_name=wheel_name, root=root)
    stop_daemon(state_dir(box) / "run")
    origin.stop()
    force_rmtree(root)


def fresh_project(world: SimpleNamespace, name: str) -> Path:
    project = world.root / name
    project.mkdir()
    shutil.copy(world.cert, project / "ca.pem")
    return project


def stockade(world: SimpleNamespace, project: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", *args], cwd=project, env=world.box.env, capture_output=True, text=True, timeout=timeout
    )


def pip_download(world: SimpleNamespace) -> list[str]:
    script = (
        "export PIP_CONFIG_FILE=/dev/null; unset PYTHONPATH; "  # only the network, and Debian's own ssl module
        f'"{PY}" -m pip download --disable-pip-version-check --no-input --retries 0 --timeout 10 --no-deps '
        f"--index-url https://{INDEX}:{world.port}/simple/ --cert ca.pem -d dl {PACKAGE}"
    )
    return ["/bin/sh", "-c", script]


def has_pip() -> bool:
    return subprocess.run([PY, "-m", "pip", "--version"], capture_output=True).returncode == 0


def test_done_when_pip_download_learns_both_registry_hosts_and_converges(world: SimpleNamespace) -> None:
    if not has_pip():
        pytest.skip("Debian's python3 has no pip here (apt-get install python3-pip)")
    project = fresh_project(world, "pip")
    policy = project / ".stockade.toml"
    policy.write_text("# our project\n[limits]\npids = 400  # enough for pip\n")
    first = stockade(world, project, "learn", "--write", "--", *pip_download(world))
    assert first.returncode == 0, first  # the last round's pip succeeded
    data = tomllib.loads(policy.read_text())
    assert data["network"]["allow"] == [INDEX, FILES], policy.read_text()  # as the denials hint them (a test port counts as 443)
    assert "# our project\n" in policy.read_text() and "pids = 400  # enough for pip" in policy.read_text()  # layout kept
    assert "round 3: the command exited 0; 0 new entries" in first.stderr, first.stderr
    assert "not trusted until you read it" in first.stderr
    # Untrusted, the file allows nothing new: a plain run is still refused, and learn says why instead of proposing again.
    plain = stockade(world, project, "run", "--", *pip_download(world))
    assert plain.returncode != 0 and "not trusted" in plain.stderr, plain
    again = stockade(world, project, "learn", "--", *pip_download(world))
    assert "proposes nothing new" in again.stdout and "not in effect" in again.stdout and "stockade trust" in again.stdout, again
    assert stockade(world, project, "trust", str(policy)).returncode == 0
    shutil.rmtree(project / "dl")
    works = stockade(world, project, "run", "--", *pip_download(world))
    assert works.returncode == 0 and (project / "dl" / world.wheel_name).is_file(), works
    converged = stockade(world, project, "learn", "--", *pip_download(world))
    assert converged.returncode == 0 and "proposes nothing new" in converged.stdout and "not in effect" not in converged.stdout, converged
    assert "round 1: the command exited 0; 0 new entries" in converged.stderr
    # Nothing else: a host the command never asked for is still refused.
    other = stockade(world, project, "run", "--", "curl", "-sS", "--cacert", "ca.pem", f"https://other.test:{world.port}/simple/")
    assert other.returncode != 0 and "denied other.test" in other.stderr, other


def test_a_build_cache_outside_the_project_and_a_config_in_home_converge(world: SimpleNamespace) -> None:
    project = fresh_project(world, "build")
    cache = world.box.outside / "build-cache"
    cache.mkdir()
    config = world.box.home / ".config" / "suite" / "settings.ini"
    config.parent.mkdir(parents=True)
    config.write_text("level=3\n")
    elsewhere = world.box.outside / "not-asked"
    elsewhere.mkdir()
    # Both refusals in one round: a place in the home is proposed but not granted to later rounds.
    script = f"grep -q level= {config}; status=$?; echo obj > {cache}/main.o || exit 9; cat ~/.aws/credentials; exit $status"
    first = stockade(world, project, "learn", "--write", "--", "/bin/sh", "-c", script)
    assert first.returncode == 2, first  # grep's own status (no such file): the home's config was proposed, not granted to round 2
    assert "1 entry in your home was proposed but not used by later rounds" in first.stderr, first.stderr
    policy = project / ".stockade.toml"
    data = tomllib.loads(policy.read_text())
    assert data["filesystem"] == {"allow_read": ["~/.config/suite/settings.ini"], "allow_write": [str(cache)]}, policy.read_text()
    assert "network" not in data  # nothing asked for the network
    assert "not proposed: read ~/.aws/credentials: a secret" in first.stdout and "[credentials.NAME]" in first.stdout, first.stdout
    assert "CANARY-AWS" not in first.stdout + first.stderr
    assert stockade(world, project, "trust", str(policy)).returncode == 0
    works = stockade(world, project, "run", "--", "/bin/sh", "-c", script)
    assert works.returncode == 0 and (cache / "main.o").read_text() == "obj\n", works
    again = stockade(world, project, "learn", "--", "/bin/sh", "-c", script)
    assert "proposes nothing new" in again.stdout and "round 1: the command exited 0; 0 new entries" in again.stderr, again
    # Nothing else: a folder next to the cache stays read-only, the rest of the home stays unseen.
    other = stockade(world, project, "run", "--", "/bin/sh", "-c", f"echo x > {elsewhere}/f || echo refused; cat ~/.ssh/id_test || echo hidden")
    assert "refused" in other.stdout and "hidden" in other.stdout and "CANARY" not in other.stdout, other


def test_write_after_a_proposal_writes_it_without_running_the_command_again(world: SimpleNamespace) -> None:
    """learn without --write ran the command (a package really installed); --write must not need it
    to fail again to know what to write."""
    project = fresh_project(world, "write-after")
    counter = world.box.outside / "runs"
    script = f"echo x >> {counter}; echo x > {world.box.outside}/made"
    shown = stockade(world, project, "learn", "--", "/bin/sh", "-c", script)
    assert shown.returncode == 0 and "proposes 1 entry" in shown.stdout, shown
    runs = counter.read_text().count("x")
    written = stockade(world, project, "learn", "--write", "--", "/bin/sh", "-c", script)
    assert written.returncode == 0 and "without running it again" in written.stderr, written
    assert counter.read_text().count("x") == runs  # not run again
    assert f'"{world.box.outside}"' in (project / ".stockade.toml").read_text()
    again = stockade(world, project, "learn", "--write", "--", "/bin/sh", "-c", f"{script}; true")  # another command: it runs
    assert "round 1" in again.stderr and "without running it again" not in again.stderr, again


def test_without_write_nothing_changes_and_a_bad_call_is_one_line(world: SimpleNamespace) -> None:
    project = fresh_project(world, "dry")
    shown = stockade(world, project, "learn", "--", "/bin/sh", "-c", f"echo x > {world.box.outside}/f")
    # Round 2 ran with the learned entry (and wrote the file: learn runs the command for real); the policy is untouched.
    assert shown.returncode == 0 and (world.box.outside / "f").exists() and not (project / ".stockade.toml").exists(), shown
    assert f'+    "{world.box.outside}", # learn: create' in shown.stdout and "to apply it: the same learn with --write" in shown.stdout, shown
    for args, says in ((["learn"], "give the command after --"), (["learn", "--rounds", "0", "--", "true"], "--rounds")):
        bad = stockade(world, project, *args)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and says in bad.stderr, bad
        assert "Traceback" not in bad.stderr
