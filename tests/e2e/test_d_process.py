"""ESCAPES.md section D (process and kernel), Linux.

Syscall probes pass deliberately bad arguments (bubblewrap's try-syscall): the kernel would answer
EFAULT/EBADF/EINVAL/ESRCH, our filter answers EPERM (ENOSYS for clone3). A few syscalls check a
capability before anything else, so the kernel says EPERM too inside a capability-less sandbox; their
rows say so (KERNEL_EPERM) and they are still required to fail. Case 57 (the agent hook's wrapper)
is tested where the hook is: tests/cli/test_hook.py and test_hook_fuzz.py.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path

import pytest

from stockade.bwrap.parts.args import PROC_READ_ONLY
from tests.e2e.boxes import Box
from tests.e2e.escapes import (
    BAD,
    IS_ROOT,
    MACHINE,
    NR,
    PY,
    named,
    pids_with,
    probe,
    process_state,
    q,
    start_canary,
    stop,
    syscall_probe_code,
    wait_gone,
)

NEG = 2**64 - 1  # fd -1
EPERM, ENOSYS = errno.EPERM, errno.ENOSYS
KERNEL_EPERM = "EPERM"  # the kernel checks a capability first: EPERM either way, still must fail

needs_table = pytest.mark.skipif(not NR, reason=f"no syscall table for {MACHINE}")


def syscall_case(case_id: str, name: str, args: tuple[int, ...], kernel: str, expected: int = EPERM):
    return pytest.param(name, args, kernel, expected, id=case_id)


def run_syscall_case(box: Box, name: str, args: tuple[int, ...]) -> dict[str, int]:
    """The attack and, in the same process, a control that reaches the kernel (statfs on a bad pointer)."""
    seen, _ = probe(box, syscall_probe_code([("attack", name, args), ("control", "statfs", (BAD, BAD))]))
    assert seen["control"] == errno.EFAULT, f"the probe cannot see kernel answers: {named(seen)}"
    return seen


# --- case 46 ----------------------------------------------------------------------------------------

TIOCSTI_PROBE = r"""
import ctypes, fcntl, json, struct, termios
libc = ctypes.CDLL(None, use_errno=True)
def ioctl(request, arg):
    ctypes.set_errno(0)
    result = libc.ioctl(0, ctypes.c_ulong(request), arg)
    return ctypes.get_errno() if result < 0 else 0
out = {"plain": [], "high": []}
for byte in b"touch INJECTED\n":
    out["plain"].append(ioctl(termios.TIOCSTI, ctypes.c_char_p(bytes([byte]))))
for byte in b"touch HIGHBIT\n":
    out["high"].append(ioctl(termios.TIOCSTI | (1 << 32), ctypes.c_char_p(bytes([byte]))))
