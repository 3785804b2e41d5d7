"""What doctor and the planner learn about the machine: bwrap's path and version, namespaces, libseccomp, cgroups, the proxy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from stockade.bwrap.parts import probe
from stockade.bwrap.parts.probe import (
    Check,
    bwrap_path,
    bwrap_version,
    cgroup_v2_delegated,
    check_bwrap,
    check_libseccomp,
    check_limits,
    check_proxy_daemon,
    check_userns,
    linux_checks,
    read_text,
)


@pytest.fixture(autouse=True)
def fresh_caches() -> object:
    bwrap_path.cache_clear()
    bwrap_version.cache_clear()
    yield
    bwrap_path.cache_clear()
    bwrap_version.cache_clear()


def script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{text}\n")
    path.chmod(mode)
    return path


def test_a_check_is_required_with_no_fix_by_default() -> None:
    check = Check("x", True, "fine")
    assert (check.fix, check.required) == ("", True)


# -- bwrap_path and bwrap_version ---------------------------------------------------------------------


def test_the_first_executable_candidate_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a" / "bwrap", script(tmp_path / "b" / "bwrap", "")
    first.parent.mkdir()
    first.write_text("")  # not executable
    monkeypatch.setattr(probe, "BWRAP_CANDIDATES", (str(first), str(second)))
    assert bwrap_path() == str(second)


def test_without_a_candidate_path_is_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = script(tmp_path / "bin" / "bwrap", "")
    monkeypatch.setattr(probe, "BWRAP_CANDIDATES", (str(tmp_path / "none"),))
    monkeypatch.setenv("PATH", str(found.parent))
    assert bwrap_path() == str(found)


def test_a_relative_path_entry_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script(tmp_path / "rel" / "bwrap", "")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(probe, "BWRAP_CANDIDATES", ())
    monkeypatch.setenv("PATH", "rel")
    assert bwrap_path() is None


@pytest.mark.parametrize(
    ("printed", "version"),
    [
        ("bubblewrap 0.9.0", (0, 9, 0)),
        ("bubblewrap 0.10", (0, 10, 0)),
        ("bwrap version 1.2.3-rc1", (1, 2, 3)),
        ("no numbers here", None),
        ("", None),
    ],
)
def test_bwrap_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, printed: str, version: tuple[int, ...] | None) -> None:
    fake = script(tmp_path / "bwrap", f"echo '{printed}'")
    monkeypatch.setattr(probe, "bwrap_path", lambda: str(fake))
    assert bwrap_version() == version


def test_no_bwrap_no_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "bwrap_path", lambda: None)
    assert bwrap_version() is None


def test_a_bwrap_that_cannot_run_has_no_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "bwrap_path", lambda: str(tmp_path / "gone"))
    assert bwrap_version() is None


# -- read_text --------------------------------------------------------------------------------------------


def test_read_text_strips_and_says_none_when_unreadable(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("  max 3\n\n")
    assert read_text(str(tmp_path / "f")) == "max 3"
    assert read_text(str(tmp_path / "missing")) is None
    assert read_text(str(tmp_path)) is None  # a folder


def test_read_text_of_a_non_ascii_file_does_not_raise(tmp_path: Path) -> None:
    (tmp_path / "cgroup").write_bytes("0::/user.slice/café.scope\n".encode())
    assert read_text(str(tmp_path / "cgroup")) in (None, "0::/user.slice/café.scope")


# -- check_bwrap ------------------------------------------------------------------------------------------


@pytest.fixture
def fake_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake = script(tmp_path / "bwrap", "")
    monkeypatch.setattr(probe, "bwrap_path", lambda: str(fake))
    return fake


@pytest.mark.parametrize(
    ("version", "ok", "detail"),
    [
        ((0, 9, 0), True, "PATH 0.9.0"),
        ((0, 5, 0), True, "PATH 0.5.0"),
        (None, True, "PATH unknown version"),
        ((0, 4, 0), False, "PATH 0.4.0 is too old"),
    ],
)
def test_check_bwrap(fake_bwrap: Path, monkeypatch: pytest.MonkeyPatch, version: tuple[int, ...] | None, ok: bool, detail: str) -> None:
    monkeypatch.setattr(probe, "bwrap_version", lambda: version)
    check = check_bwrap()
    assert (check.name, check.ok, check.detail) == ("bubblewrap", ok, detail.replace("PATH", str(fake_bwrap)))
    assert check.fix == ("" if ok else "stockade needs bwrap 0.5 or newer (--json-status-fd): upgrade bubblewrap")


def test_a_setuid_bwrap_is_refused(fake_bwrap: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bwrap.chmod(0o4755)
    monkeypatch.setattr(probe, "bwrap_version", lambda: (0, 9, 0))
    check = check_bwrap()
    assert not check.ok and check.detail == f"{fake_bwrap} 0.9.0 is setuid" and "remove the setuid bit" in check.fix


def test_no_bwrap_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "bwrap_path", lambda: None)
    check = check_bwrap()
    assert not check.ok and check.required and check.detail == "bwrap not found" and "apt-get install bubblewrap" in check.fix


# -- check_userns -------------------------------------------------------------------------------------------


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The /proc/sys files check_userns reads, as the test sets them."""
    files: dict[str, str] = {}
    monkeypatch.setattr(probe, "read_text", lambda path: files.get(path))
    monkeypatch.setattr(probe, "bwrap_path", lambda: "/usr/bin/bwrap")
    return files


