"""Facts about this Linux machine that decide whether and how stockade can sandbox."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


BWRAP_CANDIDATES = ("/usr/bin/bwrap", "/usr/local/bin/bwrap")
MIN_BWRAP = (0, 5)  # --json-status-fd tells the command's exit from a failed setup (bwrap/running/supervise.py)


@lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    """bwrap by absolute path: never whatever a writable PATH entry offers first."""
    for candidate in BWRAP_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    import shutil

    found = shutil.which("bwrap")
    return found if found and os.path.isabs(found) else None


@lru_cache(maxsize=1)
def bwrap_version() -> tuple[int, ...] | None:
    import subprocess

    path = bwrap_path()
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g or 0) for g in match.groups()) if match else None


def read_text(path: str) -> str | None:
    """A small kernel or cgroup file, stripped; None when unreadable."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:  # a cgroup's name may be any bytes
            return handle.read().strip()
    except OSError:
        return None


def check_bwrap() -> Check:
    path = bwrap_path()
    if path is None:
        return Check("bubblewrap", False, "bwrap not found", "install it: sudo apt-get install bubblewrap (or dnf install bubblewrap)")
    version = bwrap_version()
    text = ".".join(map(str, version)) if version else "unknown version"
    mode = os.stat(path).st_mode
    if mode & 0o4000:
        return Check("bubblewrap", False, f"{path} {text} is setuid", "stockade needs non-setuid bwrap with user namespaces; remove the setuid bit")
    if version is not None and version < MIN_BWRAP:
        return Check(
            "bubblewrap",
            False,
            f"{path} {text} is too old",
            f"stockade needs bwrap {'.'.join(map(str, MIN_BWRAP))} or newer (--json-status-fd): upgrade bubblewrap",
        )
    return Check("bubblewrap", True, f"{path} {text}")