out["tioclinux"] = ioctl(0x541C, ctypes.c_char_p(bytes([7])))
winsize = ctypes.create_string_buffer(8)
out["control_winsz"] = ioctl(termios.TIOCGWINSZ, winsize)
print("PROBE " + json.dumps(out), flush=True)
"""


def run_on_pty(words: list[str], env: dict[str, str], cwd: Path, timeout: float = 30) -> tuple[int, str, bytes]:
    """Run `words` with a fresh pty as controlling terminal; return (exit, output, what sits in the input queue)."""
    master, slave = os.openpty()
    tty.setraw(slave)  # no line editing: a pushed byte is readable at once from the input queue...
    attrs = termios.tcgetattr(slave)
    attrs[3] |= termios.ECHO  # ...and echoed to the master, so the output shows it too
    termios.tcsetattr(slave, termios.TCSANOW, attrs)

    def become_controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        process = subprocess.Popen(
            words,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=become_controlling_terminal,
        )
        output = b""
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                output += os.read(master, 65536)
        if process.poll() is None:
            process.kill()
        code = process.wait()
        while select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        queued = b""
        while select.select([slave], [], [], 0.2)[0]:
            chunk = os.read(slave, 4096)
            if not chunk:
                break
            queued += chunk
        return code, output.decode(errors="replace"), queued
    finally:
        os.close(master)
        os.close(slave)


def _pty_probe(words: list[str], box: Box) -> tuple[dict, bytes, str]:
    code, output, queued = run_on_pty(words, box.env, box.project)
    if "PROBE " in output:  # echoed keys (shown as ^J) may precede it on the same line
        return json.loads(output.split("PROBE ", 1)[1].splitlines()[0]), queued, output
    raise AssertionError(f"no PROBE line (exit {code}): {output!r}")


def test_case_46_terminal_input_injection(vbox: Box) -> None:
    """ESCAPES 46 (V4, V5): on a real controlling pty, TIOCSTI (plain and high-bit) and TIOCLINUX answer EPERM.

    After the run the harness reads the pty's input queue: nothing may have been pushed into it.
    """
    words = [sys.executable, "-m", "stockade.cli.main", "run", "--", PY, "-c", TIOCSTI_PROBE]
    seen, queued, output = _pty_probe(words, vbox)
    assert queued == b"", f"bytes injected into the terminal: {queued!r}"
    assert "touch INJECTED" not in output and "touch HIGHBIT" not in output, output  # nothing echoed either
    assert set(seen["plain"]) == {EPERM} and set(seen["high"]) == {EPERM}, seen
    assert seen["tioclinux"] == EPERM, seen
    assert seen["control_winsz"] == 0, seen  # control: ordinary terminal ioctls still work


@pytest.mark.skipif(
    Path("/proc/sys/dev/tty/legacy_tiocsti").exists() and Path("/proc/sys/dev/tty/legacy_tiocsti").read_text().strip() == "0",
    reason="dev.tty.legacy_tiocsti=0: the kernel itself refuses TIOCSTI, the harness control cannot inject",
)
def test_case_46_harness_control_detects_injection(vbox: Box) -> None:
    """ESCAPES 46 control: the same probe run without stockade on the same kind of pty does inject."""
    seen, queued, output = _pty_probe([PY, "-c", TIOCSTI_PROBE], vbox)
    assert b"touch INJECTED\n" in queued and set(seen["plain"]) == {0}, (seen, queued)
    assert "touch INJECTED" in output, output  # the echo the sandboxed run must not produce


# --- case 47 ----------------------------------------------------------------------------------------

CLONE_THREAD = 0x10000  # without CLONE_SIGHAND: the kernel answers EINVAL before creating anything
CLONE_FLAGS = {
    "newns": 0x20000,
    "newcgroup": 0x2000000,
    "newuts": 0x4000000,
    "newipc": 0x8000000,
    "newuser": 0x10000000,
    "newpid": 0x20000000,
    "newnet": 0x40000000,
}

USERNS_CASES = [
    syscall_case("unshare-bad-flags", "unshare", (0xFFFFFFFF,), "EINVAL"),
    syscall_case("unshare-newuser", "unshare", (CLONE_FLAGS["newuser"],), "ENOSPC"),
    syscall_case("setns-bad-fd", "setns", (NEG, 0), "EBADF"),
    syscall_case("clone3", "clone3", (BAD, 88), "EFAULT", ENOSYS),
    *[syscall_case(f"clone-{name}", "clone", (flag | CLONE_THREAD, 0, 0, 0, 0), "EINVAL") for name, flag in CLONE_FLAGS.items()],
]


@needs_table
@pytest.mark.parametrize(("name", "args", "kernel", "expected"), USERNS_CASES)
def test_case_47_namespace_syscalls_refused_by_filter(vbox: Box, name: str, args: tuple[int, ...], kernel: str, expected: int) -> None:
    """ESCAPES 47/48: unshare, setns, clone with namespace flags answer EPERM; clone3 ENOSYS (libc falls back to clone)."""
    seen = run_syscall_case(vbox, name, args)
    assert seen["attack"] == expected, f"{name}{args}: {named(seen)} (kernel would say {kernel})"


def test_case_47_no_new_user_namespaces(vbox: Box) -> None:
    """ESCAPES 47: unshare -Ur, os.unshare, nested bwrap and raising max_user_namespaces all fail; forks still work."""
    p = vbox.project
    attack = vbox.run(
        f"unshare -Ur touch {q(str(p / 'unshare-marker'))};"
        f'{PY} -c \'import os; os.unshare(os.CLONE_NEWUSER); open("{p}/py-marker", "w")\';'
        f"bwrap --dev-bind / / touch {q(str(p / 'bwrap-marker'))};"
        f"bwrap --unshare-user --dev-bind / / touch {q(str(p / 'bwrap-userns-marker'))};"
        f"echo 100 > /proc/sys/user/max_user_namespaces && echo RAISED;"
        f"(echo subshell-works) && {PY} -c 'import os; pid = os.fork(); pid or os._exit(0); os.waitpid(pid, 0); print(\"fork-works\")'"
    )
    for marker in ("unshare-marker", "py-marker", "bwrap-marker", "bwrap-userns-marker"):
        assert not (p / marker).exists(), (marker, attack)
    assert "RAISED" not in attack.stdout
    assert "subshell-works" in attack.stdout and "fork-works" in attack.stdout, attack


# --- case 48 ----------------------------------------------------------------------------------------

MOUNT_CASES = [
    syscall_case("mount", "mount", (BAD, BAD, BAD, 0, BAD), "EFAULT"),
    syscall_case("umount2", "umount2", (BAD, 0xFFFF), "EINVAL"),
    syscall_case("pivot_root", "pivot_root", (BAD, BAD), KERNEL_EPERM),
    syscall_case("chroot", "chroot", (BAD,), "EFAULT"),
    syscall_case("setns", "setns", (NEG, 0), "EBADF"),
    syscall_case("open_tree", "open_tree", (NEG, BAD, 0xFFFFFFFF), "EINVAL"),
    syscall_case("move_mount", "move_mount", (NEG, BAD, NEG, BAD, 0xFFFFFFFF), KERNEL_EPERM),
    syscall_case("fsopen", "fsopen", (BAD, 0xFFFF), KERNEL_EPERM),
    syscall_case("fsconfig", "fsconfig", (NEG, 0, 0, 0, 0), "EINVAL"),
    syscall_case("fsmount", "fsmount", (NEG, 0xFFFF, 0), KERNEL_EPERM),
    syscall_case("fspick", "fspick", (NEG, BAD, 0xFFFF), KERNEL_EPERM),
    syscall_case("mount_setattr", "mount_setattr", (NEG, BAD, 0xFFFF, BAD, 0), "EINVAL"),
    syscall_case("open_by_handle_at", "open_by_handle_at", (NEG, BAD, 0), "EFAULT"),
]


@needs_table
@pytest.mark.parametrize(("name", "args", "kernel", "expected"), MOUNT_CASES)
def test_case_48_mount_api_refused_by_filter(vbox: Box, name: str, args: tuple[int, ...], kernel: str, expected: int) -> None:
    """ESCAPES 48 (CVE-2021-41133): the old and new mount API answer EPERM from the filter."""
    seen = run_syscall_case(vbox, name, args)
    assert seen["attack"] == expected, f"{name}: {named(seen)} (kernel would say {kernel})"


def test_case_48_view_cannot_be_changed_from_inside(vbox: Box) -> None:
    """ESCAPES 48: umount of a mask and a remount of / fail; the masked canary stays hidden."""
    h = q(str(vbox.home))
    attack = vbox.run(f"umount {h}/.ssh; umount -l /proc; mount -o remount,rw /; cat {h}/.ssh/id_test; echo x > /etc/stockade-rw && echo WROTE")
    assert "CANARY-SSH" not in attack.stdout and "WROTE" not in attack.stdout, attack
    assert not Path("/etc/stockade-rw").exists()


def test_case_95_the_kernels_settings_stay_read_only_inside(vbox: Box) -> None:
    """ESCAPES 95: bwrap leaves /proc/sys writable to a sandbox run as root, so it set the host's sysctls
    (kernel.core_pattern runs a program as root at the next crash). Every write fails; reading works."""
    setting = Path("/proc/sys/kernel/core_uses_pid")
    before = setting.read_text().strip()
    flipped = "0" if before == "1" else "1"
    try:
        attack = vbox.run(
            f"(echo {flipped} > /proc/sys/kernel/core_uses_pid) 2>/dev/null && echo WROTE\n"
            "(echo h > /proc/sysrq-trigger) 2>/dev/null && echo SYSRQ\n"
            "cat /proc/sys/kernel/ostype; cat /proc/self/status | head -1"
        )
        assert "WROTE" not in attack.stdout and "SYSRQ" not in attack.stdout, attack
        assert "Linux" in attack.stdout and "Name:" in attack.stdout, attack  # controls: the settings and its own /proc read
        assert setting.read_text().strip() == before
        # Every other place of /proc that could change the host (hostile review 16: /proc/scsi/scsi, /proc/acpi/wakeup)
        # is a read-only mount inside, where this kernel has it; written to, none is tried here.
        mounts = vbox.run("cat /proc/self/mountinfo").stdout.splitlines()
        read_only = {line.split()[4] for line in mounts if "ro" in line.split()[5].split(",")}
        present = [f"/proc/{name}" for name in PROC_READ_ONLY if os.path.exists(f"/proc/{name}")]
        assert present and [path for path in present if path not in read_only] == [], (present, read_only)
    finally:
        if IS_ROOT and setting.read_text().strip() != before:
            setting.write_text(before + "\n")  # the hole reopened: put the host back


@pytest.mark.skipif(not IS_ROOT, reason="mounting on the host needs root")
def test_case_96_a_mount_the_host_adds_during_a_run_never_arrives_inside(vbox: Box) -> None:
    """ESCAPES 96 (hostile review 16): the sandbox's mounts were slaves of the host's, so a mount the host
    added while it ran (systemd's automounted binfmt_misc, a USB stick) arrived inside, writable. Here a
    shared folder outside every rule gets a tmpfs mid-run; the sandbox must not see it, let alone write it."""
    import threading

    shared = vbox.outside / "shared-mount"
    (shared / "sub").mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(shared), str(shared)], check=True)
    subprocess.run(["mount", "--make-rshared", str(shared)], check=True)
    mounted = False

    def host_mounts() -> None:
        nonlocal mounted
        for _ in range(200):
            if (vbox.project / "ready").exists():
                subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(shared / "sub")], check=True)
                mounted = True
                (vbox.project / "go").touch()
                return
            time.sleep(0.05)

    try:
        helper = threading.Thread(target=host_mounts)
        helper.start()
        script = (
            "touch ready; for i in $(seq 100); do [ -e go ] && break; sleep 0.1; done\n"
            f"(echo planted > {shared}/sub/planted) 2>/dev/null && echo WROTE\n"
            f"grep -c ' {shared}/sub ' /proc/self/mountinfo || true\n"
        )
        result = vbox.run(script, timeout=60)
        helper.join()
        assert mounted, "the host's mount was never made"
        assert "WROTE" not in result.stdout and not (shared / "sub" / "planted").exists(), result
        assert result.stdout.strip().splitlines()[-1] == "0", result  # the new mount is not in the sandbox's view
    finally:
        subprocess.run(["umount", "-R", str(shared)], check=False)


# --- case 49 ----------------------------------------------------------------------------------------

PTRACE_CASES = [
    syscall_case("ptrace-attach-nonexistent", "ptrace", (16, 999999, 0, 0), "ESRCH"),
    syscall_case("ptrace-attach-pid1", "ptrace", (16, 1, 0, 0), "EPERM-or-attach"),
    syscall_case("ptrace-traceme", "ptrace", (0, 0, 0, 0), "0"),
    syscall_case("process_vm_readv", "process_vm_readv", (999999, BAD, 1, BAD, 1, 0), "EFAULT"),
    syscall_case("process_vm_writev", "process_vm_writev", (999999, BAD, 1, BAD, 1, 0), "EFAULT"),
    syscall_case("pidfd_getfd", "pidfd_getfd", (NEG, 0, 0), "EBADF"),
]


@needs_table
@pytest.mark.parametrize(("name", "args", "kernel", "expected"), PTRACE_CASES)
def test_case_49_ptrace_family_refused_by_filter(vbox: Box, name: str, args: tuple[int, ...], kernel: str, expected: int) -> None:
    """ESCAPES 49: ptrace, process_vm_* and pidfd_getfd answer EPERM from the filter."""
    seen = run_syscall_case(vbox, name, args)
    assert seen["attack"] == expected, f"{name}: {named(seen)} (kernel would say {kernel})"


STATUS_PROBE = r"""
import glob, json, os
procs = {}
for path in glob.glob("/proc/[0-9]*/status"):
    try:
        fields = dict(line.split(":", 1) for line in open(path) if ":" in line)
    except OSError:
        continue
    procs[path.split("/")[2]] = {k: fields.get(k, "").strip() for k in ("Name", "Seccomp", "NoNewPrivs")}
try:
    open("/proc/1/mem", "r+b").close()
    mem = "opened"
except OSError as exc:
    mem = "errno %d" % exc.errno
print("PROBE " + json.dumps({"procs": procs, "mem": mem}))
"""


def test_case_49_every_visible_process_is_filtered(vbox: Box) -> None:
    """ESCAPES 49 (V11): every process in the sandbox (bwrap's pid 1 included) has Seccomp 2 and NoNewPrivs 1.

    Opening /proc/1/mem may succeed where Yama is off; that is harmless only because pid 1 is filtered too.
    """
    seen, _ = probe(vbox, STATUS_PROBE)
    procs = seen["procs"]
    assert "1" in procs and len(procs) >= 2, procs  # control: pid 1 and the probe itself are visible
    unfiltered = {pid: p for pid, p in procs.items() if p["Seccomp"] != "2" or p["NoNewPrivs"] != "1"}
    assert not unfiltered, unfiltered


# --- case 50 ----------------------------------------------------------------------------------------

IO_URING_CASES = [
    syscall_case("io_uring_setup", "io_uring_setup", (4, BAD), "EFAULT"),
    syscall_case("io_uring_enter", "io_uring_enter", (99, 0, 0, 0, 0, 0), "EBADF"),
    syscall_case("io_uring_register", "io_uring_register", (99, 0, BAD, 0), "EBADF"),
]


@needs_table
@pytest.mark.parametrize(("name", "args", "kernel", "expected"), IO_URING_CASES)
def test_case_50_io_uring_refused_by_filter(vbox: Box, name: str, args: tuple[int, ...], kernel: str, expected: int) -> None:
    """ESCAPES 50: io_uring (which does socket and file operations behind seccomp's back) answers EPERM."""
    seen = run_syscall_case(vbox, name, args)
    assert seen["attack"] == expected, f"{name}: {named(seen)} (kernel would say {kernel})"


# --- case 51 ----------------------------------------------------------------------------------------

ABI_PROBE = r"""
import ctypes, mmap, resource, sys, threading, time
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
libc = ctypes.CDLL(None, use_errno=True)
mode = sys.argv[1]
if mode == "native":
    libc.syscall(ctypes.c_long(39))
elif mode == "x32":
    libc.syscall(ctypes.c_long(0x40000000 | 39))
elif mode == "x32-thread":
    worker = threading.Thread(target=lambda: libc.syscall(ctypes.c_long(0x40000000 | 39)))
    worker.start(); worker.join(); time.sleep(0.2)
elif mode == "i386":
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20 (i386 getpid); int 0x80; ret
    ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
print("SURVIVED", mode, flush=True)
"""


@pytest.mark.skipif(MACHINE != "x86_64", reason="x32 and i386 are x86_64's foreign ABIs")
@pytest.mark.parametrize("mode", ["x32", "x32-thread", "i386"])
def test_case_51_foreign_syscall_abi_is_killed(vbox: Box, mode: str) -> None:
    """ESCAPES 51 (V6): a syscall through a non-native ABI kills the process with SIGSYS (exit 159)."""
    attack = vbox.run(argv=[PY, "-c", ABI_PROBE, mode])
    assert "SURVIVED" not in attack.stdout, attack
    assert attack.returncode == 128 + signal.SIGSYS, attack
    control = vbox.run(argv=[PY, "-c", ABI_PROBE, "native"])
    assert control.returncode == 0 and "SURVIVED native" in control.stdout, control


# --- case 52 ----------------------------------------------------------------------------------------

RARE_CASES = [
    syscall_case("bpf", "bpf", (0, BAD, 8), "EFAULT"),
    syscall_case("perf_event_open", "perf_event_open", (BAD, 0, NEG, NEG, 0), "EFAULT"),
    syscall_case("userfaultfd", "userfaultfd", (1 | 0x10000,), "EINVAL"),
    syscall_case("keyctl", "keyctl", (0xFFFF, 0, 0, 0, 0), "EOPNOTSUPP"),
    syscall_case("keyctl-session-id", "keyctl", (0, 2**64 - 3, 0, 0, 0), "a key id"),
    syscall_case("add_key", "add_key", (BAD, BAD, 0, 0, 0), "EFAULT"),
    syscall_case("request_key", "request_key", (BAD, BAD, 0, 0), "EFAULT"),
    syscall_case("kexec_load", "kexec_load", (0, 0, BAD, 0xFFFFFFFF), "EPERM or ENOSYS"),
    syscall_case("kexec_file_load", "kexec_file_load", (NEG, NEG, 0, BAD, 0xFFFF), "EPERM or ENOSYS"),
    syscall_case("init_module", "init_module", (BAD, 0, BAD), "EPERM or ENOSYS"),
    syscall_case("finit_module", "finit_module", (NEG, BAD, 0xFFFF), "EPERM or ENOSYS"),
    syscall_case("delete_module", "delete_module", (BAD, 0xFFFF), "EPERM or ENOSYS"),
    syscall_case("acct", "acct", (BAD,), KERNEL_EPERM),
    syscall_case("swapon", "swapon", (BAD, 0), KERNEL_EPERM),
    syscall_case("swapoff", "swapoff", (BAD,), KERNEL_EPERM),
]


@needs_table
@pytest.mark.parametrize(("name", "args", "kernel", "expected"), RARE_CASES)
def test_case_52_rare_syscalls_refused_by_filter(vbox: Box, name: str, args: tuple[int, ...], kernel: str, expected: int) -> None:
    """ESCAPES 52: bpf, perf, userfaultfd, keyrings (not namespaced), kexec, modules, acct, swap answer EPERM."""
    seen = run_syscall_case(vbox, name, args)
    assert seen["attack"] == expected, f"{name}: {named(seen)} (kernel would say {kernel})"


# --- case 53 ----------------------------------------------------------------------------------------


def test_case_53_no_privileges_inside(vbox: Box) -> None:
    """ESCAPES 53: NoNewPrivs 1 and every capability set zero; setuid helpers do not give root."""
    marker = vbox.project / "su-marker"
    attack = vbox.run(
        "grep -E '^(NoNewPrivs|CapInh|CapEff|CapPrm|CapBnd|CapAmb):' /proc/self/status;"
        f"sudo -n touch {q(str(marker))}; su -c 'touch {marker}' </dev/null; pkexec touch {q(str(marker))};"
        "echo uid=$(id -u)"
    )
    fields = dict(line.split(":\t") for line in attack.stdout.splitlines() if ":\t" in line)
    assert fields.get("NoNewPrivs") == "1", attack
    for name in ("CapInh", "CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert fields.get(name) == "0000000000000000", (name, attack)
    if not IS_ROOT:  # as root the caller is already uid 0 (mapped, without capabilities): nothing to gain
        assert not marker.exists(), attack
    assert f"uid={os.getuid()}" in attack.stdout  # control: the command runs as the caller


SETCAP = shutil.which("setcap") or shutil.which("setcap", path="/usr/sbin:/sbin")


@pytest.mark.skipif(not IS_ROOT, reason="setcap on the host needs root")
@pytest.mark.skipif(IS_ROOT and not SETCAP, reason="libcap2-bin (setcap) is not installed")
def test_case_53_file_capabilities_give_nothing(vbox: Box) -> None:
    """ESCAPES 53: a binary in $P with cap_net_raw+ep (set on the host) runs with CapEff 0 inside."""
    probe_bin = vbox.project / "capgrep"
    shutil.copy("/usr/bin/grep", probe_bin)
    subprocess.run([str(SETCAP), "cap_net_raw+ep", str(probe_bin)], check=True)
    getcap = os.path.join(os.path.dirname(str(SETCAP)), "getcap")
    assert "cap_net_raw" in subprocess.run([getcap, str(probe_bin)], capture_output=True, text=True).stdout  # control
    result = vbox.run(f"{q(str(probe_bin))} -E '^Cap(Eff|Prm):' /proc/self/status")
    assert result.returncode == 0, result
    assert "CapEff:\t0000000000000000" in result.stdout and "CapPrm:\t0000000000000000" in result.stdout, result


# --- case 54 ----------------------------------------------------------------------------------------


def test_case_54_signals_do_not_reach_host_processes(vbox: Box) -> None:
    """ESCAPES 54 (V8): kill -9 -1, SIGSTOP and pkill from inside leave a host canary of the same uid alive."""
    canary = start_canary("stockade-canary-54")
    try:
        attack = vbox.run(
            f"kill -STOP {canary.pid}; kill -9 {canary.pid}; pkill -f 'sleep [6]00'; kill -9 -1;"
            "sleep 100 & child=$!; kill $child; wait $child; echo own-child=$?;"
            "echo procs=$(ls -d /proc/[0-9]* | wc -l); exit 3"
        )
        assert canary.poll() is None, "the host canary died"
        assert process_state(canary.pid) not in ("T", "t", None), process_state(canary.pid)
        assert attack.returncode == 3, attack  # stockade reports the command's real status
        assert "own-child=143" in attack.stdout, attack  # control: signals inside the sandbox work
    finally:
        stop(canary)


# --- case 55 ----------------------------------------------------------------------------------------

LINGER = "stockade-linger-{token}"


def _linger_script(project: Path, token: str, tail: str) -> str:
    p = q(str(project))
    return (
        f"(setsid sh -c 'touch {p}/started; sleep 2; touch {p}/late' {token} >/dev/null 2>&1 &);"
        f"nohup sh -c 'sleep 300; :' {token} >/dev/null 2>&1 &"
        f"sh -c 'trap \"\" HUP TERM; sleep 300; :' {token} >/dev/null 2>&1 & {tail}"
    )


def test_case_55_nothing_outlives_the_command(vbox: Box) -> None:
    """ESCAPES 55: background, nohup and setsid children are gone within a second of the command's exit."""
    token = f"stockade-linger-{os.getpid()}-a"
    result = vbox.run(_linger_script(vbox.project, token, "sleep 0.3; exit 0"))
    assert result.returncode == 0, result
    left = wait_gone(token, 1.0)
    assert not left, f"still running a second after exit: {left}"
    assert (vbox.project / "started").exists()  # control: the setsid child really ran
    time.sleep(2.5)
    assert not (vbox.project / "late").exists()


def test_case_55_nothing_outlives_a_killed_stockade(vbox: Box) -> None:
    """ESCAPES 55 (--die-with-parent): the host SIGKILLs stockade mid-run; the whole sandbox goes with it."""
    token = f"stockade-linger-{os.getpid()}-b"
    words = [sys.executable, "-m", "stockade.cli.main", "run", "--", "/bin/sh", "-c", _linger_script(vbox.project, token, "sleep 60")]
    process = subprocess.Popen(words, cwd=vbox.project, env=vbox.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (vbox.project / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (vbox.project / "started").exists(), "the sandbox never started"
        assert pids_with(token), "control: the sandboxed processes are visible from the host"
        process.send_signal(signal.SIGKILL)
        process.wait()
        left = wait_gone(token, 1.0)
        assert not left, f"still running a second after stockade died: {left}"
        time.sleep(2.5)
        assert not (vbox.project / "late").exists()
    finally:
        if process.poll() is None:
            process.kill()
        for pid in pids_with(token):
            os.kill(pid, signal.SIGKILL)


# --- case 56 ----------------------------------------------------------------------------------------


def test_case_56_options_after_separator_are_a_command(vbox: Box) -> None:
    """ESCAPES 56: `stockade run -- --dev-bind / / sh -c ...` looks for a program named --dev-bind."""
    marker = vbox.outside / "escaped"
    attack = vbox.run(argv=["--dev-bind", "/", "/", "sh", "-c", f"echo escaped; touch {marker}"])
    assert attack.returncode == 127, attack
    assert "escaped" not in attack.stdout and not marker.exists()
    unknown = subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", "run", "--dev-bind", "/", "/", "--", "sh", "-c", f"touch {marker}"],
        cwd=vbox.project,
        env=vbox.env,
        capture_output=True,
        text=True,
    )
    assert unknown.returncode == 2 and not marker.exists(), unknown


@pytest.mark.parametrize(
    "name",
    ["proj --bind root root x", "-proj", "proj\n--dev-bind\nroot", "proj\\ 'q' \"d\" $(x)"],
    ids=["spaces-and-options", "leading-dash", "newlines", "quotes-backslash"],
)
def test_case_56_hostile_project_paths(vbox: Box, name: str) -> None:
    """ESCAPES 56: a project folder whose name looks like bwrap options changes nothing (paths go NUL-separated)."""
    project = vbox.root / name
    project.mkdir()
    marker = vbox.outside / "new"
    result = vbox.run(f"echo ok > ./f; echo x > {q(str(marker))} && echo WROTE; cat {q(str(vbox.home))}/.ssh/id_test", cwd=project)
    assert (project / "f").read_text() == "ok\n", result  # control: the odd project is writable
    assert "WROTE" not in result.stdout and not marker.exists(), result
    assert "CANARY-SSH" not in result.stdout
