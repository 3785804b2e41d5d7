"""Which Engine API calls the gate forwards, and what a container may ask for.

One table (ROUTES) of every endpoint the gate knows, checked against the
Docker Engine API version API_VERSION (podman's compatible API answers the
same); a call not in it is refused, so an endpoint a later engine adds is
refused until it is read and added here. The bodies the gate reads (a
container's create, an exec's create, a volume's create) are checked key by
key against tables of their own: a key not in them is refused, so a field a
later API adds that loosens isolation cannot slip through as unknown.

What a container may not have is what the sandbox itself may not do: no
privileges or added capabilities, no host namespaces, devices, sysctls or
other runtimes, no seccomp or AppArmor turned off, no host folders, no
volume another run made, and images only as the policy's `images` globs
allow. Its network is the sandbox's own where the engine can join it (podman:
the sandbox's network namespace, so what it sends meets the same filter and
audit, and the sandbox reaches its ports on its own loopback); elsewhere
(docker) it has none.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

API_VERSION = "1.41"  # the Engine API the tables were checked against (docker 20.10; podman 4's compatible API)

_ID = r"(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]{0,127})"
_VERSION = re.compile(r"^/v1\.(?P<minor>\d{1,3})(?=/)")
OLDEST_MINOR = 24  # API 1.23 and older let a start's body replace the container's whole HostConfig


@dataclass(frozen=True)
class Route:
    """An endpoint: `kind` says what the gate does with it (gate.py)."""

    method: str
    pattern: re.Pattern[str]
    kind: str  # "pass", "create", "container", "hijack", "list", "exec-create", "exec", "exec-hijack", "pull", "volume-create", "volume"


def _route(method: str, path: str, kind: str) -> Route:
    return Route(method, re.compile("^" + path.replace("{id}", _ID) + "$"), kind)


ROUTES = (
    _route("GET", "/_ping", "pass"),
    _route("HEAD", "/_ping", "pass"),
    _route("GET", "/version", "pass"),
    _route("GET", "/info", "pass"),
    _route("GET", "/images/json", "images"),
    _route("GET", "/images/(?P<image>.+)/json", "image"),
    _route("POST", "/images/create", "pull"),
    _route("POST", "/containers/create", "create"),
    _route("GET", "/containers/json", "list"),
    _route("GET", "/containers/{id}/json", "inspect"),
    _route("GET", "/containers/{id}/logs", "container"),
    _route("GET", "/containers/{id}/top", "container"),
    _route("GET", "/containers/{id}/stats", "container"),
    _route("GET", "/containers/{id}/changes", "container"),
    _route("POST", "/containers/{id}/start", "start"),
    _route("POST", "/containers/{id}/stop", "container"),
    _route("POST", "/containers/{id}/kill", "container"),
    _route("POST", "/containers/{id}/wait", "container"),
    _route("POST", "/containers/{id}/resize", "container"),
    _route("POST", "/containers/{id}/pause", "container"),
    _route("POST", "/containers/{id}/unpause", "container"),
    _route("DELETE", "/containers/{id}", "container"),
    _route("GET", "/containers/{id}/archive", "container"),
    _route("HEAD", "/containers/{id}/archive", "container"),
    _route("PUT", "/containers/{id}/archive", "copy-in"),
    _route("POST", "/containers/{id}/attach", "hijack"),
    _route("POST", "/containers/{id}/exec", "exec-create"),
    _route("POST", "/exec/{id}/start", "exec-hijack"),
    _route("POST", "/exec/{id}/resize", "exec"),
    _route("GET", "/exec/{id}/json", "exec"),
    _route("POST", "/volumes/create", "volume-create"),
    _route("GET", "/volumes/{id}", "volume"),
    _route("DELETE", "/volumes/{id}", "volume"),
)

# Where a call is refused for a reason of its own (not merely unknown), the line that says so.
REFUSED_BECAUSE = {
    "/build": "image builds are not forwarded yet (their context must be checked to lie inside the project)",
    "/networks": "networks are not forwarded: a container gets the sandbox's own network inside stockade (podman), or none",
    "/swarm": "swarm is never forwarded",
    "/plugins": "engine plugins are never forwarded (a plugin runs on the host with its privileges)",
    "/system": "engine-wide calls are never forwarded",
    "/commit": "commits are not forwarded",
    "/images/load": "image loads are not forwarded: pull an image the policy's images allow",
}


def route(method: str, target: str) -> tuple[Route, dict[str, str]] | None:
    """The route of a request line's method and path (query left out, version prefix dropped); none
    for an API version older than 1.24."""
    version = _VERSION.match(target)
    if version is not None and int(version["minor"]) < OLDEST_MINOR:
        return None
    path = _VERSION.sub("", target.split("?", 1)[0])
    for candidate in ROUTES:
        if candidate.method == method:
            match = candidate.pattern.match(path)
            if match:
                return candidate, match.groupdict()
    return None


def shown_path(target: str) -> str:
    """A call's path as a record keeps it: no query (it may carry a registry's auth), no version prefix."""
    return _VERSION.sub("", target.split("?", 1)[0])


def refusal_reason(method: str, target: str) -> str:
    version = _VERSION.match(target)
    if version is not None and int(version["minor"]) < OLDEST_MINOR:
        return f"Engine API 1.{version['minor']} is older than stockade forwards (1.{OLDEST_MINOR} and later)"
    path = _VERSION.sub("", target.split("?", 1)[0])
    for prefix, why in REFUSED_BECAUSE.items():
        if path == prefix or path.startswith(prefix + "/"):
            return why
    return f"{method} {path} is not an Engine API call stockade forwards (checked against API {API_VERSION})"


# -- images ---------------------------------------------------------------------------------------


IMAGE_ID = re.compile(r"^(sha256:)?[0-9a-f]{12,64}$")


def checked_image(reference: str) -> str:
    """A reference as the gate forwards it: whole, so the engine cannot read it otherwise (a short
    name against local images first, a registry spelled in capitals). Refused if it is not one."""
    bare = reference.split("@", 1)[0]
    tagged = ":" in bare.split("/")[-1]
    name = bare.rsplit(":", 1)[0] if tagged else bare
    if not reference or name != name.lower() or not _REFERENCE.match(reference):
        raise Refused(f"image {reference!r} is not a reference stockade takes (lower-case registry/name[:tag][@digest])")
    if tagged and "@" in reference:  # the engine finds a digest in any repository: the tag would only look checked
        raise Refused(f"image {reference!r} names both a tag and a digest: give one")
    return normal_image(reference)


_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}(@sha256:[0-9a-f]{64})?$")  # the name lower-case: checked apart


def normal_image(reference: str) -> str:
    """A reference as the registry names it: `busybox` is docker.io/library/busybox:latest."""
    name, digest = (reference.split("@", 1) + [""])[:2]
    first, _, rest = name.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        name = f"docker.io/{name}" if rest else f"docker.io/library/{name}"
    tagged = ":" in name.rsplit("/", 1)[-1]
    if digest:
        return f"{name}@{digest}"
    return name if tagged else f"{name}:latest"


def image_allowed(reference: str, patterns: tuple[str, ...]) -> bool:
    full = normal_image(reference)
    return any(fnmatch.fnmatchcase(full, pattern) or fnmatch.fnmatchcase(full, normal_image(pattern)) for pattern in patterns)


# -- bodies ---------------------------------------------------------------------------------------

# A key is fine when absent or null; `_DEFAULT` lists the values that mean "as the engine's default".
_DEFAULT: tuple[Any, ...] = (None, "", False, 0, [], {})

CREATE_KEYS = frozenset(
    {"Hostname", "Domainname", "User", "AttachStdin", "AttachStdout", "AttachStderr", "ExposedPorts", "Tty", "OpenStdin",
     "StdinOnce", "Env", "Cmd", "Healthcheck", "ArgsEscaped", "Image", "Volumes", "WorkingDir", "Entrypoint",
     "NetworkDisabled", "MacAddress", "OnBuild", "Labels", "StopSignal", "StopTimeout", "Shell", "HostConfig",
     "NetworkingConfig", "Platform"}
)  # fmt: skip

# HostConfig keys that hold nothing of the host's: resources, the container's own settings.
HOST_FREE = frozenset(
    {"AutoRemove", "ConsoleSize", "CapDrop", "Dns", "DnsOptions", "DnsSearch", "ExtraHosts",
     "ReadonlyRootfs", "ShmSize", "CpuShares", "Memory", "NanoCpus", "BlkioWeight", "CpuPeriod", "CpuQuota",
     "CpusetCpus", "CpusetMems", "KernelMemory", "KernelMemoryTCP", "MemoryReservation", "MemorySwap", "MemorySwappiness",
     "Init", "PidsLimit", "CpuCount", "CpuPercent", "IOMaximumIOps", "IOMaximumBandwidth", "CpuRealtimePeriod",
     "CpuRealtimeRuntime"}
)  # fmt: skip
# HostConfig keys allowed only at their defaults: each would reach the host or loosen the container.
HOST_DEFAULT_ONLY = {
    "Privileged": "privileged containers",
    "CapAdd": "added capabilities",
    "Devices": "host devices",
    "DeviceRequests": "host devices (GPUs)",
    "DeviceCgroupRules": "device rules",
    "Sysctls": "sysctls",
    "Runtime": "another OCI runtime",
    "CgroupParent": "a cgroup of the host's",
    "OomKillDisable": "turning the OOM killer off",
    "Annotations": "runtime annotations",
    "ContainerIDFile": "a container id file (podman makes it a runtime annotation; the CLI writes the file itself)",
    "StorageOpt": "storage options",
    "VolumeDriver": "volume drivers",
    "Links": "links (containers have no network)",
    "BlkioWeightDevice": "host block devices",
    "BlkioDeviceReadBps": "host block devices",
    "BlkioDeviceWriteBps": "host block devices",
    "BlkioDeviceReadIOps": "host block devices",
    "BlkioDeviceWriteIOps": "host block devices",
}
# HostConfig keys allowed only when absent (null): an empty value means "none of the engine's".
ABSENT_ONLY = {"MaskedPaths": "unmasking /proc paths", "ReadonlyPaths": "changing the read-only /proc paths"}
NAMESPACES = {"PidMode": "pid", "IpcMode": "ipc", "UTSMode": "uts", "UsernsMode": "user", "CgroupnsMode": "cgroup", "Cgroup": "cgroup"}
PRIVATE_NAMESPACE = frozenset({"", "private", "shareable"})
LOG_DRIVERS = frozenset({"", "json-file", "local", "k8s-file", "journald", "none"})
LOG_OPTIONS = frozenset({"max-size", "max-file", "compress", "mode", "max-buffer-size", "tag"})
SECURITY_OPTS = frozenset({"no-new-privileges", "no-new-privileges:true", "no-new-privileges=true"})
NETWORKS = frozenset({"", "none", "default", "bridge"})  # the last two are what the CLI sends unasked: made "none"

EXEC_KEYS = frozenset(
    {"Detach", "AttachStdin", "AttachStdout", "AttachStderr", "DetachKeys", "Tty", "Env", "Cmd", "Privileged", "User", "WorkingDir", "ConsoleSize"}
)
VOLUME_KEYS = frozenset({"Name", "Driver", "DriverOpts", "Labels", "ClusterVolumeSpec"})


# The nested objects the gate reads, each with the keys it may have, spelled exactly.
MOUNT_KEYS = frozenset({"Type", "Source", "Target", "ReadOnly", "Consistency", "VolumeOptions", "TmpfsOptions"})
CONSISTENCY = frozenset({"", "default", "consistent", "cached", "delegated"})
VOLUME_OPTION_KEYS = frozenset({"NoCopy", "Labels", "DriverConfig"})
TMPFS_OPTION_KEYS = frozenset({"SizeBytes", "Mode"})
LOG_KEYS = frozenset({"Type", "Config"})
RESTART_KEYS = frozenset({"Name", "MaximumRetryCount"})
ULIMIT_KEYS = frozenset({"Name", "Soft", "Hard"})
ULIMITS = {"nofile": 7, "nproc": 6, "core": 4, "stack": 3}  # RLIMIT_NOFILE, RLIMIT_NPROC, RLIMIT_CORE, RLIMIT_STACK on Linux
MIN_HEALTH_INTERVAL = 1_000_000_000  # nanoseconds: podman runs each check as a process of the engine's, on the host
HEALTH_KEYS = frozenset({"Test", "Interval", "Timeout", "Retries", "StartPeriod", "StartInterval"})
BIND_OPTIONS = frozenset({"ro", "rw", "z", "Z", "nocopy", "private", "rprivate"})
TMPFS_OPTIONS = frozenset({"size", "mode", "uid", "gid", "ro", "rw", "noexec", "exec", "nosuid", "nodev", "tmpcopyup", "notmpcopyup"})
_LABEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")  # podman joins labels as k=v: no = in a key
_ENV_ENTRY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*=", re.S)
VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_CONTAINER_PATH = re.compile(r'^/[^:,="\x00-\x1f]*$')  # podman joins a mount's fields with commas and =: none of those


class Refused(Exception):
    """A call the gate does not forward; the message is the one line the Docker CLI prints."""


def _set(value: Any) -> bool:
    return not any(value is default or (type(value) is type(default) and value == default) for default in _DEFAULT)


PUBLISHING = ("PortBindings", "PublishAllPorts")


def check_create(body: dict[str, Any], volume_known: Any, network: str = "none") -> dict[str, Any]:
    """The create body to forward, its network made `network` (the sandbox's namespace, or "none"), or
    Refused. `volume_known(name)` says whether a named volume is this run's own (True), absent (None:
    the engine makes it, and it is then this run's), or another's (False). A value of the wrong type is
    refused too. Published ports mean nothing in the sandbox's namespace (its loopback has them
    already): they are dropped there, and refused without a network."""
    try:
        return _check_create(body, volume_known, network)
    except (TypeError, AttributeError, ValueError) as error:
        raise Refused(f"a container field has a value of the wrong type ({error})") from None


def _check_create(body: dict[str, Any], volume_known: Any, network: str) -> dict[str, Any]:
    _no_case_twins(body)
    unknown = sorted(key for key in body if key not in CREATE_KEYS)
    if unknown:
        raise Refused(f"container field {unknown[0]} is not one stockade knows (API {API_VERSION}): refused")
    _check_networking(body.get("NetworkingConfig"))
    _check_shapes(body)
    host = body.get("HostConfig")
    if host is None:
        host = {}
    if not isinstance(host, dict):
        raise Refused("HostConfig must be an object")
    for key, value in host.items():
        if key in HOST_FREE:
            continue
        if key in ABSENT_ONLY:
            if value is not None:  # even empty: [] unmasks every path
                raise Refused(f"{ABSENT_ONLY[key]} ({key}) is not allowed for containers started inside stockade")
        elif key in HOST_DEFAULT_ONLY:
            if _set(value):
                raise Refused(f"{HOST_DEFAULT_ONLY[key]} ({key}) are not allowed for containers started inside stockade")
        elif key in NAMESPACES:
            if value not in PRIVATE_NAMESPACE:
                raise Refused(f"{key} {value!r}: a container shares no {NAMESPACES[key]} namespace with the host or another container")
        elif key in PUBLISHING:
            if _set(value) and network == "none":
                raise Refused(f"published ports ({key}): containers have no network with this engine inside stockade (podman's share the sandbox's)")
        elif key == "NetworkMode":
            if value not in NETWORKS:
                raise Refused(f"NetworkMode {value!r}: a container gets the sandbox's own network inside stockade (podman), or none")
        elif key == "SecurityOpt":
            extra = [option for option in value or () if option not in SECURITY_OPTS]
            if extra:
                raise Refused(f"security option {extra[0]!r} is not allowed (only no-new-privileges)")
        elif key == "LogConfig":
            _check_log(value)
        elif key == "Binds":
            for bind in value or ():
                _check_bind(str(bind), volume_known)
        elif key == "Mounts":
            for mount in value or ():
                _check_mount(mount, volume_known)
        elif key == "VolumesFrom":
            if _set(value):
                raise Refused("VolumesFrom is not allowed: give the container a volume of this run's")
        elif key == "Isolation":
            if value not in ("", "default", None):
                raise Refused(f"Isolation {value!r} is not allowed")
        elif key in HOST_SHAPES:
            HOST_SHAPES[key](value)
        else:
            raise Refused(f"HostConfig field {key} is not one stockade knows (API {API_VERSION}): refused")
    labels = body.get("Labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(key, str) and isinstance(value, str) for key, value in labels.items()):
        raise Refused("Labels must be an object of strings")
    forwarded = dict(body)
    forwarded["HostConfig"] = {**{key: value for key, value in host.items() if key not in PUBLISHING}, "NetworkMode": network}
    forwarded["NetworkingConfig"] = None
    return forwarded


def _check_networking(value: Any) -> None:
    """Only the endpoints the CLI names unasked (the default network, made "none" here)."""
    if not _set(value):
        return
    endpoints = value.get("EndpointsConfig") if isinstance(value, dict) else value
    others = sorted(name for name in endpoints or {} if name not in NETWORKS) if isinstance(endpoints, dict) else ["?"]
    if others:
        raise Refused(f"network {others[0]!r}: a container gets the sandbox's own network inside stockade (podman), or none")


def _no_case_twins(value: Any, depth: int = 0) -> None:
    """The engine reads JSON keys regardless of case, the last one winning: two keys of one object
    that differ only in case would let one be checked here and the other used there."""
    if depth > 32:
        raise Refused("the body is nested too deep")
    if isinstance(value, dict):
        folded = [str(key).casefold() for key in value]
        if len(set(folded)) != len(folded):
            raise Refused("two keys of one object differ only in case: refused (the engine would read either)")
        for item in value.values():
            _no_case_twins(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _no_case_twins(item, depth + 1)


def _exact(value: Any, keys: frozenset[str], what: str) -> dict[str, Any]:
    """An object with only `keys`, spelled exactly (any other spelling would reach the engine unchecked)."""
    if not isinstance(value, dict):
        raise Refused(f"{what} must be an object")
    unknown = sorted(key for key in value if key not in keys)
    if unknown:
        raise Refused(f"{what} field {unknown[0]!r} is not one stockade knows (API {API_VERSION}): refused")
    return value


def _empty_objects(value: Any, what: str, paths: bool = False) -> None:
    """ExposedPorts and Volumes: names (container paths, for Volumes) to empty objects."""
    if value is None:
        return
    if not isinstance(value, dict) or any(item not in (None, {}) for item in value.values()):
        raise Refused(f"{what} must map names to empty objects")
    if paths and any(not _CONTAINER_PATH.match(str(key)) for key in value):
        raise Refused(f"{what} names container paths only (no host path, no options): refused")


SYSTEMD_WORDS = ("init", "systemd")  # podman runs a command so named in systemd mode: the host's cgroup tree, writable (cgroup v1)
MAX_STOP_TIMEOUT = 10  # seconds a stop may wait: the run's end removes its containers with no longer wait


def systemd_mode(words: Any) -> bool:
    """Whether podman would take a command for systemd (and mount the host's cgroup tree into it)."""
    if not isinstance(words, list):
        return False
    for word in words:
        for part in str(word).replace(";", " ").replace("&", " ").replace("|", " ").split():
            name = part.rsplit("/", 1)[-1]
            if name in SYSTEMD_WORDS or name.endswith("systemd"):
                return True
    return False


def _check_shapes(body: dict[str, Any]) -> None:
    if _set(body.get("WorkingDir")):
        # podman makes a container's working folder on the host side at each start, following links in
        # its root (an image's /var/run -> /run too): the image's own WORKDIR only, and `cd` in the command
        raise Refused("WorkingDir is not allowed for containers started inside stockade: use the image's, or cd in the command")
    timeout = body.get("StopTimeout")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 <= timeout <= MAX_STOP_TIMEOUT):
        raise Refused(f"StopTimeout above {MAX_STOP_TIMEOUT} s is not allowed (the run's end removes its containers)")
    if systemd_mode(body.get("Entrypoint")) or systemd_mode(body.get("Cmd")):
        raise Refused("a command named init or systemd runs in podman's systemd mode (the host's cgroup tree inside): refused")
    for key in body.get("Labels") or {}:
        if not _LABEL_KEY.match(str(key)) or str(key).startswith(("io.stockade.", "io.containers.", "io.podman.")):
            raise Refused(f"label {str(key)[:60]!r} is not allowed (plain names; none of stockade's or the engine's own)")
    _empty_objects(body.get("ExposedPorts"), "ExposedPorts")
    _empty_objects(body.get("Volumes"), "Volumes", paths=True)  # podman reads a key "HOST:CONTAINER" as a bind
    if _set(body.get("Healthcheck")):
        health = _exact(body["Healthcheck"], HEALTH_KEYS, "Healthcheck")
        for key in ("Interval", "StartInterval", "Timeout", "StartPeriod"):
            value = health.get(key) or 0
            if not isinstance(value, int) or isinstance(value, bool) or (value and value < MIN_HEALTH_INTERVAL and key != "StartPeriod"):
                raise Refused(f"Healthcheck {key} below 1 s is not allowed (each check is a process the engine starts)")
    for entry in body.get("Env") or ():
        if not isinstance(entry, str) or not _ENV_ENTRY.match(entry):
            raise Refused(f"Env entry {str(entry)[:60]!r} is not NAME=value (a bare or wildcard name copies the engine's own variables)")
    for key in ("Env", "Cmd", "Entrypoint", "Shell", "OnBuild"):
        value = body.get(key)
        words = [value] if isinstance(value, str) and key in ("Cmd", "Entrypoint") else value
        if words is not None and not (isinstance(words, list) and all(isinstance(item, str) for item in words)):
            raise Refused(f"{key} must be a list of strings")


