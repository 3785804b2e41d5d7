"""The contenders: no sandbox, bare bwrap, `stockade run` and srt, each wrapping the same command with equivalent rules.

Equivalent means: the project is the only writable place, the reads stockade's `default` profile denies are denied,
and the network is either off or open to the bench's loopback origins only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common import first_line, run_checked
from fixtures import NAME

REPO = Path(__file__).resolve().parents[1]
HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable  # /tmp is private inside
TRUE = shutil.which("true") or "/bin/true"  # a real exec: `true` alone is a builtin in the loop's shell
SRT_PACKAGE = "@anthropic-ai/sandbox-runtime"
SRT_PREFIX = Path.home() / ".cache" / "stockade-bench" / "srt"  # kept between runs, so a rerun installs nothing

Wrap = Callable[[Path, Sequence[str]], list[str]]  # (project, command) -> argv


@dataclass(frozen=True)
class Tool:
    """How one contender runs a command in a project, and by which name it reaches the loopback origins."""

    name: str
    wrap: Wrap
    host: str = "127.0.0.1"
    proxied: bool = False
    before: Callable[[], None] | None = None  # untimed, ahead of every sample
    after: Callable[[], None] | None = None  # untimed, after every sample
    inspected: bool = False  # the daemon terminates its TLS (HTTP rules): clients trust the sandbox's CA bundle
    credential: bool = False  # requests carry $BENCH_TOKEN, a placeholder the daemon swaps for the value


@dataclass
class World:
    """One bench run's folders under the real HOME (not /tmp, which every sandbox replaces with its own)."""

    root: Path
    env: dict[str, str]

    @classmethod
    def create(cls) -> World:
        root = Path(tempfile.mkdtemp(prefix="sbn-", dir=Path.home()))  # short: the daemon's socket path lives below
        home = root / "h"
        home.mkdir()
        env = {
            "HOME": str(home),  # a HOME of its own: its own stockade daemon, which the bench stops and starts
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "STOCKADE_PROXY_TEST_RESOLVER": str(root / "names.json"),
            "STOCKADE_PROXY_IDLE": "900",  # no idle exit in the middle of a run
        }
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]  # a stockade tree being measured from its checkout
        return cls(root, env)

    def project(self, label: str) -> Path:
        """A fresh project folder for one contender on one workload."""
        folder = self.root / "p" / re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
        folder.mkdir(parents=True)
        return folder

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def stockade_python(self) -> str:
        """The interpreter the `stockade` console script starts (its #! line), or this one."""
        found = shutil.which("stockade")
        if found:
            with open(found, "rb") as script:
                line = script.readline()
            if line.startswith(b"#!") and b"python" in line:
                return line[2:].split()[0].decode()
        return sys.executable

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def bare(project: Path, command: Sequence[str]) -> list[str]:
    return list(command)


def bare_bwrap(project: Path, command: Sequence[str]) -> list[str]:
    """The least bwrap that isolates like the others: read-only root, writable project, fresh /dev and /proc, no network."""
    p = str(project)
    return ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", p, p,
            "--unshare-all", "--die-with-parent", "--chdir", p, *command]  # fmt: skip


def default_deny_read() -> list[str]:
    """stockade's `default` read denials, for srt's equivalent policy (read from the repository, so they stay in step)."""
    with open(REPO / "src" / "stockade" / "profiles" / "builtin" / "default.toml", "rb") as handle:
        return list(tomllib.load(handle)["filesystem"]["deny_read"])


