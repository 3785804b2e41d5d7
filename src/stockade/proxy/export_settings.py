"""Where a run's audit records are also sent: an OTLP/HTTP collector, with the user's own OTEL settings.

The policy names the collector (`[audit] otlp`); the standard OpenTelemetry
variables of the environment `stockade run` was started from say how to reach
it: `OTEL_EXPORTER_OTLP_LOGS_HEADERS` (else `OTEL_EXPORTER_OTLP_HEADERS`,
"key=value,..." with URL-encoded values), `..._TIMEOUT` (seconds),
`..._COMPRESSION` ("gzip" or "none"), `..._CERTIFICATE`,
`..._CLIENT_KEY` and `..._CLIENT_CERTIFICATE`. They are read here, on the
host, and handed to the daemon with the run's session: the daemon, shared by
every run, reads no OTEL variable of its own, and the sandbox's environment is
never consulted. Small and stdlib-only: this is on the path of every networked
run that exports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

LOGS_PATH = "/v1/logs"
DEFAULT_TIMEOUT = 10.0
MAX_HEADERS = 32


@dataclass(frozen=True)
class ExportSettings:
    """One collector and how to reach it; compared by value (the daemon keeps one exporter per settings)."""

    endpoint: str  # the full logs URL: the policy's base URL and /v1/logs
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # never in a repr: they are tokens
    timeout: float = DEFAULT_TIMEOUT
    compression: str = "gzip"
    certificate: str = ""
    client_key: str = ""
    client_certificate: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "headers": [list(pair) for pair in self.headers]}

    @classmethod
    def from_dict(cls, data: object) -> ExportSettings:
        """Validate settings that came over the control socket; ValueError says which field is wrong."""
        if not isinstance(data, dict):
            raise ValueError("spec.export must be an object")
        endpoint = data.get("endpoint")
        if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
            raise ValueError("spec.export.endpoint must be an http(s) URL")
        headers = data.get("headers", [])
        if not isinstance(headers, list) or len(headers) > MAX_HEADERS or not all(_pair(item) for item in headers):
            raise ValueError("spec.export.headers must be a list of [name, value] strings")
        timeout = data.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 60:
            raise ValueError("spec.export.timeout must be a number of seconds (up to 60)")
        if data.get("compression", "gzip") not in ("gzip", "none"):
            raise ValueError('spec.export.compression must be "gzip" or "none"')
        files = {name: data.get(name, "") for name in ("certificate", "client_key", "client_certificate")}
        if not all(isinstance(value, str) for value in files.values()):
            raise ValueError("spec.export certificate files must be strings")
        return cls(endpoint, tuple((str(k), str(v)) for k, v in headers), float(timeout), str(data.get("compression", "gzip")), **files)


def _pair(item: object) -> bool:
    return isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item)


def settings_for(base_url: str, env: Mapping[str, str]) -> ExportSettings:
    """The policy's collector with the user's own OTEL variables (the logs-specific one first)."""

    def variable(name: str) -> str:
        return env.get(f"OTEL_EXPORTER_OTLP_LOGS_{name}") or env.get(f"OTEL_EXPORTER_OTLP_{name}") or ""

    timeout = DEFAULT_TIMEOUT
    try:
        given = float(variable("TIMEOUT") or DEFAULT_TIMEOUT)
        timeout = min(60.0, given / 1000 if given > 60 else given) if given > 0 else DEFAULT_TIMEOUT  # milliseconds by the spec; seconds by habit
    except ValueError:
        pass
    compression = "none" if variable("COMPRESSION").strip().lower() == "none" else "gzip"
    base = base_url.rstrip("/")
    return ExportSettings(
        base if base.endswith(LOGS_PATH) else base + LOGS_PATH,  # the base URL, or the logs URL written in full
        parse_headers(variable("HEADERS")),
        timeout,
        compression,
        *(os.path.expanduser(variable(name)) if variable(name) else "" for name in ("CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE")),
    )


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """`key1=value1,key2=value2` (values URL-encoded), as the OpenTelemetry specification writes them;
    an entry without `=` is skipped."""
    from urllib.parse import unquote

    found: list[tuple[str, str]] = []
    for entry in text.split(","):
        name, sep, value = entry.partition("=")
        if sep and name.strip():
            found.append((name.strip().lower(), unquote(value.strip())))
    return tuple(found[:MAX_HEADERS])
