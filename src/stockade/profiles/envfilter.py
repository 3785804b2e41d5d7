"""Which environment variables reach the sandbox: never the well-known secrets."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from stockade.core.proxy_env import NO_PROXY_VARIABLES, URL_VARIABLES
from stockade.profiles.model import EnvRules

# Credentials and handles to host services (agents, buses, terminals, CI runners).
SECRET_ENV: tuple[str, ...] = (
    "*_TOKEN",
    "*_TOKEN_*",
    "*TOKEN",
    "*_SECRET*",
    "*SECRET",
    "*PASSWORD*",
    "*PASSWD*",
    "*_PWD",
    "*AUTHTOKEN*",
    "*AUTH_TOKEN*",
    "*_API_KEY",
    "*_APIKEY",
    "*_ACCESS_KEY*",
    "*_PRIVATE_KEY*",
    "*CREDENTIAL*",
    "*_AUTH",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GCLOUD_*",
    "DIGITALOCEAN_*",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_*TOKEN*",
    "CI_JOB_TOKEN",
    "CI_JOB_JWT*",
    "CI_REPOSITORY_URL",
    "ACTIONS_*",
    "SYSTEM_ACCESSTOKEN",
    "NPM_TOKEN",
    "NODE_AUTH_TOKEN",
    "PYPI_*",
    "TWINE_*",
    "CARGO_REGISTRY_TOKEN",
    "DOCKER_AUTH_CONFIG",
    "VAULT_*",
    "OTEL_EXPORTER_OTLP*HEADERS",  # a collector's token ("Authorization=Bearer ..."): stockade's export reads it on the host
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "HF_TOKEN",
    "KUBECONFIG",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GNUPGHOME",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "VSCODE_*",
    "TERM_SESSION_ID",
    "KITTY_LISTEN_ON",
    "WEZTERM_UNIX_SOCKET",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
)

# Names a secret pattern above catches that hold no secret and that tools need to work: paths
# to CA bundles (a company's TLS-inspecting proxy) and which region or profile to use.
NOT_SECRET_ENV: frozenset[str] = frozenset({"AWS_CA_BUNDLE", "AWS_REGION", "AWS_DEFAULT_REGION"})

# Variables that make the dynamic loader or a shell run code; an untrusted
# policy may not set them (profiles/narrow.py).
LOADER_ENV: tuple[str, ...] = (
    "LD_*",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "MALLOC_*",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "GIT_*",
)

# Set by stockade itself inside the sandbox; a policy cannot set or pass them.
RESERVED_ENV: tuple[str, ...] = (*URL_VARIABLES, *NO_PROXY_VARIABLES, "STOCKADE_*")


@lru_cache(maxsize=32)
def _matcher(patterns: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Patterns sorted by shape: exact, PREFIX*, *SUFFIX, *INFIX*, and anything else (fnmatch).

    On the hot path every host variable is checked against ~80 patterns;
    string methods do that in microseconds where fnmatch needs milliseconds.
    """
    exact, prefix, suffix, infix, other = set(), [], [], [], []
    for p in (pattern.upper() for pattern in patterns):
        body = p.strip("*")
        if "*" in body or "?" in body or "[" in body:
            other.append(p)
        elif p.startswith("*") and p.endswith("*") and len(p) > 1:
            infix.append(body)
        elif p.endswith("*"):
            prefix.append(body)
        elif p.startswith("*"):
            suffix.append(body)
        else:
            exact.add(p)
    return frozenset(exact), tuple(prefix), tuple(suffix), tuple(infix), tuple(other)


def matches(name: str, patterns: tuple[str, ...]) -> bool:
    """Case-insensitive: `github_token` and `npm_config__authToken` are secrets too."""
    name = name.upper()
    exact, prefix, suffix, infix, other = _matcher(patterns)
    if name in exact or name.startswith(prefix) or name.endswith(suffix) or any(part in name for part in infix):
        return True
    if other:
        from fnmatch import fnmatchcase

        return any(fnmatchcase(name, p) for p in other)  # both sides upper-cased
    return False


def sandbox_env(host_env: Mapping[str, str], rules: EnvRules) -> dict[str, str]:
    """The environment the sandboxed command starts with (before proxy variables)."""
    result: dict[str, str] = {}
    for name, value in host_env.items():
        if matches(name, RESERVED_ENV):
            continue
        if (
            name in rules.passthrough
            or not matches(name, SECRET_ENV + rules.deny)
            or (name.upper() in NOT_SECRET_ENV and not matches(name, rules.deny))
        ):
            result[name] = value
    for name, value in rules.set:
        if not matches(name, RESERVED_ENV):
            result[name] = value
    return result


def withheld(host_env: Mapping[str, str], rules: EnvRules) -> list[str]:
    """Names of host variables that were not passed in, for `explain` and dry runs."""
    kept = sandbox_env(host_env, rules)
    return sorted(n for n in host_env if n not in kept and not matches(n, RESERVED_ENV))