class Stockade:
    """`stockade run` from the installed console script, with a test resolver mapping NAME to the loopback origins."""

    def __init__(self, world: World) -> None:
        found = shutil.which("stockade")
        self.command = [found] if found else [sys.executable, "-m", "stockade.cli.main"]
        self.world = world
        self.home = Path(world.env["HOME"])
        self.net_policy = world.write("net.toml", f'extends = ["default"]\n[network]\nallow = ["{NAME}"]\n')
        self.inspect_policy = world.write(
            "inspect.toml", f'extends = ["default"]\n[network]\nallow = ["{NAME}"]\n[network.http."{NAME}"]\nallow = ["GET /**"]\n'
        )
        self.credential_policy = world.write(
            "credential.toml",
            f'extends = ["default"]\n[network]\nallow = ["{NAME}"]\n[credentials.BENCH_TOKEN]\nenv = "BENCH_SECRET"\nhosts = ["{NAME}"]\n',
        )

    def route(self, ports: Sequence[int]) -> None:
        """Tell the daemon's test resolver that NAME is on loopback, and that these origins may be reached there."""
        names = {"names": {NAME: ["127.0.0.1"]}, "upstreams": [f"127.0.0.1:{port}" for port in ports]}
        Path(self.world.env["STOCKADE_PROXY_TEST_RESOLVER"]).write_text(json.dumps(names))

    def off(self, project: Path, command: Sequence[str]) -> list[str]:
        return [*self.command, "run", "--quiet", "--profile", "offline", "--", *command]

    def traced(self, project: Path, command: Sequence[str]) -> list[str]:
        """--trace: the report after the run is on stderr, which the bench drops."""
        return [*self.command, "run", "--quiet", "--trace", "--profile", "offline", "--", *command]

    def net(self, project: Path, command: Sequence[str]) -> list[str]:
        return [*self.command, "run", "--quiet", "--policy", str(self.net_policy), "--", *command]

    def inspected(self, project: Path, command: Sequence[str]) -> list[str]:
        return [*self.command, "run", "--quiet", "--policy", str(self.inspect_policy), "--", *command]

    def credential(self, project: Path, command: Sequence[str]) -> list[str]:
        return [*self.command, "run", "--quiet", "--policy", str(self.credential_policy), "--", *command]

    def stop_daemon(self) -> None:
        """Stop this HOME's daemon and wait until it is gone, so the next run starts a cold one."""
        try:
            pid = int(json.loads((self.home / ".local/state/stockade/run/proxy.port").read_text())["pid"])
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return
            except OSError:
                return
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)

    def await_daemon(self) -> None:
        """Wait (untimed) until a daemon a cold run started is serving, so its start loads no other sample."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                pid = int(json.loads((self.home / ".local/state/stockade/run/proxy.port").read_text())["pid"])
                os.kill(pid, 0)
                return
            except (OSError, ValueError, KeyError):
                time.sleep(0.01)

    def version(self) -> str:
        return first_line([*self.command, "--version"])


class Srt:
    """srt (Anthropic's sandbox-runtime) with settings equivalent to stockade's policies, one file per network mode."""

    def __init__(self, binary: Path, world: World, ports: Sequence[int]) -> None:
        self.binary = binary
        deny = default_deny_read()
        allowed = [f"127.0.0.1:{port}" for port in ports]  # srt dials only what an IP literal allows on loopback
        self.off_settings = world.write("srt-off.json", json.dumps(srt_settings(deny, []), indent=2))
        self.net_settings = world.write("srt-net.json", json.dumps(srt_settings(deny, allowed), indent=2))

    def off(self, project: Path, command: Sequence[str]) -> list[str]:
        return [str(self.binary), "--settings", str(self.off_settings), "--", *command]

    def net(self, project: Path, command: Sequence[str]) -> list[str]:
        return [str(self.binary), "--settings", str(self.net_settings), "--", *command]

    def version(self) -> str:
        return first_line([str(self.binary), "--version"])


def srt_settings(deny_read: list[str], allowed: list[str]) -> dict[str, object]:
    return {
        "network": {"allowedDomains": allowed, "deniedDomains": []},
        "filesystem": {"denyRead": deny_read, "allowWrite": ["."], "denyWrite": []},
    }


def srt_missing_tools(install: bool) -> tuple[list[str], str]:
    """What srt needs on Linux besides node (bwrap, socat, ripgrep); apt-get installs them when asked and able."""
    needed = {"bwrap": "bubblewrap", "socat": "socat", "rg": "ripgrep"}
    missing = [package for tool, package in needed.items() if shutil.which(tool) is None]
    if missing and install and os.geteuid() == 0 and shutil.which("apt-get"):
        run_checked(["apt-get", "install", "-y", "--no-install-recommends", *missing], timeout=900)
        return [package for tool, package in needed.items() if shutil.which(tool) is None], f"apt-get installed {' '.join(missing)}"
    return missing, ""


def installed_srt() -> dict[str, object]:
    try:
        return dict(json.loads((SRT_PREFIX / "node_modules" / SRT_PACKAGE / "package.json").read_text()))
    except (OSError, ValueError):
        return {}


def install_srt(spec: str) -> Path:
    """srt from npm into SRT_PREFIX; reuses what is there when it is already the version asked for."""
    binary = SRT_PREFIX / "node_modules" / ".bin" / "srt"
    wanted = spec
    if spec == "latest":
        try:
            wanted = run_checked(["npm", "view", f"{SRT_PACKAGE}@latest", "version"], timeout=120).strip()
        except (SystemExit, subprocess.TimeoutExpired):
            if binary.exists():
                return binary  # the registry is unreachable: the cached install will do
            raise
    if not (binary.exists() and installed_srt().get("version") == wanted):
        SRT_PREFIX.mkdir(parents=True, exist_ok=True)
        print(f"installing {SRT_PACKAGE}@{wanted} into {SRT_PREFIX}", file=sys.stderr)
        run_checked(["npm", "install", "--prefix", str(SRT_PREFIX), "--no-audit", "--no-fund", f"{SRT_PACKAGE}@{wanted}"], timeout=900)
    return binary


def find_srt(install: bool, spec: str) -> tuple[Path | None, list[str]]:
    """srt's binary (installed when asked, else from PATH) and notes for the report: how it was found or why not."""
    missing, installed_note = srt_missing_tools(install)
    notes = ["srt on Linux needs bwrap, socat and ripgrep (Debian: bubblewrap socat ripgrep; --with-srt apt-gets the missing ones as root)"]
    notes += [installed_note] if installed_note else []
    if missing:
        return None, [*notes, f"srt skipped: it needs {', '.join(missing)} (apt-get install {' '.join(missing)})"]
    if install:
        if shutil.which("npm") is None:
            return None, [*notes, "srt skipped: --with-srt needs npm"]
        binary = install_srt(spec)
        manifest = installed_srt()
        notes.append(f"srt: `npm install --prefix {SRT_PREFIX} {SRT_PACKAGE}@{manifest.get('version')}` (cached there between runs)")
        engines = manifest.get("engines")
        if isinstance(engines, dict) and "node" in engines:
            notes.append(f"srt {manifest.get('version')} declares node {engines['node']}; this machine has node {first_line(['node', '--version'])}")
        return binary, notes
    found = shutil.which("srt")
    if found is None:
        return None, [*notes, "srt skipped: not on PATH (run with --with-srt to install it into a cached prefix)"]
    return Path(found), [*notes, f"srt: {found} from PATH"]
