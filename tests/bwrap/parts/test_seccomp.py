"""The seccomp filter and its cache, tested for real.

Probes (tests/bwrap/probes/) run under bubblewrap with the compiled BPF, as
root and as an unprivileged user. Every refused syscall is called with bad
arguments (bubblewrap's try-syscall trick): the kernel would answer EFAULT,
EBADF or EINVAL, the filter answers EPERM. A second build of the same rules
answers ENOANO instead, which no kernel path returns, so each case proves the
filter answered even where the kernel's own answer would also be EPERM.
Every attack has a control nearby that must still reach the kernel.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import pty
import shutil
import stat
import subprocess
import sys
import tty
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from stockade.bwrap.parts import seccomp, seccomp_cache
from stockade.core.errors import SandboxSetupError

PROBES = Path(__file__).parent / "probes"
PYTHON = "/usr/bin/python3"  # Debian's: readable by every user, unlike a venv under /root
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
SETSID = shutil.which("setsid") or "/usr/bin/setsid"
BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
NOBODY = 65534
BAD = 16  # an address nothing maps: EFAULT if the kernel reads it
MARKER = errno.ENOANO  # what the marker build answers instead of EPERM
KILLED_BY_SIGSYS = (128 + 31, -31)  # bwrap passes 128+N on; -N if it died itself
TIMEOUT = 30

CLONE_THREAD = 0x0001_0000  # without CLONE_SIGHAND the kernel answers EINVAL at once
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_VSOCK = 1, 2, 10, 16, 40
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
SOCK_NONBLOCK, SOCK_CLOEXEC = 0o4000, 0o2000000
HIGH = 1 << 32  # the kernel reads int arguments as 32 bits: this bit must not evade a rule
TIOCSTI, TIOCGWINSZ, TIOCLINUX = 0x5412, 0x5413, 0x541C
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206  # SEIZE does not stop the tracee
NEW_SYSCALL_NUMBERS = {"open_tree_attr": 467}  # kernel 6.15; older libseccomp lacks the name

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the seccomp filter is Linux only")


@dataclass(frozen=True)
class Case:
    """One probe call: a raw syscall, or a named action in the probe."""

    id: str
    syscall: str = ""
    args: tuple[int | str, ...] = ()
    special: str = ""
    expect: int = errno.EPERM  # under the real filter

    def spec(self) -> dict[str, object] | None:
        """What the probe needs; None when this machine has no such syscall."""
        if self.special:
            return {"id": self.id, "special": self.special}
        number = syscall_number(self.syscall)
        return None if number is None else {"id": self.id, "nr": number, "args": list(self.args)}


def _other_socketpair_types() -> list[Case]:
    """Types the kernel refuses for AF_UNIX today; the filter refuses them first, in case that changes."""
    named = (SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET)
    return [
        Case(f"socketpair_type_{kind}", "socketpair", (AF_UNIX, kind, 0, "buf")) for kind in range(seccomp.SOCK_TYPE_MASK + 1) if kind not in named
    ]


def _clone_cases() -> list[Case]:
    return [Case(f"clone_{name}", "clone", (flag | CLONE_THREAD, 0, 0, 0, 0)) for name, flag in seccomp.CLONE_NEW_FLAGS.items()]


ATTACKS = [
    Case("socket_unix_dgram", "socket", (AF_UNIX, SOCK_DGRAM, 0)),
    Case("socket_unix_dgram_cloexec", "socket", (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)),
    Case("socket_unix_high_bit", "socket", (AF_UNIX | HIGH, SOCK_DGRAM, 0)),
    Case("socket_unix_seqpacket", "socket", (AF_UNIX, SOCK_SEQPACKET, 0)),
    Case("socket_unix_raw", "socket", (AF_UNIX, SOCK_RAW, 0)),
    Case("socket_vsock", "socket", (AF_VSOCK, SOCK_STREAM, 0)),
    Case("socketpair_dgram", "socketpair", (AF_UNIX, SOCK_DGRAM, 0, "buf")),
    Case("socketpair_raw", "socketpair", (AF_UNIX, SOCK_RAW, 0, "buf")),
    Case("socketpair_dgram_flags", "socketpair", (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, "buf")),
    Case("socketpair_dgram_high_bit", "socketpair", (AF_UNIX | HIGH, SOCK_DGRAM, 0, "buf")),
    *_other_socketpair_types(),
    Case("io_uring_setup", "io_uring_setup", (1, BAD)),
    Case("io_uring_enter", "io_uring_enter", (-1, 0, 0, 0, 0, 0)),
    Case("io_uring_register", "io_uring_register", (-1, 0, 0, 0)),
    Case("ptrace_seize_pid1", "ptrace", (PTRACE_SEIZE, 1, 0, 0)),
    Case("ptrace_no_such_pid", "ptrace", (PTRACE_ATTACH, 0x7FFF_FFFF, 0, 0)),
    Case("process_vm_readv", "process_vm_readv", (0x7FFF_FFFF, BAD, 1, BAD, 1, 0)),
    Case("process_vm_writev", "process_vm_writev", (0x7FFF_FFFF, BAD, 1, BAD, 1, 0)),
    Case("pidfd_getfd", "pidfd_getfd", (-1, 0, 0)),
    Case("bpf", "bpf", (0, BAD, 16)),
    Case("perf_event_open", "perf_event_open", (BAD, 0, -1, -1, 0)),
    Case("userfaultfd", "userfaultfd", (0xFFFF,)),
    Case("keyctl", "keyctl", (0xFFFF, 0, 0, 0, 0)),
    Case("add_key", "add_key", (BAD, BAD, 0, 0, 0)),
    Case("request_key", "request_key", (BAD, BAD, 0, 0)),
    Case("kexec_load", "kexec_load", (0, 0, 0, 0)),
    Case("kexec_file_load", "kexec_file_load", (-1, -1, 0, BAD, 0)),
    Case("init_module", "init_module", (BAD, 0, BAD)),
    Case("finit_module", "finit_module", (-1, BAD, 0)),
    Case("delete_module", "delete_module", (BAD, 0)),
    Case("mount", "mount", (BAD, BAD, BAD, 0, 0)),
    Case("umount2", "umount2", (BAD, 0)),
    Case("pivot_root", "pivot_root", (BAD, BAD)),
    Case("chroot", "chroot", (BAD,)),
    Case("swapon", "swapon", (BAD, 0)),
    Case("swapoff", "swapoff", (BAD,)),
    Case("acct", "acct", (BAD,)),
    Case("open_tree", "open_tree", (-1, BAD, 0)),
    Case("open_tree_attr", "open_tree_attr", (-1, BAD, 0, BAD, 0)),
    Case("move_mount", "move_mount", (-1, BAD, -1, BAD, 0)),
    Case("fsopen", "fsopen", (BAD, 0)),
    Case("fsconfig", "fsconfig", (-1, 0, BAD, BAD, 0)),
    Case("fsmount", "fsmount", (-1, 0, 0)),
    Case("fspick", "fspick", (-1, BAD, 0)),
    Case("mount_setattr", "mount_setattr", (-1, BAD, 0, BAD, 0)),
    Case("open_by_handle_at", "open_by_handle_at", (-1, BAD, 0)),
    Case("unshare", "unshare", (0x1,)),
    Case("setns", "setns", (-1, 0)),
    *_clone_cases(),
    Case("clone3", "clone3", (BAD, 88), expect=errno.ENOSYS),
    Case("ioctl_tiocsti", "ioctl", (-1, TIOCSTI, BAD)),
    Case("ioctl_tiocsti_high_bit", "ioctl", (-1, TIOCSTI | HIGH, BAD)),
    Case("ioctl_tioclinux", "ioctl", (-1, TIOCLINUX, BAD)),
    Case("ioctl_tioclinux_high_bit", "ioctl", (-1, TIOCLINUX | HIGH, BAD)),
]

CONTROLS = [
    Case("socket_inet_stream", "socket", (AF_INET, SOCK_STREAM, 0), expect=0),
    Case("socket_inet6_dgram", "socket", (AF_INET6, SOCK_DGRAM, 0), expect=0),
    Case("socket_netlink", "socket", (AF_NETLINK, SOCK_RAW, 0), expect=0),
    Case("socketpair_stream", "socketpair", (AF_UNIX, SOCK_STREAM, 0, "buf"), expect=0),
    Case("socketpair_seqpacket", "socketpair", (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, "buf"), expect=0),  # Rust's spawn
    Case("socket_unix_stream", "socket", (AF_UNIX, SOCK_STREAM, 0), expect=0),
    Case("socket_unix_stream_flags_high_bit", "socket", (AF_UNIX | HIGH, SOCK_STREAM | SOCK_CLOEXEC, 0), expect=0),
    Case("socketpair_stream_flags", "socketpair", (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, "buf"), expect=0),
    Case("ioctl_tiocgwinsz", "ioctl", (-1, TIOCGWINSZ, BAD), expect=errno.EBADF),
    Case("ioctl_fionread_pipe", special="fionread_pipe", expect=0),
    Case("clone_without_namespace_flags", "clone", (CLONE_THREAD, 0, 0, 0, 0), expect=errno.EINVAL),
    Case("fork", special="fork", expect=0),
    Case("thread_via_clone3_fallback", special="thread", expect=0),
    Case("spawn_via_clone3_fallback", special="spawn", expect=0),
    Case("personality_query", "personality", (0xFFFF_FFFF,), expect=0),
]

# With allow_unix the AF_UNIX socket rule goes; everything else stays.
ALLOW_UNIX = {
    "socket_unix_dgram": 0,
    "socket_unix_dgram_cloexec": 0,
    "socket_unix_high_bit": 0,
    "socket_unix_seqpacket": 0,
    "socket_unix_raw": 0,
    "socket_vsock": errno.EPERM,
    "socketpair_dgram": errno.EPERM,
    "socketpair_stream": 0,
    "io_uring_setup": errno.EPERM,
    "ioctl_tiocsti": errno.EPERM,
}

# Bump seccomp_cache.RULES_VERSION whenever the rules change, and record here.
RULES_FINGERPRINTS = {
    1: "312d8d064bc957e848423447e148c16f40c2ec06a890e31190bc3cc9a4860833",
    2: "4f190011588680e35413869e494aff6481368c5423bb9015dad558e19010d696",  # + setuid/setgid chmod
    3: "ee0516b0bd7b572f6a902d091eb1a1f43111584dc74ae74bfbe95dec11aca596",  # stream AF_UNIX allowed
    4: "7a82f4a2262cc0eeba273b4486a1f61005061c98b980a83f213914fe10f84b3f",  # + setuid creation, openat2
    5: "d5a05ea191b877587d3b259a32cc796124238e0d6595430b76f599bf41daa426",  # the same rules, their words
    6: "caef02661653741871b8468234f91cb593861bf75250791b8e19343a00de1036",  # + seqpacket socketpairs (Rust spawns)
}


# ---------------------------------------------------------------- helpers


def syscall_number(name: str) -> int | None:
    """From libseccomp's own table, independently of the code under test."""
    pyseccomp = pytest.importorskip("pyseccomp")
    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    return number if number >= 0 else NEW_SYSCALL_NUMBERS.get(name)