def bwrap_answers(monkeypatch: pytest.MonkeyPatch, returncode: int, stderr: str = "") -> list[list[str]]:
    calls: list[list[str]] = []

    def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, returncode, "", stderr)

    monkeypatch.setattr(subprocess, "run", run)
    return calls


def test_namespaces_are_tried_for_real(kernel: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    kernel["/proc/sys/user/max_user_namespaces"] = "63000"
    calls = bwrap_answers(monkeypatch, 0)
    check = check_userns()
    assert calls == [["/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--", "/bin/true"]]
    assert check.ok and check.detail.endswith("(max_user_namespaces=63000)")


@pytest.mark.parametrize(
    ("files", "fix"),
    [
        pytest.param({"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"}, "Ubuntu restricts unprivileged user namespaces", id="apparmor"),
        pytest.param({"/proc/sys/kernel/unprivileged_userns_clone": "0"}, "sudo sysctl kernel.unprivileged_userns_clone=1", id="debian-clone"),
        pytest.param({"/proc/sys/user/max_user_namespaces": "0"}, "sudo sysctl user.max_user_namespaces=15000", id="max-zero"),
        pytest.param({}, "CONFIG_USER_NS", id="unknown"),
        pytest.param({"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1", "/proc/sys/user/max_user_namespaces": "0"},
                     "Ubuntu restricts", id="apparmor-first"),
    ],
)  # fmt: skip
def test_a_failure_says_the_likely_fix(kernel: dict[str, str], monkeypatch: pytest.MonkeyPatch, files: dict[str, str], fix: str) -> None:
    kernel.update(files)
    bwrap_answers(monkeypatch, 1, "bwrap: setting up uid map: Permission denied\n")
    check = check_userns()
    assert not check.ok and check.detail == "bwrap failed: bwrap: setting up uid map: Permission denied"
    assert fix in check.fix


def test_a_silent_failure_or_one_that_cannot_start(kernel: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap_answers(monkeypatch, 1, "")
    assert check_userns().detail == "bwrap failed: unknown error"

    def timeout(argv: list[str], **kwargs: object) -> None:
        raise subprocess.TimeoutExpired(argv, 10)

    monkeypatch.setattr(subprocess, "run", timeout)
    check = check_userns()
    assert not check.ok and "timed out" in check.detail


def test_without_bwrap_namespaces_cannot_be_tested(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "bwrap_path", lambda: None)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("nothing to run"))
    assert check_userns() == Check("user namespaces", False, "cannot test without bwrap", "install bubblewrap first")


# -- check_libseccomp ------------------------------------------------------------------------------------------


def test_check_libseccomp(monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.bwrap.parts import seccomp_cache
    from stockade.core.errors import SandboxSetupError

    monkeypatch.setattr(seccomp_cache, "libseccomp_version", lambda: "2.5.4")
    assert check_libseccomp() == Check("libseccomp", True, "libseccomp 2.5.4")

    def missing() -> str:
        raise SandboxSetupError("libseccomp.so.2 not found")

    monkeypatch.setattr(seccomp_cache, "libseccomp_version", missing)
    check = check_libseccomp()
    assert not check.ok and check.required and "apt-get install libseccomp2" in check.fix


# -- cgroups ------------------------------------------------------------------------------------------------------


@pytest.fixture
def cgroups(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], set[str]]:
    """(files read, paths writable) as cgroup_v2_delegated sees them."""
    files: dict[str, str] = {}
    writable: set[str] = set()
    monkeypatch.setattr(probe, "read_text", lambda path: files.get(path))
    monkeypatch.setattr(os, "access", lambda path, mode: mode == os.W_OK and str(path) in writable)
    return files, writable


SESSION = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope"


def delegate(writable: set[str], folder: str) -> None:
    writable.update({folder, f"{folder}/cgroup.procs"})


@pytest.mark.parametrize(
    ("own", "writable_at", "found"),
    [
        pytest.param("0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope\n", SESSION, SESSION, id="own-cgroup"),
        pytest.param("0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope/\n", SESSION, SESSION, id="trailing-slash"),
        pytest.param("0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope\n", os.path.dirname(SESSION),
                     os.path.dirname(SESSION), id="its-parent"),
        pytest.param("0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope\n", "/sys/fs/cgroup/user.slice", None,
                     id="higher-up-is-not-looked-at"),
        pytest.param("0::/user.slice\n", None, None, id="nothing-writable"),
        pytest.param("12:pids:/user.slice\n1:name=systemd:/user.slice\n", "/sys/fs/cgroup/user.slice", None, id="v1-only"),
        pytest.param("1:name=systemd:/x\n0::/\n", "/sys/fs/cgroup", "/sys/fs/cgroup", id="the-root"),
    ],
)  # fmt: skip
def test_cgroup_v2_delegated(cgroups: tuple[dict[str, str], set[str]], own: str, writable_at: str | None, found: str | None) -> None:
    files, writable = cgroups
    files["/sys/fs/cgroup/cgroup.controllers"] = "cpu memory pids"
    files["/proc/self/cgroup"] = own.strip()
    if writable_at:
        delegate(writable, writable_at)
    assert cgroup_v2_delegated() == found


def test_no_v2_hierarchy_no_delegation(cgroups: tuple[dict[str, str], set[str]]) -> None:
    files, writable = cgroups
    files["/proc/self/cgroup"] = "0::/"
    delegate(writable, "/sys/fs/cgroup")
    assert cgroup_v2_delegated() is None


def test_a_writable_folder_needs_a_writable_procs_file(cgroups: tuple[dict[str, str], set[str]]) -> None:
    files, writable = cgroups
    files["/sys/fs/cgroup/cgroup.controllers"] = ""
    files["/proc/self/cgroup"] = "0::/a"
    writable.add("/sys/fs/cgroup/a")
    assert cgroup_v2_delegated() is None


def test_check_limits_with_a_delegated_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: "/sys/fs/cgroup/x")
    assert check_limits() == Check("resource limits", True, "pids and memory through cgroup v2 under /sys/fs/cgroup/x", required=False)


