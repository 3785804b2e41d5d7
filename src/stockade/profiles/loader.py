"""Read one policy file (or built-in) into a validated `Layer`; every error has FILE:LINE."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stockade.core.errors import PolicyError
from stockade.profiles import units
from stockade.profiles.model import ACCEPT_MODES, ENGINES, HOME_MODES, NetworkMode
from stockade.profiles.paths import normalise_path
from stockade.profiles.schema import LIST_KINDS, TABLES, Kind
from stockade.profiles.toml_lines import KeyLines

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IMAGE = re.compile(r"^[A-Za-z0-9*?][A-Za-z0-9._/:@*?-]{0,254}$")  # a reference as `docker pull` takes it, or a glob of one
_ENV_GLOB = re.compile(r"^[A-Za-z0-9_*?]+$")
BUILTIN_PREFIX = "builtin:"
MAX_POLICY_BYTES = 1 << 20


@dataclass(frozen=True)
class Layer:
    """One file's validated values, paths made absolute, rules canonical."""

    source: str  # absolute file path, or "builtin:<name>"
    extends: tuple[str, ...] = ()
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    text: str = ""
    names_extends: bool = False  # the file has an `extends` key (`extends = []` included)
    implicit: bool = False  # not named by the file: the user's default it builds on (resolve.py)
    required: bool = False  # a system baseline's `required = true` (profiles/baseline.py)

    @property
    def is_builtin(self) -> bool:
        return self.source.startswith(BUILTIN_PREFIX)


BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin")


def builtin_names() -> list[str]:
    return sorted(name[:-5] for name in os.listdir(BUILTIN_DIR) if name.endswith(".toml"))


def builtin_text(name: str) -> str:
    """A built-in profile's TOML (shipped as package data next to this module)."""
    target = os.path.join(BUILTIN_DIR, f"{name}.toml")
    if "/" in name or not os.path.isfile(target):
        import difflib

        known = ", ".join(builtin_names())
        hint = difflib.get_close_matches(name, builtin_names(), n=1, cutoff=0.5)
        suggestion = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise PolicyError(f"no built-in profile named '{name}'{suggestion}; built-ins: {known}")
    with open(target, encoding="utf-8") as handle:
        return handle.read()


def load_builtin(name: str, *, project_dir: Path, home: Path) -> Layer:
    return parse_layer(builtin_text(name), f"{BUILTIN_PREFIX}{name}", base=project_dir, home=home)


def load_file(path: Path, *, home: Path, base: Path | None = None) -> Layer:
    """Load a policy file; relative paths resolve against `base` (default: its directory).

    The file is named by its folder's real path: `--policy ../p.toml` must not become a source
    spelled `/proj/../p.toml`, which string comparisons would take for a path inside /proj (the
    sandbox would then protect and pin the wrong folders)."""
    path = Path(os.path.realpath(path.parent)) / path.name
    return parse_layer(read_policy(path), str(path), base=base or path.parent, home=home)


