"""A run's container engine API (containers/gate.py): started before bwrap, bound at /run/docker.sock
inside, closed (and what the run made removed) after the command ended."""

from __future__ import annotations

import os
import threading

from stockade.bwrap.parts import args as bw
from stockade.containers import engines
from stockade.containers.gate import INSIDE, Gate, sweep
from stockade.core.locations import runtime_folder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.proxy.audit import AuditWriter


class RunGate:
    """The gate, its folder and the lock that says the run is alive; each call it judges is an audit
    record of the run (kind "container"), sent on to the run's collector when the run ends."""

    def __init__(self, settings: tuple[str, str, list[str], bool], audit: tuple[str, str], run: dict[str, object]) -> None:
        """`run`: what each record says of the run (findings_log.run_fields), its session among them."""
        engine, configured, images, keep = settings
        session = str(run["session"])
        self.log, self.collector = audit
        self.who = run
        self.lines: list[bytes] = []
        self.trouble = ""
        self._writer: AuditWriter | None = None
        self._writing = threading.Lock()
        self.runtime = runtime_folder(os.environ)
        self.folder = engines.gate_folder(self.runtime, session)
        self.engine = engines.engine_socket(str(engine), str(configured) or None, os.environ)
        self.lock = engines.hold(self.folder)
        listen = os.path.join(self.folder, engines.SOCKET)
        self.gate = Gate(self.engine, listen, session, tuple(str(image) for image in images), bool(keep), str(engine))
        if self.log:
            self.gate.audit = self._record
        self.note = "" if os.path.exists(self.engine) else (
            f"[containers] engine = \"{engine}\": no engine listens at {self.engine}; container calls fail until it runs "
            "(systemctl start docker, or podman system service), or set [containers] socket"
        )  # fmt: skip
        self._sweep_leftovers()
        self.gate.start()
        self.pieces: list[bw.Piece] = [
            bw.BindFrom(listen, INSIDE),
            bw.SetEnv("DOCKER_HOST", f"unix://{INSIDE}"),
            bw.SetEnv("CONTAINER_HOST", f"unix://{INSIDE}"),
            bw.SetEnv("TESTCONTAINERS_RYUK_DISABLED", "true"),  # its reaper needs the engine's socket: stockade removes what a run made
            # a container's ports are on the sandbox's own loopback (podman), whatever a test library guesses
            # from the machine (a /.dockerenv it sees would send it to a bridge's gateway)
            bw.SetEnv("TESTCONTAINERS_HOST_OVERRIDE", "localhost"),
            bw.SetEnv("TESTCONTAINERS_CONNECTION_MODE", "docker_host"),
        ]

    def _sweep_leftovers(self) -> None:
        """What runs killed before their end left (their lock is free): removed, their folders too."""
        if not self.note:
            sweep(self.engine, lambda other: not engines.gone(self.runtime, other))
        gates = os.path.join(self.runtime, engines.GATES)
        for other in os.listdir(gates) if os.path.isdir(gates) else ():
            folder = engines.gate_folder(self.runtime, other)
            if folder != self.folder and not engines.alive(self.runtime, other):
                engines.remove_folder(folder)

    def _record(self, decision: str, call: str, rule: str, image: str) -> None:
        """One judged call in the run's audit log (from the gate's threads: one at a time)."""
        from stockade.proxy.audit import AuditError, AuditWriter, FindingRecord

        record = FindingRecord(kind="container", decision=decision, operation=call, rule=rule, path=image or None, **self.who)  # type: ignore[arg-type]
        with self._writing:
            try:
                if self._writer is None:
                    self._writer = AuditWriter(self.log)
                    self._writer.tee = self.lines.append
                self._writer.write(record)
            except AuditError as error:
                self.trouble = self.trouble or f"container calls are not in the audit log: {error}"

    def close(self) -> list[str]:
        lines = self.gate.close()
        with self._writing:
            if self._writer is not None:
                self._writer.close()
        if self.trouble:
            lines.append(self.trouble)
        if self.collector and self.lines:
            from stockade.bwrap.after.findings_log import export

            sent = export(self.log, self.collector, self.lines)
            if sent:
                lines.append(sent)
        os.close(self.lock)
        engines.remove_folder(self.folder)  # the gate removed its socket
        return lines
