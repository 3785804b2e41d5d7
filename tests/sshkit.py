"""A loopback sshd for tests, without installing Debian's openssh-server (which would start a system sshd).

`sshd_binary` finds an sshd: $STOCKADE_TEST_SSHD, else the one unpacked from
Debian's package into tests/.cache/sshd/ (`fetch_sshd`, which .ci/run calls:
`apt-get download` + `dpkg-deb -x`, nothing installed, nothing started), else
/usr/sbin/sshd. `Sshd` runs one on 127.0.0.1 on a free port as the current user
(root or not: no privilege separation, `StrictModes no`), with a fresh host key
and one authorized key; tests skip when there is no sshd or ssh client.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "tests" / ".cache" / "sshd"
UNPACKED = CACHE / "root" / "usr" / "sbin" / "sshd"


def sshd_binary() -> str | None:
    for candidate in (os.environ.get("STOCKADE_TEST_SSHD", ""), str(UNPACKED), "/usr/sbin/sshd"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def client_tools() -> bool:
    return all(shutil.which(tool) for tool in ("ssh", "ssh-keygen", "ssh-agent", "ssh-add"))


def fetch_sshd() -> str:
    """Unpack Debian's openssh-server into tests/.cache/sshd (no install, no service); its sshd."""
    if UNPACKED.is_file():
        return str(UNPACKED)
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", "openssh-server"], cwd=CACHE, check=True, capture_output=True)
    (deb,) = CACHE.glob("openssh-server_*.deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(CACHE / "root")], check=True)
    deb.unlink()
    return str(UNPACKED)


def unusable() -> str | None:
    """Why no test sshd can run here, or None."""
    if sshd_binary() is None:
        return "no sshd: run `python -m tests.sshkit fetch` (unpacks Debian's openssh-server, installs nothing)"
    if not client_tools() or shutil.which("git") is None:
        return "no ssh client tools (ssh, ssh-keygen, ssh-agent, ssh-add) or git"
    if os.getuid() == 0:
        import pwd

        try:
            pwd.getpwnam("sshd")
        except KeyError:
            return "sshd as root needs its privilege-separation user: useradd --system --no-create-home --shell /usr/sbin/nologin sshd"
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its chroot, empty
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def keygen(path: Path, comment: str = "stockade-test") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return path


class Sshd:
    """sshd on 127.0.0.1:`port` that lets `user_key` in (and runs commands with `shell`)."""

    def __init__(self, binary: str, folder: Path, authorized: list[Path]) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(folder / "host_key", "host")
        keys = folder / "authorized_keys"
        keys.write_text("".join(Path(f"{key}.pub").read_text() for key in authorized))
        keys.chmod(0o644)
        self.port = free_port()
        config = folder / "sshd_config"
        config.write_text(
            f"ListenAddress 127.0.0.1:{self.port}\n"
            f"HostKey {self.host_key}\n"
            f"AuthorizedKeysFile {keys}\n"
            f"PidFile {folder / 'sshd.pid'}\n"
            "StrictModes no\n"
            "UsePAM no\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\n"
            "PermitRootLogin yes\n"
            "AllowTcpForwarding no\n"
            "X11Forwarding no\n"
            "PrintMotd no\n"
            "Subsystem sftp internal-sftp\n"
            "LogLevel VERBOSE\n"
        )
        self.log = folder / "sshd.log"
        # -D: no daemon; -e: log to stderr (the log file). sshd wants its absolute path to re-exec.
        self.process = subprocess.Popen(
            [binary, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=self.log.open("wb"), stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log.read_text()}")
            if "Server listening on" in self.log.read_text(errors="replace"):  # not a probe: it would count as a connection
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"sshd did not listen: {self.log.read_text()}")

    def known_hosts_line(self, name: str) -> str:
        """The known_hosts line for this server as ssh looks it up under `name` on this port."""
        return f"[{name}]:{self.port} {Path(f'{self.host_key}.pub').read_text().split(' ')[0]} {Path(f'{self.host_key}.pub').read_text().split(' ')[1]}\n"

    def connections(self) -> int:
        """How many TCP connections reached it so far (from its log)."""
        return self.log.read_text(errors="replace").count("Connection from ")

    def accepted(self) -> int:
        """How many logins it accepted so far (from its log)."""
        return self.log.read_text(errors="replace").count("Accepted publickey")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":  # .ci/run: python -m tests.sshkit fetch
    if sys.argv[1:] == ["fetch"]:
        print(fetch_sshd())