def read_policy(path: Path) -> str:
    """A policy file's text: a regular file of at most MAX_POLICY_BYTES, in UTF-8.

    An untrusted `extends` can name any path, so nothing else is read: not a device
    (`/dev/zero` never ends), not a pipe, nothing under /proc or /sys (`/proc/kmsg`
    blocks), and the open itself cannot block on a FIFO."""
    real = os.path.realpath(path)
    if any(real == top or real.startswith(top + "/") for top in ("/proc", "/sys", "/dev")):
        raise PolicyError(f"is under /{real.split('/')[1]}: policy files are regular files", file=path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PolicyError("policy file not found", file=path) from None
    except OSError as exc:
        raise PolicyError(f"cannot read policy file: {exc.strerror}", file=path) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PolicyError("is not a regular file (a device, pipe or folder): policy files are regular files", file=path)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_POLICY_BYTES + 1)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(f"is larger than {MAX_POLICY_BYTES >> 10} KiB: policy files are short", file=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PolicyError(f"is not UTF-8 text (byte 0x{data[exc.start]:02x})", file=path, line=line) from None


def parse_layer(text: str, source: str, *, base: Path, home: Path, system: bool = False) -> Layer:
    """Validate a policy document against the schema and normalise its values. A `system` one (an
    administrator's baseline, profiles/baseline.py) may say `required`, and extends nothing and
    holds no credentials."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _decode_error_line(str(exc)) or (text.count("\n") + 1 if "end of document" in str(exc) else None)
        message = re.sub(r"\s*\((at line \d+, column \d+|at end of document)\)", "", str(exc))
        raise PolicyError(f"not valid TOML: {message}", file=source, line=line) from None
    except RecursionError:
        raise PolicyError("arrays or tables nested too deeply", file=source, line=_deep_line(text)) from None
    lines = KeyLines(text)
    checker = _Checker(source, lines, base=base, home=home)
    values: dict[str, dict[str, Any]] = {}
    extends: tuple[str, ...] = ()
    required = False
    for key, value in document.items():
        if key == "required":
            if not system:
                raise checker.fail("'required' is a key of the system baseline (/etc/stockade/policy.toml) only; remove it", "", key)
            if not isinstance(value, bool):
                raise checker.fail(f"required must be true or false, not {_type_name(value)}", "", key)
            required = value
        elif system and key in ("extends", "credentials"):
            what = "extends nothing: write its rules in full" if key == "extends" else "holds no credentials: they are each user's own"
            raise checker.fail(f"a system baseline {what}", *(("", key) if key == "extends" else (key, "")))
        elif key == "credentials":
            values[key] = checker.credentials(value)
        elif isinstance(value, dict):
            if key not in TABLES or key == "":
                checker.unknown_table(key)
            values[key] = checker.table(key, value)
        elif key in TABLES[""]:
            extends = tuple(checker.table("", {key: value})[key])
        else:
            checker.unknown_key("", key)
    return Layer(source=source, extends=extends, values=values, text=text, names_extends="extends" in document, required=required)


def _deep_line(text: str, limit: int = 64) -> int | None:
    """The line where brackets first nest deeper than `limit` (strings not told apart: a hint)."""
    depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        for char in line:
            depth += 1 if char in "[{" else -1 if char in "]}" else 0
            if depth > limit:
                return number
    return None


def _decode_error_line(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None


class _Checker:
    """Validates values and raises PolicyError with the line of the offending key."""

    def __init__(self, source: str, lines: KeyLines, *, base: Path, home: Path) -> None:
        self.source = source
        self.lines = lines
        self.base = base
        self.home = home

    def fail(self, message: str, table: str, key: str, item: str | None = None) -> PolicyError:
        line = self.lines.item(table, key, item) if item is not None else self.lines.key(table, key)
        if line is None:
            line = self.lines.table(table)
        return PolicyError(message, file=self.source, line=line)

    def unknown_table(self, name: str) -> None:
        import difflib

        known = [*(t for t in TABLES if t), "credentials"]
        hint = difflib.get_close_matches(name, known, n=1)
        suggestion = f" (did you mean [{hint[0]}]?)" if hint else f"; tables are {', '.join(f'[{t}]' for t in known)}"
        raise PolicyError(f"unknown table [{name}]{suggestion}", file=self.source, line=self.lines.table(name) or self.lines.key("", name))

    def unknown_key(self, table: str, key: str) -> None:
        import difflib

        known = list(TABLES[table])
        hint = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        where = f" in [{table}]" if table else " at the top level"
        suggestion = f" (did you mean '{hint[0]}'?)" if hint else f"; known keys: {', '.join(known)}"
        raise self.fail(f"unknown key '{key}'{where}{suggestion}", table, key)

    def table(self, table: str, content: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in content.items():
            if key not in TABLES[table]:
                self.unknown_key(table, key)
            try:
                result[key] = self.value(table, key, value)
            except (TypeError, ValueError, AttributeError, RecursionError) as exc:  # a shape no check foresaw
                name = f"{table}.{key}" if table else key
                raise self.fail(
                    f"'{name}' must be a {TABLES[table][key].value}, not {_type_name(value)} ({type(exc).__name__})", table, key
                ) from None
        return result

    def value(self, table: str, key: str, value: Any) -> Any:
        kind = TABLES[table][key]
        name = f"{table}.{key}" if table else key
        if kind is Kind.HTTP_TABLES:
            return self.http_tables(value)
        if kind in LIST_KINDS:
            if not isinstance(value, list):
                raise self.fail(f"'{name}' must be a {kind.value} (a list of strings), not {_type_name(value)}", table, key)
            odd = [v for v in value if not isinstance(v, str)]
            if odd:
                raise self.fail(f"'{name}' must be a {kind.value} (a list of strings), not a list holding {_type_name(odd[0])}", table, key)
            return tuple(dict.fromkeys(self.item(kind, table, key, v) for v in value))
        try:
            return self.scalar(kind, name, value)
        except ValueError as exc:
            raise self.fail(f"'{name}': {exc}", table, key) from None

    def http_tables(self, value: Any) -> dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
        """[network.http."HOST"] tables: {canonical host: (allow rules, deny rules, push patterns)}, every rule canonical."""
        from stockade.profiles.domains import parse_rule
        from stockade.profiles.gitrefs import parse_ref_pattern
        from stockade.profiles.httprules import parse_http_rule

        if not isinstance(value, dict):
            raise self.fail(f"'network.http' must be a {Kind.HTTP_TABLES.value}, not {_type_name(value)}", "network", "http")
        tables: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}
        for host, rules in value.items():
            header = f"[network.http.{json_key(host)}]"
            try:
                rule = parse_rule(host)
            except ValueError as exc:
                raise self.http_fail(f"{header}: {exc}", host) from None
            if rule.network is not None:
                raise self.http_fail(f"{header}: HTTP rules name hosts, not addresses (TLS to an address has no name to check)", host)
            if not isinstance(rules, dict):
                raise self.http_fail(f"{header} must be a table with allow and deny lists, not {_type_name(rules)}", host)
            unknown = [key for key in rules if key not in ("allow", "deny", "push")]
            if unknown and isinstance(rules[unknown[0]], dict):  # [network.http.api.test]: TOML read "api", then "test"
                dotted, inner = f"{host}.{unknown[0]}", rules[unknown[0]]
                while isinstance(inner, dict) and len(inner) == 1 and not set(inner) & {"allow", "deny", "push"}:
                    ((part, inner),) = inner.items()
                    dotted += f".{part}"
                line = self.lines.table(f"network.http.{dotted}") or self.lines.table(f"network.http.{host}")
                raise PolicyError(
                    f'[network.http.{dotted}]: a host with dots must be quoted, as in [network.http."{dotted}"]',
                    file=self.source,
                    line=line,
                )
            if unknown:
                raise self.http_fail(f"unknown key '{unknown[0]}' in {header}; known keys: allow, deny, push", host, unknown[0])
            lists: list[tuple[str, ...]] = []
            for key in ("allow", "deny", "push"):
                items = rules.get(key, [])
                spelled = '"refs/heads/NAME" patterns' if key == "push" else '"METHODS /path" strings'
                if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
                    raise self.http_fail(f"'{key}' in {header} must be a list of {spelled}", host, key)
                parsed = []
                for item in items:
                    try:
                        parsed.append(parse_ref_pattern(item) if key == "push" else str(parse_http_rule(item)))
                    except ValueError as exc:
                        raise self.http_fail(f"{header} {key}: {exc}", host, key, item) from None
                lists.append(tuple(dict.fromkeys(parsed)))
            canonical = str(rule)
            previous = tables.get(canonical, ((), (), ()))
            tables[canonical] = tuple(tuple(dict.fromkeys((*old, *new))) for old, new in zip(previous, lists, strict=True))  # type: ignore[assignment]
        return tables

    def credentials(self, value: Any) -> dict[str, Any]:
        """[credentials.NAME] tables: {NAME: Credential}, every value checked, no secret read."""
        from stockade.profiles import credentials as grammar
        from stockade.profiles.domains import parse_rule

        if not isinstance(value, dict):
            raise PolicyError(
                f"'credentials' must be tables such as [credentials.GH_TOKEN], not {_type_name(value)}",
                file=self.source, line=self.lines.key("", "credentials"),
            )  # fmt: skip
        found: dict[str, Any] = {}
        for name, table in value.items():
            where = f"[credentials.{name}]"

            def fail(message: str, key: str | None = None, item: str | None = None, name: str = name) -> PolicyError:
                section = f"credentials.{name}"
                line = None
                if key is not None:
                    line = self.lines.item(section, key, item) if item is not None else self.lines.key(section, key)
                line = line or self.lines.table(section) or self.lines.table("credentials") or self.lines.key("", "credentials")
                return PolicyError(message, file=self.source, line=line)

            try:
                grammar.check_name(name)
            except ValueError as exc:
                raise fail(f"{where}: {exc}") from None
            if not isinstance(table, dict):
                raise fail(f"{where} must be a table (env, file or command; hosts; header or query), not {_type_name(table)}")
            unknown = [key for key in table if key not in grammar.KEYS]
            if unknown:
                raise fail(f"unknown key '{unknown[0]}' in {where}; known keys: {', '.join(grammar.KEYS)}", unknown[0])
            sources = [key for key in grammar.SOURCES if key in table]
            if len(sources) != 1:
                said = "none" if not sources else " and ".join(sources)
                raise fail(
                    f'{where} needs exactly one of env = "VAR", file = "PATH" or command = [...] (where its value lives outside), not {said}',
                    sources[1] if len(sources) > 1 else None,
                )
            source = sources[0]
            try:
                if source == "env":
                    place = grammar.check_env_source(table["env"])
                elif source == "command":
                    place = grammar.check_command(table["command"])
                else:
                    if not isinstance(table["file"], str):
                        raise ValueError(f"file must be a path, not {_type_name(table['file'])}")
                    place = (normalise_path(table["file"], base=self.base, home=self.home, allow_glob=False),)
            except ValueError as exc:
                raise fail(f"{where} {source}: {exc}", source) from None
            hosts = table.get("hosts")
            if not isinstance(hosts, list) or not hosts or not all(isinstance(host, str) for host in hosts):
                at = "hosts" if "hosts" in table else None
                raise fail(f'{where} needs hosts = ["api.example.com", ...]: the only hosts its value is sent to', at)
            rules = []
            for host in hosts:
                try:
                    rule = parse_rule(host)
                except ValueError as exc:
                    raise fail(f"{where} hosts: {exc}", "hosts", host) from None
                if rule.network is not None:
                    why = "a credential goes to a host by name, over TLS checked for that name"
                    raise fail(f"{where} hosts: {host!r} is an address; {why}", "hosts", host)
                rules.append(str(rule))
            try:
                header = grammar.check_header(table["header"]) if "header" in table else None
                query = grammar.check_query(table["query"]) if "query" in table else None
            except ValueError as exc:
                raise fail(f"{where} {exc}", "header" if "header" in table else "query") from None
            if header is None and query is None:
                header = "Authorization"
            found[name] = grammar.Credential(
                name=name, source=source, where=place, hosts=tuple(dict.fromkeys(rules)), header=header, query=query, origin=self.source
            )
        return found

    def http_fail(self, message: str, host: str, key: str | None = None, item: str | None = None) -> PolicyError:
        """An error in one host's HTTP table, at the line of its item, its key, its header, or [network]'s."""
        table = f"network.http.{host}"  # as KeyLines spells a [network.http."HOST"] header
        line = None
        if key is not None:
            line = self.lines.item(table, key, item) if item is not None else self.lines.key(table, key)
        line = line or self.lines.table(table) or self.lines.table("network.http") or self.lines.key("network", "http")
        return PolicyError(message, file=self.source, line=line or self.lines.table("network"))

    def item(self, kind: Kind, table: str, key: str, value: str) -> str:
        name = f"{table}.{key}" if table else key
        try:
            if kind is Kind.NAMES:
                if not value.strip():
                    raise ValueError("empty profile name")
                return value.strip()
            if kind in (Kind.PATHS, Kind.GLOB_PATHS):
                return normalise_path(value, base=self.base, home=self.home, allow_glob=kind is Kind.GLOB_PATHS)
            if kind is Kind.HOST_RULES:
                from stockade.profiles.domains import parse_rule  # ipaddress: only for policies with hosts

                return str(parse_rule(value))
            if kind is Kind.ENV_GLOBS and not _ENV_GLOB.match(value):
                raise ValueError(f"{value!r} is not a variable name or glob (letters, digits, _, * and ?)")
            if kind is Kind.ENV_NAMES and not _ENV_NAME.match(value):
                raise ValueError(f"{value!r} is not a variable name")
            if kind is Kind.GPU_NUMBERS and not (value.isascii() and value.isdigit() and len(value) <= 4):
                raise ValueError(f"{value!r} is not a GPU number (0, 1, ... as nvidia-smi numbers them)")
            if kind is Kind.IMAGES and not _IMAGE.match(value):
                raise ValueError(f"{value!r} is not an image reference or glob (registry/name:tag, with * and ?)")
            return value
        except ValueError as exc:
            raise self.fail(f"'{name}': {exc}", table, key, item=value) from None

    def scalar(self, kind: Kind, name: str, value: Any) -> Any:
        if kind is Kind.MODE:
            if not isinstance(value, str) or value not in {m.value for m in NetworkMode}:
                raise ValueError(f"must be {kind.value}, not {value!r}")
            return NetworkMode(value)
        if kind is Kind.ENGINE:
            if not isinstance(value, str) or value not in ENGINES:
                raise ValueError(f"must be {kind.value}, not {value!r}")
            return value
        if kind is Kind.ACCEPT:
            if not isinstance(value, str) or value not in ACCEPT_MODES:
                raise ValueError(f"must be {kind.value}, not {value!r}")
            return value
        if kind is Kind.HOME:
            if not isinstance(value, str) or value not in HOME_MODES:
                raise ValueError(f"must be {kind.value}, not {value!r}")
            return value
        if kind is Kind.SIZE:
            size = units.parse_size(_str_or_int(value, kind))
            if name == "limits.memory" and size < MIN_MEMORY:
                unit = "" if isinstance(value, str) and not value.strip().isdigit() else " (a number without a unit is bytes)"
                raise ValueError(
                    f"{value!r} is {size} bytes{unit}: too little for any command to start (bwrap itself is killed); "
                    'give at least "16M", for example "512M"'
                )
            return size
        if kind is Kind.DURATION:
            return units.parse_duration(_str_or_int(value, kind, allow_float=True))
        if kind is Kind.COUNT:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"must be a {kind.value}, not {value!r}")
            return value
        if kind is Kind.BOOL:
            if not isinstance(value, bool):
                raise ValueError(f"must be {kind.value}, not {value!r}")
            return value
        if kind is Kind.PATH:
            if not isinstance(value, str):
                raise ValueError(f"must be a path string, not {_type_name(value)}")
            return normalise_path(value, base=self.base, home=self.home, allow_glob=False)
        if kind is Kind.URL:
            return _collector_url(value)
        if kind is Kind.ENV_TABLE:
            if not isinstance(value, dict):
                raise ValueError(f"must be a {kind.value}, not {_type_name(value)}")
            for var, text in value.items():
                if not _ENV_NAME.match(var):
                    raise ValueError(f"{var!r} is not a variable name")
                if not isinstance(text, str):
                    raise ValueError(f"value of {var} must be a string, not {_type_name(text)}")
                if "\0" in text:
                    raise ValueError(f"value of {var} contains a NUL character")
            return dict(value)
        raise AssertionError(f"unhandled kind {kind}")


def _collector_url(value: Any) -> str:
    """An OpenTelemetry collector's OTLP/HTTP base URL: http or https, a host, no credentials in it
    (headers come from OTEL_EXPORTER_OTLP_HEADERS), no query or fragment."""
    from urllib.parse import urlsplit

    if not isinstance(value, str):
        raise ValueError(f"must be a URL string, not {_type_name(value)}")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f'{value!r} must be an http:// or https:// URL naming a host, such as "http://collector:4318"')
    if parts.username or parts.password or parts.query or parts.fragment or any(c.isspace() or ord(c) < 0x20 for c in value):
        raise ValueError(f"{value!r}: give the collector's base URL alone (its token goes in OTEL_EXPORTER_OTLP_HEADERS)")
    return value.rstrip("/")


def json_key(host: str) -> str:
    """A host as a quoted TOML key, the way a [network.http."HOST"] header spells it."""
    return '"' + host.replace("\\", "\\\\").replace('"', '\\"') + '"'


MIN_MEMORY = 16 << 20  # below this, bwrap and the shell cannot start: the run would fail with a killed bwrap


def _str_or_int(value: Any, kind: Kind, allow_float: bool = False) -> Any:
    allowed: tuple[type, ...] = (str, int, float) if allow_float else (str, int)
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise ValueError(f"must be a {kind.value}, not {_type_name(value)}")
    return value


def _type_name(value: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "a list", dict: "a table"}
    return names.get(type(value), type(value).__name__)
