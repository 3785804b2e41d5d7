"""The keys a policy file may contain, with their kinds: the language's grammar as data."""

from __future__ import annotations

from enum import Enum


class Kind(str, Enum):
    NAMES = "list of profile names or paths"
    PATHS = "list of paths"
    GLOB_PATHS = "list of paths or globs"
    HOST_RULES = "list of host rules"
    MODE = '"none", "allowlist" or "open"'
    HOME = '"private" or "host"'
    ACCEPT = '"review" or "unmarked"'
    GPU_NUMBERS = 'list of GPU numbers such as "0"'
    ENGINE = '"none", "docker" or "podman"'
    IMAGES = 'list of image references or globs such as "docker.io/library/*"'
    ENV_GLOBS = "list of variable-name globs"
    ENV_NAMES = "list of variable names"
    ENV_TABLE = 'table of NAME = "value"'
    SIZE = 'size such as "4G"'
    DURATION = 'duration such as "30m"'
    COUNT = "positive integer"
    PATH = "path"
    URL = 'URL such as "http://collector:4318"'
    BOOL = "true or false"
    HTTP_TABLES = 'table of "HOST" = { allow = [...], deny = [...] } HTTP rules'


TABLES: dict[str, dict[str, Kind]] = {
    "": {"extends": Kind.NAMES},
    "filesystem": {
        "deny_read": Kind.GLOB_PATHS,
        "allow_write": Kind.PATHS,
        "deny_write": Kind.GLOB_PATHS,
        "home": Kind.HOME,
        "allow_read": Kind.PATHS,
        "tool_config": Kind.BOOL,
    },
    "network": {
        "mode": Kind.MODE,
        "allow": Kind.HOST_RULES,
        "deny": Kind.HOST_RULES,
        "unix_sockets": Kind.PATHS,
        "unix_datagram": Kind.BOOL,
        "http": Kind.HTTP_TABLES,  # [network.http."HOST"]: profiles/httprules.py
    },
    "env": {"deny": Kind.ENV_GLOBS, "set": Kind.ENV_TABLE, "pass": Kind.ENV_NAMES},
    "limits": {
        "memory": Kind.SIZE,
        "pids": Kind.COUNT,
        "wall_time": Kind.DURATION,
        "file_size": Kind.SIZE,
        "tmp_size": Kind.SIZE,
    },
    "audit": {"log": Kind.PATH, "otlp": Kind.URL},
    "devices": {"gpu": Kind.BOOL, "gpus": Kind.GPU_NUMBERS},
    "containers": {"engine": Kind.ENGINE, "images": Kind.IMAGES, "keep": Kind.BOOL, "socket": Kind.PATH},
    "checkpoints": {"enabled": Kind.BOOL, "max_size": Kind.SIZE, "max_age": Kind.DURATION, "stage": Kind.BOOL, "accept": Kind.ACCEPT},
}

LIST_KINDS = frozenset({Kind.NAMES, Kind.PATHS, Kind.GLOB_PATHS, Kind.HOST_RULES, Kind.ENV_GLOBS, Kind.ENV_NAMES, Kind.GPU_NUMBERS, Kind.IMAGES})