def test_check_limits_without_one_says_rlimits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: None)
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    check = check_limits()
    assert check.ok and not check.required and "fall back to rlimits" in check.detail and "systemd user session" in check.fix


def test_check_limits_says_what_a_run_will_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.bwrap.parts import limits

    script(tmp_path / "bin" / "systemd-run", "")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
    monkeypatch.setattr(probe, "cgroup_v2_delegated", lambda: None)
    monkeypatch.setattr(limits, "V1_ROOT", str(tmp_path / "no-v1"))
    plan = limits.plan_limits(None, 64, 1 << 30, "s")
    assert plan.cgroup_dirs == [] and "RLIMIT" in plan.describe()  # what a run does here
    assert "rlimits" in check_limits().detail  # what doctor says it does


# -- the proxy and the whole list --------------------------------------------------------------------------------


def test_check_proxy_daemon(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    from stockade.proxy.client import api

    monkeypatch.setattr(api, "daemon_status", lambda locations: None)
    check = check_proxy_daemon()
    assert check.ok and not check.required and check.detail.startswith("not running")
    monkeypatch.setattr(api, "daemon_status", lambda locations: {"port": 8123, "pid": 42, "sessions": 2, "clients": 5})
    assert check_proxy_daemon().detail == "running on 127.0.0.1:8123 (pid 42, 2 session(s), 5 connection(s))"


def test_linux_checks_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [
        "check_bwrap", "check_userns", "check_libseccomp", "check_limits", "check_folders", "check_cache_layers", "check_staging",
        "check_interception", "check_gpu", "check_proxy_daemon",
    ]  # fmt: skip
    for name in names:
        monkeypatch.setattr(probe, name, lambda name=name: Check(name, True, ""))
    assert [check.name for check in linux_checks()] == names


def test_the_cache_layers_check_warns_with_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.bwrap.parts import layers

    monkeypatch.setattr(layers, "probe", lambda store: None)
    assert probe.check_cache_layers().ok
    monkeypatch.setattr(layers, "probe", lambda store: "the kernel refused an overlay there (Operation not permitted)")
    check = probe.check_cache_layers()
    assert not check.ok and not check.required and "Operation not permitted" in check.detail and "private" in check.detail


def test_the_folders_check_names_a_file_in_the_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert probe.check_folders().ok  # control: nothing made yet, and all of it can be
    (tmp_path / ".cache").write_text("oops")
    check = probe.check_folders()
    assert not check.ok and check.detail == f"{tmp_path / '.cache'} is a file, not a folder" and "mv " in check.fix


def test_the_interception_check_warns_with_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from stockade.bwrap.parts import interception

    monkeypatch.setattr(interception, "probe", lambda: None)
    assert probe.check_interception().ok
    monkeypatch.setattr(interception, "probe", lambda: "Operation not supported (is nf_tables in this kernel?)")
    check = probe.check_interception()
    assert not check.ok and not check.required and "HTTP_PROXY" in check.detail and "nf_tables" in check.fix