def check_userns() -> Check:
    """Can this user create the namespaces a sandbox needs? Tried for real."""
    import subprocess

    apparmor = read_text("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    clone = read_text("/proc/sys/kernel/unprivileged_userns_clone")
    max_ns = read_text("/proc/sys/user/max_user_namespaces")
    path = bwrap_path()
    if path is None:
        return Check("user namespaces", False, "cannot test without bwrap", "install bubblewrap first")
    try:
        result = subprocess.run(
            [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        ok, error = result.returncode == 0, result.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, error = False, str(exc)
    if ok:
        return Check("user namespaces", True, f"bwrap can create user, pid, net, ipc, uts and cgroup namespaces (max_user_namespaces={max_ns})")
    if apparmor == "1":
        fix = (
            "Ubuntu restricts unprivileged user namespaces: add an AppArmor profile for bwrap "
            "(see /etc/apparmor.d/bwrap-userns-restrict on Ubuntu 24.04) or run "
            "sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0"
        )
    elif clone == "0":
        fix = "run: sudo sysctl kernel.unprivileged_userns_clone=1"
    elif max_ns == "0":
        fix = "run: sudo sysctl user.max_user_namespaces=15000"
    else:
        fix = "check that the kernel has CONFIG_USER_NS and that no container runtime forbids unshare"
    return Check("user namespaces", False, f"bwrap failed: {error or 'unknown error'}", fix)


def check_libseccomp() -> Check:
    from stockade.bwrap.parts.seccomp_cache import libseccomp_version
    from stockade.core.errors import SandboxSetupError

    try:
        version = libseccomp_version()
    except SandboxSetupError:
        return Check("libseccomp", False, "libseccomp.so.2 not found", "install it: sudo apt-get install libseccomp2")
    return Check("libseccomp", True, f"libseccomp {version}")


def cgroup_v2_delegated() -> str | None:
    """A cgroup v2 directory this user may create children in, if any."""
    if read_text("/sys/fs/cgroup/cgroup.controllers") is None:
        return None
    own = read_text("/proc/self/cgroup") or ""
    match = re.search(r"^0::(.*)$", own, re.MULTILINE)
    if not match:
        return None
    folder = "/sys/fs/cgroup" + match.group(1).rstrip("/")
    for candidate in (folder, os.path.dirname(folder)):
        if os.access(candidate, os.W_OK) and os.access(os.path.join(candidate, "cgroup.procs"), os.W_OK):
            return candidate
    return None


def check_limits() -> Check:
    folder = cgroup_v2_delegated()
    if folder:
        return Check("resource limits", True, f"pids and memory through cgroup v2 under {folder}", required=False)
    return Check(
        "resource limits",
        True,
        "no delegated cgroup: [limits] memory and pids fall back to rlimits (per process / per user)",
        "for exact limits, run under a systemd user session or delegate a cgroup v2 subtree",
        required=False,
    )


def check_proxy_daemon() -> Check:
    from stockade.core.locations import locate
    from stockade.proxy.client.api import daemon_status

    status = daemon_status(locate())
    if status is None:
        return Check("network proxy", True, "not running: the first run with a network allowlist starts it", required=False)
    return Check(
        "network proxy",
        True,
        f"running on 127.0.0.1:{status.get('port')} (pid {status.get('pid')}, {status.get('sessions')} session(s), "
        f"{status.get('clients')} connection(s))",
        required=False,
    )


def check_folders() -> Check:
    """stockade's own folders (state, cache, runtime, config) are folders it can make or write."""
    from stockade.core.locations import locate

    where = locate()
    for folder in (*where.private_dirs(), where.config):
        existing = next(p for p in (folder, *folder.parents) if os.path.lexists(p))
        if not existing.is_dir():
            return Check("stockade's folders", False, f"{existing} is a file, not a folder", f"move it aside: mv {existing} {existing}.old")
        if not os.access(existing, os.W_OK | os.X_OK):
            return Check("stockade's folders", False, f"{existing} is not writable by you", f"give your user write access to {existing}")
    return Check("stockade's folders", True, f"{where.state}, {where.cache}, {where.runtime}")


def check_cache_layers() -> Check:
    """Whether the package caches a policy makes writable can be overlays (bwrap/parts/layers.py)."""
    from stockade.core.locations import locate

    return _overlay_check(
        "cache layers", os.path.join(str(locate().cache), "layers"),
        "a writable package cache keeps the sandbox's writes apart",
        "a writable package cache is a private one per project, empty at first (never the host's)", "stockade's cache (XDG_CACHE_HOME)",
    )  # fmt: skip


def check_staging() -> Check:
    """Whether a staged run's overlay can be made in stockade's state folder (checkpoints/stage.py)."""
    from stockade.core.locations import locate

    return _overlay_check(
        "staging", os.path.join(str(locate().state), "checkpoints"),
        "`stockade run --stage` keeps a run's changes for review",
        "a staged run (`--stage`, [checkpoints] stage = true) would not start", "stockade's state folder (XDG_STATE_HOME)",
    )  # fmt: skip


def _overlay_check(name: str, store: str, when_ok: str, when_not: str, folder: str) -> Check:
    """Whether an overlay can be made under `store`, tried as a run makes one (layers.probe)."""
    from stockade.bwrap.parts.layers import probe

    try:
        why = probe(store)
    except OSError as error:
        why = error.strerror or str(error)
    if why is None:
        return Check(name, True, f"overlays under {store}: {when_ok}", required=False)
    fix = f"keep {folder} on a local file system such as ext4, xfs or btrfs, on Linux 5.11 or later"
    return Check(name, False, f"no overlay ({why}): {when_not}", fix, required=False)


def check_gpu() -> Check:
    """The GPU device nodes `--gpu` would bind (bwrap/parts/devices.py): a fact, never a failure."""
    from stockade.bwrap.parts.devices import gpu_nodes

    nodes = gpu_nodes()
    if nodes:
        return Check("GPUs", True, f"{len(nodes)} device nodes ({', '.join(nodes)}): `--gpu` or [devices] gpu = true binds them", required=False)
    return Check("GPUs", True, "no GPU device nodes (/dev/nvidia*, /dev/dri/renderD*): `--gpu` has nothing to bind", required=False)


def check_interception() -> Check:
    """Whether programs that ignore the proxy variables reach the filter (bwrap/parts/interception.py)."""
    from stockade.bwrap.parts.interception import probe

    try:
        why = probe()
    except OSError as error:
        why = error.strerror or str(error)
    if why is None:
        return Check("interception", True, "every TCP connection and DNS query of a networked run reaches the filter", required=False)
    return Check(
        "interception",
        False,
        f"not available ({why}): only programs that read HTTP_PROXY/HTTPS_PROXY have a network inside",
        "the kernel needs nf_tables with NAT, reject and NFLOG (CONFIG_NFT_REDIR, CONFIG_NFT_REJECT, CONFIG_NETFILTER_NETLINK_LOG)",
        required=False,
    )


def linux_checks() -> list[Check]:
    return [
        check_bwrap(), check_userns(), check_libseccomp(), check_limits(), check_folders(), check_cache_layers(), check_staging(),
        check_interception(), check_gpu(), check_proxy_daemon(),
    ]  # fmt: skip
