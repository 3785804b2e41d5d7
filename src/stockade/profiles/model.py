"""The validated, merged policy as frozen dataclasses.

A `Policy` is what every backend consumes: absolute paths, canonical domain
rules, numbers in bytes and seconds. Nothing here touches the filesystem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from stockade.profiles.credentials import Credential


class NetworkMode(str, Enum):
    NONE = "none"
    ALLOWLIST = "allowlist"
    OPEN = "open"

    @property
    def rank(self) -> int:
        """Order by how much each mode lets through, for narrowing."""
        return {"none": 0, "allowlist": 1, "open": 2}[self.value]


HOME_MODES = ("private", "host")
ACCEPT_MODES = ("review", "unmarked")


@dataclass(frozen=True)
class FilesystemRules:
    deny_read: tuple[str, ...] = ()  # absolute paths or absolute globs ("/p/**/.env")
    allow_write: tuple[str, ...] = ()  # absolute paths
    deny_write: tuple[str, ...] = ()  # absolute paths or globs, carve-outs
    home: str = "private"  # "private": a fresh home showing only allow_read; "host": the real home, read-only
    allow_read: tuple[str, ...] = ()  # absolute paths of the real home a private home shows, read-only
    tool_config: bool = True  # the user's tool configuration shown without its secrets (profiles/toolconfig.py)


@dataclass(frozen=True)
class NetworkRules:
    mode: NetworkMode = NetworkMode.NONE
    allow: tuple[str, ...] = ()  # canonical rules: "host", "*.suffix", "host:port", IPs, CIDRs
    deny: tuple[str, ...] = ()
    unix_sockets: tuple[str, ...] = ()  # absolute socket paths (or folders of them) the sandbox may connect to
    unix_datagram: bool = False  # AF_UNIX datagram sockets (syslog's /dev/log): can sendto() any socket by path
    # [network.http."HOST"]: (host rule, allow rules, deny rules), canonical (profiles/httprules.py), sorted by host.
    # Such a host's TLS is terminated by the daemon so each request can be judged (it must still be allowed).
    http: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    # push = [...] of those tables: (host rule, ref patterns), canonical (profiles/gitrefs.py), sorted by host; a
    # `git-receive-pack` request to a host with HTTP rules is refused unless its tables' patterns cover every ref.
    push: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The widest allow list a host approved while the command waits may come under (proxy/filter/approvals.py):
    # the administrator's baseline's (profiles/baseline.py); None where nothing bounds the approvals.
    ceiling: tuple[str, ...] | None = None


@dataclass(frozen=True)
class EnvRules:
    deny: tuple[str, ...] = ()  # glob patterns of names never passed in
    set: tuple[tuple[str, str], ...] = ()  # (name, value), sorted by name
    passthrough: tuple[str, ...] = ()  # names passed even if a deny glob matches (TOML key "pass")


@dataclass(frozen=True)
class Limits:
    memory: int | None = None  # bytes
    pids: int | None = None
    wall_time: float | None = None  # seconds
    file_size: int | None = None  # bytes, RLIMIT_FSIZE
    tmp_size: int | None = None  # bytes, size of the private /tmp and /dev/shm


@dataclass(frozen=True)
class CheckpointRules:
    """What `stockade undo` can reach back to: every run's changes are kept, within these bounds."""

    enabled: bool = True
    max_size: int = 2 * 1024**3  # bytes, all of the project's checkpoints together
    max_age: float = 7 * 24 * 3600.0  # seconds
    # the project's changes land in a stage of their own, applied by `stockade accept` (stages/)
    stage: bool = False
    # after a staged run: "review" keeps every change for `stockade review`; "unmarked" applies at once
    # all but the marked ones (files that run code later, deny_write matches), which wait for review
    accept: str = "review"


@dataclass(frozen=True)
class DeviceRules:
    """Host devices the sandbox gets beyond /dev's basics (bwrap/parts/devices.py)."""

    gpu: bool = False  # the NVIDIA device nodes and the render nodes the host has, and nothing else of /dev
    gpus: tuple[str, ...] = ()  # only these GPUs (nvidia-smi's numbers); empty: every one


ENGINES = ("none", "docker", "podman")


@dataclass(frozen=True)
class ContainerRules:
    """A container engine's API inside the sandbox, through a gate that forwards only what keeps
    the engine's containers inside the sandbox's own bounds (containers/gate.py)."""

    engine: str = "none"  # one of ENGINES
    images: tuple[str, ...] = ()  # image references the sandbox may pull and run; globs ("docker.io/library/*")
    keep: bool = False  # leave the containers and volumes the run created when it ends
    socket: str | None = None  # the host engine's socket; None: the engine's usual one (containers/engines.py)


@dataclass(frozen=True)
class AuditRules:
    log: str | None = None  # absolute path of the JSON-lines audit log
    otlp: str | None = None  # an OpenTelemetry collector's OTLP/HTTP base URL every record is also sent to (proxy/daemon/otlp.py)


@dataclass(frozen=True)
class Policy:
    """The effective policy for one run, after extends, merge and trust."""

    filesystem: FilesystemRules = field(default_factory=FilesystemRules)
    network: NetworkRules = field(default_factory=NetworkRules)
    env: EnvRules = field(default_factory=EnvRules)
    limits: Limits = field(default_factory=Limits)
    audit: AuditRules = field(default_factory=AuditRules)
    checkpoints: CheckpointRules = field(default_factory=CheckpointRules)
    devices: DeviceRules = field(default_factory=DeviceRules)
    containers: ContainerRules = field(default_factory=ContainerRules)
    credentials: tuple[Credential, ...] = ()  # [credentials.NAME], sorted by name: swapped in by the proxy (proxy/filter/placeholders.py)
    project_dir: Path = Path("/")  # where "." of built-in profiles points, and the run's default cwd
    origin: str = "<built-in default>"  # file (or built-in name) a user edits to change this policy
    sources: tuple[str, ...] = ()  # every file or built-in that contributed, in load order
    protected_files: tuple[str, ...] = ()  # policy files read for this run: always read-only inside

    @property
    def terminated_hosts(self) -> tuple[str, ...]:
        """Hosts whose TLS the daemon terminates: those with HTTP rules, and those credentials go to.
        The sandbox then trusts stockade's CA (proxy/client/cabundle.py)."""
        hosts = [host for host, _allow, _deny in self.network.http] + [host for c in self.credentials for host in c.hosts]
        return tuple(dict.fromkeys(hosts))
