"""`[credentials.NAME]` tables: a secret the sandbox uses without ever holding it.

    [credentials.GH_TOKEN]
    env = "GH_TOKEN"                 # where it lives outside: env = "VAR", file = "PATH", or command = ["gh", "auth", "token"]
    hosts = ["api.github.com"]       # the only hosts it is sent to
    header = "Authorization"         # where it may travel (the default); or query = "key"

Inside the sandbox the variable NAME holds a placeholder made for that one
run. The proxy daemon swaps the placeholder for the value on requests to
`hosts` (TLS only, which it then terminates), in the named header (Bearer,
token or Basic credentials alike) or query parameter, and refuses any
request that carries the placeholder anywhere else or to any other host.

Only the grammar lives here (the loader's checks and the canonical form);
the run reads the value (proxy/client/credentials.py) and the daemon swaps it
(proxy/filter/placeholders.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 field name
_PARAMETER = re.compile(r"^[A-Za-z0-9._~-]+$")  # a query parameter name that needs no escaping
SOURCES = ("env", "file", "command")
KEYS = (*SOURCES, "hosts", "header", "query")
# Headers that carry something else than a credential, or that routing reads: a placeholder there is refused.
NOT_CREDENTIAL_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"})


@dataclass(frozen=True)
class Credential:
    """One credential as the policy gives it: where its value lives, where it may go. Never the value."""

    name: str  # the variable inside the sandbox, holding the run's placeholder
    source: str  # "env", "file" or "command"
    where: tuple[str, ...]  # the variable's name, the file's absolute path, or the command's words
    hosts: tuple[str, ...]  # canonical host rules (profiles.domains)
    header: str | None = "Authorization"  # the header it may travel in (lower-cased when compared), or None
    query: str | None = None  # the query parameter it may travel in, or None
    origin: str = ""  # the file that named it

    def described(self) -> str:
        """Where the value comes from, for messages (never the value)."""
        if self.source == "env":
            return f'env = "{self.where[0]}"'
        if self.source == "file":
            return f'file = "{self.where[0]}"'
        return f"command = {list(self.where)}"

    def places(self) -> str:
        """Where it may travel, for messages."""
        found = ([f"the {self.header} header"] if self.header else []) + ([f"the {self.query} query parameter"] if self.query else [])
        return " or ".join(found)


def check_name(name: str) -> None:
    """A credential's name is the variable it is set as inside: not one stockade sets itself there."""
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a variable name (letters, digits and _, not starting with a digit)")
    from stockade.core.proxy_env import CA_VARIABLES, proxy_environment

    taken = {taken.upper() for taken in (*proxy_environment(1), *CA_VARIABLES, "PATH", "HOME", "TMPDIR")}
    if name.upper().startswith("STOCKADE_") or name.upper() in taken:  # as envfilter.RESERVED_ENV matches: whatever the case
        raise ValueError(f"{name} is a variable stockade or the sandbox needs for itself; name the credential after the variable your tool reads")


def check_header(value: object) -> str:
    if not isinstance(value, str) or not _HEADER.match(value):
        raise ValueError(f'header must be a header name such as "Authorization", not {value!r}')
    if value.lower() in NOT_CREDENTIAL_HEADERS:
        raise ValueError(f"header {value!r} routes or frames the request; a credential cannot travel there")
    return value


def check_query(value: object) -> str:
    if not isinstance(value, str) or not _PARAMETER.match(value):
        raise ValueError(f'query must be a parameter name such as "key" (letters, digits, . _ ~ -), not {value!r}')
    return value


def check_command(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(word, str) and word and "\0" not in word for word in value):
        raise ValueError('command must be a non-empty list of words, such as ["gh", "auth", "token"]')
    return tuple(value)


def check_env_source(value: object) -> tuple[str, ...]:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(f"env must name a variable of the shell stockade runs from, not {value!r}")
    return (value,)


class Resolved:
    """One credential for this run: its placeholder and its value. The repr never shows the value."""

    __slots__ = ("name", "placeholder", "value", "hosts", "header", "query")

    def __init__(self, name: str, placeholder: str, value: str, hosts: list[str], header: str, query: str) -> None:
        self.name = name
        self.placeholder = placeholder
        self.value = value
        self.hosts = hosts
        self.header = header
        self.query = query

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "placeholder": self.placeholder, "value": self.value, "hosts": list(self.hosts),
                "header": self.header, "query": self.query}  # fmt: skip

    def __repr__(self) -> str:
        return f"Resolved({self.name!r}, hosts={self.hosts!r})"
