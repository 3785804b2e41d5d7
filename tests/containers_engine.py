"""A real container engine for the tests: podman's Docker-compatible API service, started by them.

Only the package registries are reachable, so the image is made here: a root
filesystem of the host's own dash, coreutils and their libraries, imported as
IMAGE. Podman keeps its store in a folder of the tests' own (never the
machine's), runs containers with runc and cgroupfs (what a machine without
systemd's cgroup manager has), and listens at a socket of the tests' own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

IMAGE = "localhost/stockade-test:1"
OTHER_IMAGE = "localhost/stockade-other:1"
WEB_IMAGE = "localhost/stockade-test:web"  # busybox's httpd and nc, where the host has a static busybox
BUSYBOX = "/bin/busybox"
PROGRAMS = ("/bin/dash", "/bin/cat", "/bin/ls", "/bin/sleep", "/bin/echo", "/bin/touch", "/bin/id")
CONF = """[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "podman's engine runs as root here (rootless podman needs subordinate uids this machine's test user lacks)"
    for program in ("podman", "runc"):
        if shutil.which(program) is None:
            return f"needs {program} (apt-get install podman runc; .ci/run installs them)"
    return None


class Engine:
    """podman system service at `socket`, with its own store under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = str(root / "podman.sock")
        conf = root / "containers.conf"
        conf.write_text(CONF)
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.podman = ["podman", "--root", str(root / "store"), "--runroot", str(root / "run"), "--tmpdir", str(root / "tmp")]
        self.service: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._image(IMAGE)
        self._image(OTHER_IMAGE)
        self.web = os.path.exists(BUSYBOX) and _static(BUSYBOX)
        if self.web:
            self._web_image()
        self.service = subprocess.Popen(
            [*self.podman, "system", "service", "--time=0", f"unix://{self.socket}"],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            if time.monotonic() > deadline or self.service.poll() is not None:
                raise RuntimeError("podman system service did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.service is not None:
            self.service.terminate()
            try:
                self.service.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.service.kill()
        subprocess.run([*self.podman, "rm", "-af"], env=self.env, capture_output=True, timeout=120)
        subprocess.run([*self.podman, "volume", "rm", "-af"], env=self.env, capture_output=True, timeout=120)

    def _web_image(self) -> None:
        web = self.root / "web"
        for folder in ("bin", "www", "etc", "tmp", "proc", "dev", "sys"):
            (web / folder).mkdir(parents=True, exist_ok=True)
        shutil.copy2(BUSYBOX, web / "bin" / "busybox")
        for name in ("sh", "httpd", "nc", "echo", "cat", "sleep", "printf"):
            os.symlink("busybox", web / "bin" / name)
        (web / "www" / "index.html").write_text("served-from-a-container\n")
        tar = self.root / "web.tar"
        subprocess.run(["tar", "-C", str(web), "-cf", str(tar), "."], check=True)
        self.run("import", str(tar), WEB_IMAGE)

    def run(self, *words: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """podman itself, on the host: what the engine holds, seen around the gate."""
        return subprocess.run([*self.podman, *words], env=self.env, capture_output=True, text=True, timeout=120, check=check)

    def names(self, label: str = "io.stockade.session") -> list[str]:
        """The containers (all states) carrying `label`."""
        found = self.run("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}")
        return found.stdout.split()

    def _image(self, name: str) -> None:
        """An image of its own for each name (one content under two names would be one image)."""
        rootfs = self.root / "rootfs"
        if not rootfs.exists():
            _rootfs(rootfs)
        (rootfs / "etc" / "image-name").write_text(name + "\n")
        tar = self.root / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tar), "."], check=True)
        self.run("import", str(tar), name)


def _static(program: str) -> bool:
    """Whether `program` needs no library (a static busybox runs in an image of its own alone)."""
    listed = subprocess.run(["ldd", program], capture_output=True, text=True)
    said = listed.stdout + listed.stderr
    return "not a dynamic executable" in said or "statically linked" in said


def _rootfs(rootfs: Path) -> None:
    """The programs and the libraries ldd names for them, at their own paths."""
    (rootfs / "bin").mkdir(parents=True)
    for folder in ("tmp", "proc", "dev", "sys", "etc", "data"):
        (rootfs / folder).mkdir()
    libraries: set[str] = set()
    for program in PROGRAMS:
        shutil.copy2(program, rootfs / "bin" / os.path.basename(program))
        listed = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
        for line in listed.splitlines():
            for word in line.split():
                if word.startswith("/"):
                    libraries.add(word)
    for library in libraries:
        target = rootfs / library.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(library), target)
    os.symlink("dash", rootfs / "bin" / "sh")
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")


def start_engine(root: Path) -> Engine:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    engine = Engine(root)
    engine.start()
    return engine
