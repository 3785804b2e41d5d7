"""ESCAPES.md section F (resources), Linux: the limits hold and the host stays usable.

Case 74 (starving the shared proxy daemon) is tested with the daemon: tests/proxy/rules/test_budget.py,
test_door.py and the e2e budget tests of the network suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.boxes import Box
from tests.e2e.escapes import PY, pids_with, policy_text, q, wait_gone


def limits_policy(**limits: str | int) -> str:
    body = "".join(f"{key} = {value if isinstance(value, int) else repr(value)}\n" for key, value in limits.items())
    return policy_text(extra="[limits]\n" + body.replace("'", '"'))


def uses_cgroup(box: Box, policy: str, what: str) -> bool:
    """Whether this machine enforces `what` (pids or memory) through a cgroup, per the dry-run plan."""
    plan = box.run("true", policy=policy, options=["--dry-run"]).stdout
    line = next((text for text in plan.splitlines() if text.startswith("# limits:")), "")
    return any(what in part and "cgroup" in part for part in line.split(";"))


# --- case 69 ----------------------------------------------------------------------------------------


def test_case_69_fork_bomb(vbox: Box, request: pytest.FixtureRequest) -> None:
    """ESCAPES 69: forks fail inside, the host can still fork during the attack, nothing is left behind."""
    policy = limits_policy(pids=256, wall_time="4s")
    cgroup = uses_cgroup(vbox, policy, "pids")
    token = f"stockade-bomb-{os.getpid()}"
    words = [
        sys.executable,
        "-m",
        "stockade.cli.main",
        "run",
        "--policy",
        str(vbox.policy(policy)),
        "--",
        "/bin/sh",
        "-c",
        "(bomb(){ bomb | bomb & }; bomb) 2>/dev/null & exec sleep 30",
        token,
    ]
    # The bomb runs in a subshell: a shell whose own fork fails exits (dash: "Cannot fork"), and the
    # main one must live until wall_time, not end early when the bomb fills the limit first. Its
    # "Cannot fork" chatter goes nowhere: dash writes a line in three writes, and one killed between
    # them would leave a line without its end, which stockade's own note would continue.
    started = time.monotonic()
    process = subprocess.Popen(words, cwd=vbox.project, env=vbox.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        inside = len(pids_with(token))
        host_fork = subprocess.run(["/bin/true"], timeout=10)  # control: the test runner can still fork
        assert host_fork.returncode == 0
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    elapsed = time.monotonic() - started
    assert 0 < inside <= 256 + 8, f"{inside} bomb processes ran (pids = 256); exit {process.returncode}, stderr: {stderr}"
    assert process.returncode == 128 + signal.SIGKILL and elapsed < 15, (process.returncode, elapsed, stderr[-500:])
    # stockade returns only once the namespace is empty: nothing of it runs on after the summary
    assert not pids_with(token), "bomb processes outlived the run"
    notes = [line for line in stderr.splitlines() if line.startswith("stockade:")]
    assert any("wall_time" in line for line in notes), notes
    if not cgroup:
        request.applymarker(
            pytest.mark.xfail(
                reason="HOLE (report): with the RLIMIT_NPROC fallback bwrap/parts/limits.py limit_hit cannot tell that the pids "
                "limit was reached, so the run ends without the one-line 'pids limit' note",
                strict=True,
            )
        )
    assert any("pids limit 256" in line for line in notes), notes


# --- case 70 ----------------------------------------------------------------------------------------

ALLOC = r"""
import sys
size = int(sys.argv[1]) << 20
block = b"\x01" * size  # every page written (a zeroed bytearray would stay untouched)
print("ALLOCATED", sys.argv[1], flush=True)
"""


def test_case_70_memory_limit(vbox: Box) -> None:
    """ESCAPES 70: one process asking for 1 GiB under memory = 256M fails (MemoryError or OOM kill); 32 MiB works."""
    policy = limits_policy(memory="256M")
    attack = vbox.run(argv=[PY, "-c", ALLOC, "1024"], policy=policy)
    assert "ALLOCATED" not in attack.stdout and attack.returncode != 0, attack
    control = vbox.run(argv=[PY, "-c", ALLOC, "32"], policy=policy)
    assert "ALLOCATED 32" in control.stdout, control


def test_case_70_memory_limit_covers_the_whole_tree(vbox: Box, request: pytest.FixtureRequest) -> None:
    """ESCAPES 70 (bubblewrap #192): four processes of 100 MiB each under memory = 256M cannot all hold their memory."""
    policy = limits_policy(memory="256M")
    if not uses_cgroup(vbox, policy, "memory"):
        request.applymarker(
            pytest.mark.xfail(
                reason="HOLE: without a writable cgroup, bwrap/parts/limits.py falls back to RLIMIT_AS, which is per process: "
                "a tree of processes uses a multiple of [limits] memory",
                strict=True,
            )
        )
    hold = ALLOC + "import time; time.sleep(1.5); print('HELD', flush=True)"
    script = "".join(f"{PY} -c {q(hold)} 100 & " for _ in range(4)) + "wait"
    attack = vbox.run(script, policy=policy)
    assert attack.stdout.count("HELD") < 4, attack  # an OOM kill may come after a victim printed ALLOCATED


@pytest.mark.parametrize("folder", ["/tmp", "/var/tmp", "/dev/shm", "/run"])
def test_case_70_ram_backed_scratch_is_sized(vbox: Box, folder: str) -> None:
    """ESCAPES 70 (V9), 14: tmp_size caps the RAM-backed folders (the private /run too, which had no
    size: half the machine's memory); 64 MiB into a 32M tmpfs stops at 32M."""
    policy = limits_policy(tmp_size="32M")
    result = vbox.run(
        f"dd if=/dev/zero of={folder}/fill bs=1M count=64 2>&1; stat -c 'SIZE %s' {folder}/fill;"
        f"dd if=/dev/zero of={folder}/small bs=1M count=4 2>/dev/null && echo SMALL-OK",
        policy=policy,
    )
    assert "No space left on device" in result.stdout, result
    size = int(next(line.split()[1] for line in result.stdout.splitlines() if line.startswith("SIZE")))
    assert size <= 32 << 20, size
    default = vbox.run(f"df -k {folder} | tail -1")
    assert default.returncode == 0 and int(default.stdout.split()[1]) <= (1 << 30) // 1024 + 1024, default  # default is sized too


def test_case_70_the_private_dev_is_no_unsized_scratch_folder(vbox: Box) -> None:
    """ESCAPES 70, 14: bwrap's --dev is a tmpfs of its own, with no size (half the machine's memory):
    64 MiB written straight into /dev under tmp_size = 32M must not land there. The control: the
    devices, /dev/shm and a new pseudo-terminal still work."""
    policy = limits_policy(tmp_size="32M")
    attack = vbox.run("dd if=/dev/zero of=/dev/fill bs=1M count=64 2>&1; stat -c 'SIZE %s' /dev/fill 2>&1", policy=policy)
    sizes = [int(line.split()[1]) for line in attack.stdout.splitlines() if line.startswith("SIZE ")]
    assert not sizes or sizes[0] <= 32 << 20, attack
    control = vbox.run(
        "echo x >/dev/null && head -c 4 /dev/urandom | wc -c && dd if=/dev/zero of=/dev/shm/f bs=1M count=4 2>/dev/null && echo SHM-OK"
        " && python3 -c 'import os; m, s = os.openpty(); print(\"PTY-OK\", os.ttyname(s))'",
        policy=policy,
    )
    assert control.returncode == 0 and "SHM-OK" in control.stdout and "PTY-OK /dev/pts/" in control.stdout, control


# --- case 71 ----------------------------------------------------------------------------------------


def test_case_71_wall_time_kills_everything(vbox: Box) -> None:
    """ESCAPES 71: after wall_time = 2s every busy process is dead; exit 137 and a line naming the limit."""
    token = f"stockade-spin-{os.getpid()}"
    result = vbox.run(
        f"sh -c 'while :; do :; done' {token} & sh -c 'while :; do :; done' {token}", policy=limits_policy(wall_time="2s"), timeout=30
    )  # no timing asserted: the kill is the evidence
    assert result.returncode == 128 + signal.SIGKILL, result
    assert "wall_time" in result.stderr and "2s" in result.stderr.replace(".0s", "s"), result.stderr
    assert not wait_gone(token, 1.0)
    control = vbox.run("sleep 0.2; echo done", policy=limits_policy(wall_time="2s"))
    assert control.returncode == 0 and "done" in control.stdout, control


# --- case 72 ----------------------------------------------------------------------------------------


def test_case_72_file_size_limit(vbox: Box) -> None:
    """ESCAPES 72: with file_size = 1M, big writes stop at 1 MiB (EFBIG/SIGXFSZ); a small file works."""
    policy = limits_policy(file_size="1M")
    attack = vbox.run(
        "dd if=/dev/zero of=big bs=1M count=10; echo dd=$?; fallocate -l 100G big2; echo fallocate=$?;"
        "dd if=/dev/zero of=small bs=512K count=1 2>/dev/null && echo SMALL-OK",
        policy=policy,
    )
    for name in ("big", "big2"):
        path = vbox.project / name
        assert not path.exists() or path.stat().st_size <= 1 << 20, (name, path.stat().st_size)
    assert "dd=0" not in attack.stdout and "fallocate=0" not in attack.stdout, attack
    assert "SMALL-OK" in attack.stdout, attack
    killed = vbox.run(argv=["dd", "if=/dev/zero", "of=big3", "bs=1M", "count=10"], policy=policy)
    assert killed.returncode == 128 + 25 and "file_size limit 1M reached" in killed.stderr, killed  # the summary names the limit
    assert "file_size limit" not in attack.stderr  # control: the shell that lived on was not killed by it


# --- case 73 ----------------------------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def test_case_73_output_flood_streams(vbox: Box) -> None:
    """ESCAPES 73: 300 MB on stdout pass through while stockade's own memory stays flat."""
    total = 300_000_000
    words = [sys.executable, "-m", "stockade.cli.main", "run", "--", "/bin/sh", "-c", f"yes | head -c {total}"]
    process = subprocess.Popen(words, cwd=vbox.project, env=vbox.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    received = 0
    peak = 0
    assert process.stdout is not None
    while chunk := process.stdout.read1(1 << 20):
        received += len(chunk)
        peak = max(peak, _rss_kib(process.pid))
    process.wait(timeout=30)
    assert received == total and process.returncode == 0
    assert 0 < peak < 150 * 1024, f"stockade's RSS reached {peak} KiB"
