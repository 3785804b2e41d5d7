"""A small world for real Seatbelt runs: a home with canaries, a project, a folder outside.

Commands run through `SeatbeltPlanner.run`, i.e. the real `/usr/bin/sandbox-exec`
with the generated profile; output is captured at the file-descriptor level.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stockade.core.backend import RunRequest
from stockade.core.locations import Locations
from stockade.profiles.model import Policy
from stockade.profiles.resolve import resolve
from stockade.seatbelt.planner import SANDBOX_EXEC, SeatbeltPlanner

ON_MAC = sys.platform == "darwin" and os.access(SANDBOX_EXEC, os.X_OK)
MUST_RUN = os.environ.get("STOCKADE_MACOS_MUST_RUN") == "1"  # CI: fail instead of skipping
SKIP_REASON = "real Seatbelt tests need macOS with /usr/bin/sandbox-exec (set STOCKADE_MACOS_MUST_RUN=1 to fail instead)"
PLATFORM = [] if MUST_RUN else [pytest.mark.skipif(not ON_MAC, reason=SKIP_REASON)]
HOST_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
UNUSED_PORT = 9  # a proxied policy needs some port even when nothing connects


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass
class World:
    """$H, $P, $O of ESCAPES.md, under one real (resolved) temp folder."""

    root: Path
    capfd: pytest.CaptureFixture[str]
    home: Path = field(init=False)
    project: Path = field(init=False)
    outside: Path = field(init=False)
    policies: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.project = self.root / "proj"
        self.outside = self.root / "outside"
        self.policies = self.root / "policies"
        for folder in (self.home / ".ssh", self.home / ".aws", self.project, self.outside, self.policies):
            folder.mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "id_test").write_text("CANARY-SSH\n")
        (self.home / ".aws" / "credentials").write_text("CANARY-AWS\n")
        (self.home / ".bashrc").write_text("# rc\n")
        (self.outside / "secret.txt").write_text("CANARY-O\n")
        (self.project / "README").write_text("CANARY-OK\n")

    def locations(self) -> Locations:
        home = self.home
        return Locations(
            home=home,
            config=home / ".config/stockade",
            state=home / ".local/state/stockade",
            cache=home / ".cache/stockade",
            runtime=home / ".local/state/stockade/run",
        )

    def policy(self, *, profile: str | None = "default", text: str | None = None, project: Path | None = None) -> Policy:
        """A built-in profile, or a policy file with `text` (absolute and ~ paths only)."""
        project = project or self.project
        if text is None:
            return resolve(project, self.locations(), profile=profile).policy
        path = self.policies / f"policy-{secrets.token_hex(4)}.toml"
        path.write_text(text)
        return resolve(project, self.locations(), policy_file=path).policy

    def run(
        self,
        command: tuple[str, ...],
        *,
        policy: Policy | None = None,
        proxy_port: int | None = None,
        cwd: Path | None = None,
        quiet: bool = True,
    ) -> Result:
        policy = policy or self.policy()
        if policy.network.mode.value != "none" and proxy_port is None:
            proxy_port = UNUSED_PORT
        backend = SeatbeltPlanner(proxy_port=proxy_port)
        request = RunRequest(
            policy=policy,
            command=command,
            cwd=cwd or policy.project_dir,
            host_env={"HOME": str(self.home), "PATH": HOST_PATH, "LANG": "en_US.UTF-8"},
            locations=self.locations(),
            quiet=quiet,
        )
        self.capfd.readouterr()
        code = backend.run(backend.build(request))
        captured = self.capfd.readouterr()
        return Result(code=code, out=captured.out, err=captured.err)

    def sh(self, script: str, *args: str, **kwargs: object) -> Result:
        """`/bin/sh -c script sh args...`: paths travel as arguments, never inside the script."""
        return self.run(("/bin/sh", "-c", script, "sh", *args), **kwargs)  # type: ignore[arg-type]

    def python(self, code: str, *args: str, **kwargs: object) -> Result:
        return self.run((sys.executable, "-c", code, *args), **kwargs)  # type: ignore[arg-type]


class Listener:
    """A loopback TCP server that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 3).close(); print('connected')"
CONNECT_UNIX = "import socket, sys; s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(sys.argv[1]); print('connected')"