def as_user_prefix(user: str) -> list[str]:
    """setpriv down to nobody when pytest is root; an unprivileged pytest is already there."""
    if user == "unprivileged" and os.geteuid() == 0:
        return [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return []


def bwrap_argv(user: str, seccomp_fd: int | None, *, new_session: bool = True) -> list[str]:
    argv = [
        *as_user_prefix(user),
        BWRAP,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-all",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
    ]
    if new_session:
        argv.append("--new-session")
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv


def program_fd(program: bytes) -> int:
    fd = os.memfd_create("test-seccomp")
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def run_sandboxed(
    user: str, seccomp_fd: int | None, probe: str, *args: str, new_session: bool = True, stdin: int | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run probes/<probe> with Debian's python3 inside bwrap, under the filter on `seccomp_fd` if given.

    The source goes on the command line: the unprivileged user may not be
    able to read this checkout.
    """
    source = (PROBES / probe).read_text()
    argv = [*prefix, *bwrap_argv(user, seccomp_fd, new_session=new_session), "--", PYTHON, "-I", "-c", source, *args]
    return subprocess.run(
        argv, stdin=stdin, capture_output=True, text=True, cwd="/", timeout=TIMEOUT, check=False, pass_fds=() if seccomp_fd is None else (seccomp_fd,)
    )


def run_probe(user: str, program: bytes | None, probe: str, *args: str, **options: object) -> subprocess.CompletedProcess[str]:
    """run_sandboxed with `program` (None: no filter at all) passed in a memory file."""
    fd = program_fd(program) if program is not None else None
    try:
        return run_sandboxed(user, fd, probe, *args, **options)  # type: ignore[arg-type]
    finally:
        if fd is not None:
            os.close(fd)


@cache
def sandbox_problem(user: str) -> str | None:
    """Why bwrap cannot run probes as `user` here, or None when it can."""
    for tool in (BWRAP, PYTHON, *([SETPRIV] if as_user_prefix(user) else [])):
        if not os.access(tool, os.X_OK):
            return f"{tool} is missing"
    result = subprocess.run(
        [*bwrap_argv(user, None), "--", PYTHON, "-c", "pass"], capture_output=True, text=True, cwd="/", timeout=TIMEOUT, check=False
    )
    if result.returncode != 0:
        return f"bwrap cannot create namespaces as {user}: {result.stderr.strip() or result.returncode}"
    return None


@cache
def compiled(allow_unix: bool, deny_errno: int = errno.EPERM) -> bytes:
    pytest.importorskip("pyseccomp")
    return seccomp.build_bpf(allow_unix, deny_errno=deny_errno)


@cache
def _probe_outcome(user: str, variant: str) -> dict[str, int] | str:
    """Run once per user and variant; a failure is kept too, so it is reported fast, once per test."""
    programs = {
        "unfiltered": None,
        "real": lambda: compiled(False),
        "allow_unix": lambda: compiled(True),
        "marker": lambda: compiled(False, MARKER),
    }
    make = programs[variant]
    # Unfiltered, the attacks would really happen: controls only.
    cases = CONTROLS if variant == "unfiltered" else ATTACKS + CONTROLS
    specs = json.dumps([spec for spec in (case.spec() for case in cases) if spec is not None])
    try:
        result = run_probe(user, make() if make else None, "try_syscalls.py", specs)
    except subprocess.TimeoutExpired:
        return f"the {variant} probe as {user} hung for {TIMEOUT}s"
    if result.returncode != 0:
        return f"the {variant} probe as {user} failed ({result.returncode}): {result.stderr}"
    return json.loads(result.stdout)


def probe_result(user: str, variant: str, case_id: str) -> int:
    """The errno one case got under one filter variant (0: success)."""
    outcome = _probe_outcome(user, variant)
    if isinstance(outcome, str):
        pytest.fail(outcome)
    if case_id not in outcome:
        pytest.skip(f"{case_id}: this machine's libseccomp has no such syscall")
    return outcome[case_id]


def name(number: int) -> str:
    return errno.errorcode.get(number, str(number)) if number else "success"


@pytest.fixture(params=["root", "unprivileged"])
def as_user(request: pytest.FixtureRequest) -> str:
    """Each sandbox test runs as root (when pytest is root) and as an unprivileged user."""
    user: str = request.param
    if user == "root" and os.geteuid() != 0:
        pytest.skip("pytest is not running as root")
    problem = sandbox_problem(user)
    if problem:
        if os.environ.get("STOCKADE_MUST_SANDBOX") == "1":
            pytest.fail(f"STOCKADE_MUST_SANDBOX=1 but {problem}")
        pytest.skip(problem)
    return user


def native_x86_64() -> bool:
    return os.uname().machine == "x86_64"


# ---------------------------------------------------------------- the filter, in bwrap


@pytest.mark.sandbox
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in ATTACKS])
def test_attack_is_refused_by_the_filter(as_user: str, case: Case) -> None:
    got = probe_result(as_user, "real", case.id)
    assert got == case.expect, f"{case.id}: expected {name(case.expect)}, got {name(got)}"
    marked = probe_result(as_user, "marker", case.id)
    want = MARKER if case.expect == errno.EPERM else case.expect
    assert marked == want, f"{case.id}: the marker filter did not answer ({name(marked)}): the kernel did"


@pytest.mark.sandbox
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CONTROLS])
def test_control_still_reaches_the_kernel(as_user: str, case: Case) -> None:
    unfiltered = probe_result(as_user, "unfiltered", case.id)
    filtered = probe_result(as_user, "real", case.id)
    assert unfiltered == case.expect, f"probe calibration: {case.id} gave {name(unfiltered)} with no filter"
    assert filtered == case.expect, f"{case.id}: the filter answered {name(filtered)}"


@pytest.mark.sandbox
@pytest.mark.parametrize(("case_id", "expect"), [pytest.param(k, v, id=k) for k, v in ALLOW_UNIX.items()])
def test_allow_unix_lets_only_unix_sockets_through(as_user: str, case_id: str, expect: int) -> None:
    got = probe_result(as_user, "allow_unix", case_id)
    assert got == expect, f"{case_id} with allow_unix: expected {name(expect)}, got {name(got)}"


@pytest.mark.sandbox
@pytest.mark.skipif(not native_x86_64(), reason="x32 and i386 exist on x86_64 only")
@pytest.mark.parametrize("mode", ["x32", "x32-thread", "i386"])
def test_foreign_abi_kills_the_process(as_user: str, mode: str) -> None:
    result = run_probe(as_user, compiled(False), "foreign_abi.py", mode)
    assert result.returncode in KILLED_BY_SIGSYS, (result.returncode, result.stdout, result.stderr)
    assert "survived" not in result.stdout


@pytest.mark.sandbox
@pytest.mark.skipif(not native_x86_64(), reason="x32 and i386 exist on x86_64 only")
@pytest.mark.parametrize("mode", ["x32", "x32-thread", "i386"])
def test_foreign_abi_control_survives_without_the_filter(as_user: str, mode: str) -> None:
    """Without the filter the same call returns (ENOSYS where the kernel lacks x32)."""
    result = run_probe(as_user, None, "foreign_abi.py", mode)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["survived"]
    if mode == "i386":
        assert outcome["result"] > 0, "int $0x80 getpid should return a pid"


def legacy_tiocsti() -> bool:
    try:
        return Path("/proc/sys/dev/tty/legacy_tiocsti").read_text().strip() == "1"
    except OSError:
        return True  # kernels before 6.2 have no switch: TIOCSTI always works


def inject_on_pty(user: str, program: bytes | None, mode: str) -> dict[str, object]:
    """Run probes/tiocsti.py with a raw pty as controlling terminal, no --new-session (V4)."""
    master, slave = pty.openpty()
    try:
        tty.setraw(slave)
        result = run_probe(user, program, "tiocsti.py", mode, new_session=False, stdin=slave, prefix=(SETSID, "--ctty", "--wait"))
    finally:
        os.close(master)
        os.close(slave)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.sandbox
@pytest.mark.parametrize("mode", ["plain", "high"])
def test_tiocsti_cannot_inject_into_the_terminal(as_user: str, mode: str) -> None:
    outcome = inject_on_pty(as_user, compiled(False), mode)
    assert outcome == {"errno": errno.EPERM, "read": ""}


@pytest.mark.sandbox
@pytest.mark.skipif(not legacy_tiocsti(), reason="dev.tty.legacy_tiocsti=0: the kernel refuses TIOCSTI itself")
@pytest.mark.parametrize("mode", ["plain", "high"])
def test_tiocsti_control_injects_without_the_filter(as_user: str, mode: str) -> None:
    """Proves the harness: without the filter the key does land in the input queue."""
    outcome = inject_on_pty(as_user, None, mode)
    assert outcome == {"errno": 0, "read": "Q"}


@pytest.mark.sandbox
def test_every_process_in_the_sandbox_runs_under_the_filter(as_user: str) -> None:
    """bwrap's pid 1 too (V11): an unfiltered process there could be hijacked through /proc/1/mem."""
    result = run_probe(as_user, compiled(False), "status.py")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert (status["uid"] == 0) == (as_user == "root"), f"ran as uid {status['uid']}"
    assert "1" in status["processes"] and len(status["processes"]) >= 2
    for pid, fields in status["processes"].items():
        assert fields == {"Seccomp": "2", "NoNewPrivs": "1"}, f"pid {pid}: {fields}"


@pytest.mark.sandbox
def test_status_probe_control_sees_no_filter_without_one(as_user: str) -> None:
    result = run_probe(as_user, None, "status.py")
    assert result.returncode == 0, result.stderr
    assert {fields["Seccomp"] for fields in json.loads(result.stdout)["processes"].values()} == {"0"}


# ---------------------------------------------------------------- the compiled program


def test_program_is_whole_instructions_and_deterministic() -> None:
    program = compiled(False)
    assert len(program) % 8 == 0 and seccomp_cache.looks_like_filter(program)
    assert seccomp.build_bpf(False) == program
    assert compiled(True) != program


def test_unknown_syscall_names_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = seccomp.rule_blocks

    def with_unknown(allow_unix: bool) -> tuple[seccomp.Block, ...]:
        bogus = seccomp.Block("no_such_syscall", "test", (seccomp.Rule("no_such_syscall_xyz"),))
        return (*real(allow_unix), bogus)

    expected = compiled(False)
    monkeypatch.setattr(seccomp, "rule_blocks", with_unknown)
    assert seccomp.build_bpf(False) == expected


def test_describe_rules_names_every_refused_syscall() -> None:
    lines = seccomp.describe_rules(False)
    text = "\n".join(lines)
    for block in seccomp.rule_blocks(False):
        for rule in block.rules:
            assert rule.syscall in text
    assert "socket(AF_UNIX)" in text and "EPERM" in text
    assert "clone3: ENOSYS" in text
    assert any("killed" in line and "x32" in line for line in lines)
    assert len(lines) == len(set(lines))


def test_describe_rules_with_allow_unix_drops_only_the_unix_socket_line() -> None:
    without, with_unix = seccomp.describe_rules(False), seccomp.describe_rules(True)
    dropped = [line for line in without if line not in with_unix]
    assert len(dropped) == 1 and dropped[0].startswith("socket(AF_UNIX)")
    assert all(line in without for line in with_unix)


def test_describe_rules_needs_no_libseccomp() -> None:
    code = "import sys; from stockade.bwrap.parts.seccomp import describe_rules; describe_rules(False); print('pyseccomp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, check=True)
    assert result.stdout.strip() == "False"


def rules_fingerprint() -> str:
    material = repr((seccomp.rule_blocks(False), seccomp.rule_blocks(True), seccomp.UNIFIED_NUMBERS))
    return hashlib.sha256(material.encode()).hexdigest()


def test_rules_version_is_bumped_when_the_rules_change() -> None:
    """A stale cached BPF would silently keep the old rules: the cache key must move with them."""
    version = seccomp_cache.RULES_VERSION
    assert RULES_FINGERPRINTS.get(version) == rules_fingerprint(), (
        f"the rules changed: bump seccomp_cache.RULES_VERSION to {max(RULES_FINGERPRINTS) + 1} "
        f"and record {rules_fingerprint()!r} for it in RULES_FINGERPRINTS"
    )


# ---------------------------------------------------------------- the cache


def read_fd(fd: int) -> bytes:
    return os.pread(fd, 1 << 16, 0)


def assert_good_fd(fd: int) -> None:
    assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    assert os.lseek(fd, 0, os.SEEK_CUR) == 0
    assert not os.get_inheritable(fd)


def open_and_read(cache_dir: Path, allow_unix: bool) -> bytes:
    fd = seccomp_cache.open_filter(cache_dir, allow_unix)
    try:
        assert_good_fd(fd)
        return read_fd(fd)
    finally:
        os.close(fd)


def forbid_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(allow_unix: bool, **_: object) -> bytes:
        raise AssertionError("compiled on a warm cache")

    monkeypatch.setattr(seccomp, "build_bpf", refuse)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    pytest.importorskip("pyseccomp")
    return tmp_path / "cache" / "stockade"


@pytest.mark.parametrize("allow_unix", [False, True], ids=["no_unix", "allow_unix"])
def test_cold_call_compiles_and_stores_warm_call_reads(cache_dir: Path, allow_unix: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    assert open_and_read(cache_dir, allow_unix) == compiled(allow_unix)
    path = Path(seccomp_cache.cache_path(cache_dir, allow_unix))
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o400
    assert path.read_bytes() == compiled(allow_unix)
    assert [p.name for p in cache_dir.iterdir()] == [path.name], "no temporary files left behind"
    forbid_compiling(monkeypatch)
    assert open_and_read(cache_dir, allow_unix) == compiled(allow_unix)


def warm_probe(cache_dir: Path) -> dict[str, bool]:
    code = (
        "import json, sys; from pathlib import Path; "
        "from stockade.bwrap.parts.seccomp_cache import open_filter; "
        f"open_filter(Path({str(cache_dir)!r}), False); "
        "print(json.dumps({m: m in sys.modules for m in ('pyseccomp', 'stockade.bwrap.parts.seccomp')}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, check=True)
    return json.loads(result.stdout)


def test_warm_call_imports_neither_pyseccomp_nor_the_compiler(cache_dir: Path) -> None:
    cold = warm_probe(cache_dir)
    assert cold == {"pyseccomp": True, "stockade.bwrap.parts.seccomp": True}, "control: a miss compiles"
    assert warm_probe(cache_dir) == {"pyseccomp": False, "stockade.bwrap.parts.seccomp": False}


def truncated_program() -> bytes:
    """The first half of a real program: whole instructions, but no final ret."""
    program = compiled(False)
    return program[: (len(program) // 16) * 8]


BAD_FILES = {
    "empty": lambda: b"",
    "short": lambda: b"\x20\x00\x00\x00\x04",
    "not_whole_instructions": lambda: compiled(False)[:-3],
    "zeros": lambda: bytes(16),
    "truncated_without_ret": truncated_program,
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_corrupt_cache_file_is_recompiled(cache_dir: Path, kind: str) -> None:
    path = Path(seccomp_cache.cache_path(cache_dir, False))
    cache_dir.mkdir(parents=True, mode=0o700)
    path.write_bytes(BAD_FILES[kind]())
    path.chmod(0o400)
    assert open_and_read(cache_dir, False) == compiled(False)
    assert path.read_bytes() == compiled(False)


def plant_wrong_filter(cache_dir: Path, mode: int) -> Path:
    """A well-formed but weaker program (allow_unix) where the strict one belongs."""
    cache_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    path = Path(seccomp_cache.cache_path(cache_dir, False))
    path.write_bytes(compiled(True))
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o420, 0o402, 0o666], ids=["group_writable", "world_writable", "both"])
def test_writable_cache_file_is_not_used(cache_dir: Path, mode: int) -> None:
    path = plant_wrong_filter(cache_dir, mode)
    assert open_and_read(cache_dir, False) == compiled(False)
    assert path.read_bytes() == compiled(False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o400


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another uid")
def test_cache_file_of_another_user_is_not_used(cache_dir: Path) -> None:
    path = plant_wrong_filter(cache_dir, 0o400)
    os.chown(path, NOBODY, NOBODY)
    assert open_and_read(cache_dir, False) == compiled(False)
    assert path.stat().st_uid == os.geteuid() and path.read_bytes() == compiled(False)


def test_symlinked_cache_file_is_not_followed(cache_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.bpf"
    elsewhere.write_bytes(compiled(True))
    elsewhere.chmod(0o400)
    cache_dir.mkdir(parents=True, mode=0o700)
    path = Path(seccomp_cache.cache_path(cache_dir, False))
    path.symlink_to(elsewhere)
    assert open_and_read(cache_dir, False) == compiled(False)
    assert not path.is_symlink() and elsewhere.read_bytes() == compiled(True)


def test_loose_cache_dir_is_tightened_and_not_trusted_meanwhile(cache_dir: Path) -> None:
    path = plant_wrong_filter(cache_dir, 0o400)
    cache_dir.chmod(0o777)
    assert open_and_read(cache_dir, False) == compiled(False)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert path.read_bytes() == compiled(False)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another uid")
def test_cache_dir_of_another_user_is_neither_trusted_nor_written(cache_dir: Path) -> None:
    path = plant_wrong_filter(cache_dir, 0o400)
    os.chown(cache_dir, NOBODY, NOBODY)
    assert open_and_read(cache_dir, False) == compiled(False)
    assert path.read_bytes() == compiled(True), "left alone: not our directory"


def test_unusable_cache_location_still_gives_a_filter(tmp_path: Path) -> None:
    pytest.importorskip("pyseccomp")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    assert open_and_read(blocker / "stockade", False) == compiled(False)


def test_a_miss_without_pyseccomp_is_a_setup_error(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import now raises ImportError
    with pytest.raises(SandboxSetupError, match="pyseccomp"):
        seccomp_cache.open_filter(cache_dir, False)


def test_missing_libseccomp_is_a_setup_error(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_library(name: str, *args: object, **kwargs: object) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    with pytest.raises(SandboxSetupError, match="libseccomp"):
        seccomp_cache.open_filter(cache_dir, False)


def test_key_moves_with_everything_the_program_depends_on(monkeypatch: pytest.MonkeyPatch) -> None:
    base = seccomp_cache.cache_key(False)
    assert seccomp_cache.cache_key(False) == base
    assert seccomp_cache.cache_key(True) != base
    monkeypatch.setattr(seccomp_cache, "libseccomp_version", lambda: "9.9.9")
    assert seccomp_cache.cache_key(False) != base
    monkeypatch.undo()
    monkeypatch.setattr(seccomp_cache, "RULES_VERSION", seccomp_cache.RULES_VERSION + 1)
    assert seccomp_cache.cache_key(False) != base
    monkeypatch.undo()
    machine = os.uname()
    fake = os.uname_result((machine.sysname, machine.nodename, machine.release, machine.version, "riscv64"))
    monkeypatch.setattr(seccomp_cache.os, "uname", lambda: fake)
    assert seccomp_cache.cache_key(False) != base


def test_libseccomp_version_comes_from_the_library() -> None:
    pytest.importorskip("pyseccomp")
    version = seccomp_cache.libseccomp_version()
    assert version.count(".") == 2 and all(part.isdigit() for part in version.split("."))


@pytest.mark.sandbox
@pytest.mark.parametrize(("allow_unix", "expect"), [(False, errno.EPERM), (True, 0)], ids=["no_unix", "allow_unix"])
def test_cached_filter_is_what_bwrap_loads(as_user: str, cache_dir: Path, allow_unix: bool, expect: int) -> None:
    os.close(seccomp_cache.open_filter(cache_dir, allow_unix))  # the cold call stores it
    fd = seccomp_cache.open_filter(cache_dir, allow_unix)
    try:
        spec = next(c for c in ATTACKS if c.id == "socket_unix_dgram").spec()
        result = run_sandboxed(as_user, fd, "try_syscalls.py", json.dumps([spec]))
    finally:
        os.close(fd)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"socket_unix_dgram": expect}