def _check_restart(value: Any) -> None:
    """No policy but "no": each start resolves the container's working folder on the host side again."""
    if _set(value):
        _exact(value, RESTART_KEYS, "RestartPolicy")
        if (value.get("Name") or "no") != "no":
            raise Refused("restart policies are not allowed: a container starts once inside stockade")


def _check_ulimits(value: Any) -> None:
    """Only limits a process may set for itself, up to this process's own: the engine (root) would raise
    real-time priority, nice or locked memory past what the sandbox may."""
    import resource

    for item in value or ():
        _exact(item, ULIMIT_KEYS, "a ulimit")
        name = item.get("Name")
        if name not in ULIMITS:
            raise Refused(f"ulimit {str(name)[:40]!r} is not allowed (only {', '.join(sorted(ULIMITS))})")
        ceiling = resource.getrlimit(ULIMITS[name])[1]
        for key in ("Soft", "Hard"):
            limit = item.get(key)
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0 or (ceiling != resource.RLIM_INFINITY and limit > ceiling):
                raise Refused(f"ulimit {name} {key} {limit!r} is past this run's own limit")


def _check_tmpfs(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or not all(isinstance(key, str) and isinstance(item, str) for key, item in value.items()):
        raise Refused("Tmpfs must map container paths to option strings")
    for path, options in value.items():
        if not _CONTAINER_PATH.match(path) or any(option.split("=", 1)[0] not in TMPFS_OPTIONS for option in options.split(",") if option):
            raise Refused(f"tmpfs {path!r} with {options!r}: only size, mode, uid, gid and the no*/ro/rw flags are allowed")


def _check_groups(value: Any) -> None:
    for group in value or ():
        if not isinstance(group, str | int) or str(group) in ("keep-groups",) or "," in str(group):
            raise Refused(f"GroupAdd {group!r} is not allowed (only a group inside the container)")


def _check_oom(value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise Refused("OomScoreAdj below 0 is not allowed (it would make the host's processes die first)")


HOST_SHAPES = {
    "RestartPolicy": _check_restart, "Ulimits": _check_ulimits, "Tmpfs": _check_tmpfs, "GroupAdd": _check_groups, "OomScoreAdj": _check_oom,
}  # fmt: skip


def _check_log(value: Any) -> None:
    if not _set(value):
        return
    _exact(value, LOG_KEYS, "LogConfig")
    driver = value.get("Type") or ""
    if driver not in LOG_DRIVERS:
        raise Refused(f"log driver {driver!r} is not allowed (it could send the container's output elsewhere)")
    options = value.get("Config") or {}
    extra = sorted(key for key in options if key not in LOG_OPTIONS) if isinstance(options, dict) else ["Config"]
    if extra:
        raise Refused(f"log option {extra[0]!r} is not allowed")


def _check_bind(bind: str, volume_known: Any) -> None:
    parts = bind.split(":")
    source = parts[0]
    if source.startswith(("/", ".", "~")) or "/" in source:
        raise Refused(f"bind mount of the host's {source} is not allowed: give the container a volume of this run's, or `docker cp`")
    if len(parts) not in (2, 3) or not _CONTAINER_PATH.match(parts[1]):
        raise Refused(f"volume {bind!r}: NAME:/container/path[:options] only")
    options = [option for option in (parts[2].split(",") if len(parts) == 3 else ()) if option]
    if any(option not in BIND_OPTIONS for option in options):
        raise Refused(
            f"volume option in {bind!r} is not allowed (only {', '.join(sorted(BIND_OPTIONS))}): overlay and idmap options reach host folders"
        )
    _check_volume(source, volume_known)


def _check_mount(mount: Any, volume_known: Any) -> None:
    mount = _exact(mount, MOUNT_KEYS, "a mount")
    kind = mount.get("Type")
    if kind not in ("volume", "tmpfs") and kind not in ("bind", "npipe", "cluster", "image"):
        raise Refused("a mount needs its Type: volume or tmpfs")
    if not _CONTAINER_PATH.match(str(mount.get("Target") or "")):
        raise Refused("a mount needs an absolute container Target without , = or quotes")
    if (mount.get("Consistency") or "") not in CONSISTENCY:
        raise Refused(f"mount consistency {mount.get('Consistency')!r} is not one of {', '.join(sorted(CONSISTENCY - {''}))}")
    if kind == "tmpfs":
        if _set(mount.get("Source")) or _set(mount.get("VolumeOptions")):
            raise Refused("a tmpfs mount has no source")
        if _set(mount.get("TmpfsOptions")):
            _exact(mount["TmpfsOptions"], TMPFS_OPTION_KEYS, "TmpfsOptions")
        return
    if kind != "volume":
        raise Refused(f"{kind} mounts are not allowed: give the container a volume of this run's, or `docker cp`")
    if _set(mount.get("TmpfsOptions")):
        raise Refused("a volume mount has no tmpfs options")
    if _set(mount.get("VolumeOptions")):
        options = _exact(mount["VolumeOptions"], VOLUME_OPTION_KEYS, "VolumeOptions")
        if _set(options.get("DriverConfig")) or _set(options.get("Labels")):
            raise Refused("volume driver options and labels are not allowed in a mount (the local driver's can mount a host folder)")
    if mount.get("Source"):
        _check_volume(str(mount["Source"]), volume_known)


def _check_volume(name: str, volume_known: Any) -> None:
    if not VOLUME_NAME.match(name):
        raise Refused(f"volume name {name!r} is not one stockade takes (letters, digits, _ . -)")
    if volume_known(name) is False:
        raise Refused(f"volume {name} is not one this run made")


def check_exec(body: dict[str, Any]) -> None:
    try:
        _check_exec(body)
    except (TypeError, AttributeError, ValueError) as error:
        raise Refused(f"an exec field has a value of the wrong type ({error})") from None


def _check_exec(body: dict[str, Any]) -> None:
    _no_case_twins(body)
    unknown = sorted(key for key in body if key not in EXEC_KEYS)
    if unknown:
        raise Refused(f"exec field {unknown[0]} is not one stockade knows (API {API_VERSION}): refused")
    if body.get("Privileged") not in (None, False):
        raise Refused("privileged exec is not allowed")


EXEC_START_KEYS = frozenset({"Detach", "Tty", "ConsoleSize"})


def checked_exec_start(body: dict[str, Any]) -> dict[str, Any]:
    """An exec start's body, rebuilt from the keys it may have."""
    _no_case_twins(body)
    _exact(body, EXEC_START_KEYS, "exec start")
    if not all(isinstance(body.get(key, False), bool) for key in ("Detach", "Tty")):
        raise Refused("exec start's Detach and Tty are true or false")
    return {key: body[key] for key in EXEC_START_KEYS if key in body}


def check_volume(body: dict[str, Any]) -> None:
    _no_case_twins(body)
    if not VOLUME_NAME.match(str(body.get("Name") or "anonymous")):
        raise Refused("volume name is not one stockade takes (letters, digits, _ . -)")
    labels = body.get("Labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(key, str) and isinstance(value, str) for key, value in labels.items()):
        raise Refused("Labels must be an object of strings")
    for key in labels:
        if not _LABEL_KEY.match(key) or key.startswith(("io.stockade.", "io.containers.", "io.podman.")):
            raise Refused(f"label {key[:60]!r} is not allowed (plain names; none of stockade's or the engine's own)")
    if not isinstance(body.get("Name") or "", str):
        raise Refused("Name must be a string")
    unknown = sorted(key for key in body if key not in VOLUME_KEYS)
    if unknown:
        raise Refused(f"volume field {unknown[0]} is not one stockade knows (API {API_VERSION}): refused")
    if (body.get("Driver") or "local") != "local" or _set(body.get("DriverOpts")) or _set(body.get("ClusterVolumeSpec")):
        raise Refused("only plain local volumes are allowed (driver options can mount a host folder)")
