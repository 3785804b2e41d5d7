"""Find the secrets in a tool's own configuration file, and write the file without them.

Each reader takes a file's text and returns a `Rewrite`: the file as the tool
will read it inside, with a mark where each secret was, and for each mark the
value, the hosts it belongs to and how its placeholder is spelled there (a
Basic pair is base64 of "user:" and the placeholder). profiles/toolconfig.py
puts a per-run placeholder at each mark; the proxy daemon swaps it back only
on requests to those hosts, as it does for `[credentials]` (proxy/filter/placeholders.py).

Three rules keep what a reader does not understand from being shown:
- Files are read with their format's own grammar (configparser, tomllib, json,
  ElementTree, YAML, netrc, git's config grammar; npm's ini as npm reads it)
  and written anew from what was read: comments never reach the sandbox.
- A secret the reader knows, with a host to send it to, becomes a mark; one
  without a host, a setting that would take the tool past stockade's proxy or
  its CA, and every other value that `looks_secret` (a password in a URL, a
  known token prefix, a long random word, a key named like a secret) is left
  out and named in `Rewrite.withheld`.
- Anything the reader cannot follow raises `Unreadable`: the file is hidden.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable

TYPE_CHECKING = False  # a run with tool files reads them on its cached path: typing, json, urllib stay unimported
if TYPE_CHECKING:
    from typing import Any

MARK = "stockade-secret-mark-{}-"  # placeholders are put where marks are (toolconfig.py)


class Unreadable(ValueError):
    """The file is not in a form its reader can follow: it is hidden whole."""


class Found:
    """One secret: `key` names where it was (never the value), `spell` writes a placeholder as the file holds it."""

    __slots__ = ("key", "value", "hosts", "spell")

    def __init__(self, key: str, value: str, hosts: tuple[str, ...], spell: Callable[[str], str] | None = None) -> None:
        self.key = key
        self.value = value
        self.hosts = hosts
        self.spell = spell or _itself

    def __repr__(self) -> str:
        return f"Found({self.key!r}, hosts={self.hosts!r})"


def _itself(placeholder: str) -> str:
    return placeholder


class Rewrite:
    """A file's text with marks where its secrets were, what they were, and what was left out."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.text = ""
        self.found: list[Found] = []
        self.withheld: list[str] = []
        self.sources: list[str] = []  # withheld settings that say where a tool fetches from: the run says so
        self.budget = MAX_NODES

    def mark(self, key: str, value: str, hosts: tuple[str, ...], spell: Callable[[str], str] | None = None) -> str:
        self.found.append(Found(f"{self.where}: {safe_label(key)}", value, hosts, spell))
        return MARK.format(len(self.found) - 1)

    def withhold(self, key: str, why: str) -> None:
        label = safe_label(key)
        self.withheld.append(f"{self.where}: {label} ({why})")
        if SOURCE_KEY.search(label.rsplit(".", 1)[-1].rsplit(" ", 1)[-1]):
            self.sources.append(f"{label} ({why})")

    def count(self) -> None:
        """One more value read: a YAML file whose aliases unfold into millions of them is not shown."""
        self.budget -= 1
        if self.budget < 0:
            raise Unreadable(f"it unfolds into more than {MAX_NODES} values")


MAX_NODES = 100_000
SOURCE_KEY = re.compile(r"(registry|registries|index|url|channel|mirror|source|repositor|server)", re.I)
NO_HOST = "no host it belongs to is named"
OWN_PROXY = "a proxy of the tool's own: inside, stockade's filter is the proxy"
OWN_CA = "a CA of the tool's own: inside, stockade's CA bundle is trusted"
LOOKS_SECRET = "it looks like a secret"
UNKNOWN_SECRET = "a secret stockade does not know where to send"

# Keys named like secrets, in any of these formats (camelCase names are split first: nexusPwd, deployKey).
SECRET_KEY = re.compile(
    r"(pass(word|wd|phrase)?|token|secret|_auth|auth[-_]?ident|api[-_]?key|access[-_]?key|private[-_]?key|credential"
    r"|(^|[._-])(key|pat|pwd|pin)$|http[-_]?headers?$|extra[-_]?header$)",
    re.I,
)
NOT_SECRET_KEY = re.compile(r"(provider|helper|store|file|path|command|ring|id)$", re.I)  # names of where secrets are, not secrets


def secret_key(name: str) -> bool:
    """Whether a setting's name says it holds a secret (credential-provider and the like say where one is)."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(name)).lstrip("-")
    return bool(SECRET_KEY.search(name)) and not NOT_SECRET_KEY.search(name)


# Token formats that announce themselves (GitHub, GitLab, npm, PyPI, AWS, Slack, OpenAI/Stripe, Google, JWTs).
TOKEN_PREFIX = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{16,}|github_pat_\w{16,}|glpat-[\w-]{16,}|npm_[A-Za-z0-9]{16,}|pypi-[\w-]{16,}|(AKIA|ASIA)[A-Z0-9]{16}"
    r"|xox[abprs]-[\w-]{10,}|sk[-_](live_)?[A-Za-z0-9_-]{16,}|AIza[\w-]{30,}|ya29\.[\w-]{16,}|eyJ[\w-]{8,}\.[\w-]{8,})"
)
RANDOM_WORD = re.compile(r"[A-Za-z0-9_+=.~-]{24,}")
USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?!:?@)[^/?#\\\n]*@")


def looks_secret(text: str, words: bool = True) -> bool:
    """A value that may be a secret whatever its key: a URL with a user or password in it, a token
    with a known prefix, or (`words`) a long word of mixed letters and digits that is not part of
    a URL, a path, an option or an address (a placeholder's mark aside)."""
    text = re.sub(MARK.format(r"\d+"), "", text)
    if USERINFO.search(text) or TOKEN_PREFIX.search(text):
        return True
    if not words:
        return False
    for token in text.split():
        if "://" in token or token.startswith(("/", "~", "./", "../", "-", "$")) or "@" in token and "." in token:
            continue
        for word in RANDOM_WORD.findall(token):
            digits, letters = sum(c.isdigit() for c in word), sum(c.isalpha() for c in word)
            if digits >= 2 and letters >= 2 and len(set(word)) >= 10:
                return True
    return False


def safe_label(label: str) -> str:
    """A setting's name for messages: no URL's user or password, no word that looks like a secret."""
    label = re.sub(r"://[^/?#\n]*@", "://…@", label)
    return " ".join("…" if looks_secret(word) and "://" not in word else word for word in label.split(" "))


def _normalised(text: str) -> str:
    """Tools split lines on CR too (npm's ini, Python's text mode): so does every reader here."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"^(?P<name>{_LABEL}(?:\.{_LABEL})*)\.?(?::(?P<port>\d{{1,5}}))?$")


def host_rule(scheme: str, host: str) -> str:
    """The `[network]` rule a URL's secret may travel to: its host and port (the scheme's if none).
    Only plain ASCII names and IPv4 addresses: what profiles.domains.parse_rule takes for certain,
    checked here without its imports (tests/profiles/test_secretforms.py holds them to it)."""
    scheme = scheme.lower().rsplit("+", 1)[-1]
    match = _HOST.match(host)
    if match is None:
        raise Unreadable("an address in it is not a host name")
    name, port = match["name"].lower(), int(match["port"]) if match["port"] else (80 if scheme == "http" else 443)
    labels = name.split(".")
    if all(label.isdigit() for label in labels) and (len(labels) != 4 or any(int(label) > 255 for label in labels)):
        raise Unreadable("an address in it is not a host name")
    if not 0 < port < 65536:
        raise Unreadable("an address in it has no valid port")
    return f"{name}:{port}"


def url_host(url: object) -> str | None:
    """The host rule of a URL given in a configuration file (cargo's `sparse+https://...` too)."""
    if not isinstance(url, str) or "://" not in url:
        return None
    scheme, _, rest = url.strip().partition("://")
    if scheme.lower().rsplit("+", 1)[-1] not in ("http", "https"):
        return None
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "\\" in authority or any(char.isspace() for char in authority):
        return None  # read one way here and another by the tool
    try:
        return host_rule(scheme, authority.rpartition("@")[2])
    except Unreadable:
        return None


def _b64(text: str) -> str:
    return binascii.b2a_base64(text.encode(), newline=False).decode()


def _basic_pair(user: str) -> Callable[[str], str]:
    """How a placeholder is spelled where a file keeps base64 of "user:password"."""
    return lambda placeholder: _b64(f"{user}:{placeholder}")


_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")


def _unb64(value: str) -> str | None:
    """Strict base64 (what base64.b64decode(validate=True) takes), decoded as UTF-8; None otherwise."""
    value = value.strip()
    if not _BASE64.match(value):
        return None
    try:
        return binascii.a2b_base64(value).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _unquote(text: str) -> str:
    """%-escapes decoded as UTF-8, as urllib.parse.unquote does (its import is not on a run's path)."""
    if "%" not in text:
        return text
    raw = re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m[1], 16)]), text.encode("utf-8", "surrogateescape"))
    return raw.decode("utf-8", "replace")


# --- a value: URLs with a user or password, and the gate ---

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<userinfo>[^/?#\\\n]*)@(?P<host>[^\s/?#@\\]+)")


def value(rewrite: Rewrite, key: str, text: str, words: bool = True) -> str | None:
    """A setting's value as shown: each http(s) URL's user and password (the authority up to its
    last @, spaces and all, as pip and Node take it) marked for its host; None (withheld) when
    anything else in it looks like a secret (`words`: long random words too)."""

    def one(match: re.Match[str]) -> str:
        scheme, userinfo, host = match["scheme"], match["userinfo"], match["host"]
        if scheme.lower().rsplit("+", 1)[-1] not in ("http", "https"):
            raise _Withheld("a password for a service that is not HTTP")
        rule = (host_rule(scheme, host),)
        user, colon, password = userinfo.partition(":")
        marked = rewrite.mark(f"{key} (user in {scheme}://…@{host})", _unquote(user), rule) if user else ""
        if colon:
            marked += ":" + rewrite.mark(f"{key} (password in {scheme}://…@{host})", _unquote(password), rule)
        return f"{scheme}://{marked}@{host}"

    try:
        shown = _URL.sub(one, text)
    except _Withheld as why:
        rewrite.withhold(key, str(why))
        return None
    if looks_secret(shown, words):
        rewrite.withhold(key, LOOKS_SECRET)
        return None
    return shown


class _Withheld(Exception):
    pass


def keep(rewrite: Rewrite, key: str, text: str) -> str | None:
    """`value`, and a key named like a secret is withheld whatever it holds (a path aside)."""
    name = key.rsplit(".", 1)[-1].rsplit(":", 1)[-1].rsplit(" ", 1)[-1]
    if secret_key(name) and text.strip() and not text.strip().startswith(("/", "~/")):
        rewrite.withhold(key, UNKNOWN_SECRET)
        return None
    return value(rewrite, key, text)


# --- npm, pnpm and yarn 1: .npmrc, .yarnrc ---

_NERF = re.compile(r"^//(?P<host>[^/]+)(?P<path>/.*)?:(?P<name>[^:/]+)$")
NPM_DEFAULT = "https://registry.npmjs.org/"
NPM_PROXY = {"proxy", "https-proxy", "http-proxy", "noproxy"}
NPM_CA = {"ca", "cafile", "ca[]", "strict-ssl"}


def npm_value(raw: str) -> str:
    """A value as npm's ini reads it: quoted is JSON (or single-quoted), otherwise up to an
    unescaped ; or #, with \\; \\# and \\\\ unescaped."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        import json

        inner = raw[1:-1] if raw[0] == "'" else raw
        try:
            decoded = json.loads(inner if raw[0] == '"' else json.dumps(inner))
            return decoded if isinstance(decoded, str) else raw
        except ValueError:
            return raw
    out, escaped = "", False
    for char in raw:
        if escaped:
            out += char if char in "\\;#" else "\\" + char
            escaped = False
        elif char in ";#":
            break
        elif char == "\\":
            escaped = True
        else:
            out += char
    return out.strip()


def npmrc(text: str, where: str, spaced: bool = False) -> Rewrite:
    """`key=value` lines (`key value` for .yarnrc). A token is `//host/path/:_authToken`, or a
    bare `_authToken` for the default registry; `_auth` is base64 of user:password, `_password`
    base64. Sections, lone words and comments are left out."""
    rewrite = Rewrite(where)
    pairs: list[tuple[str, str]] = []
    section = False
    for number, line in enumerate(_normalised(text).split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            section = True
        if section:
            rewrite.withhold(f"line {number}", "in an ini section, which stockade does not show")
            continue
        key, separator, raw = stripped.partition(" " if spaced else "=")
        if not separator:
            rewrite.withhold(f"line {number}", "a lone word, which may be a secret")
            continue
        pairs.append((npm_value(key), npm_value(raw)))
    registry = next((v for k, v in reversed(pairs) if k == "registry"), NPM_DEFAULT)
    lines = []
    for key, raw in pairs:
        nerf = _NERF.match(key)
        name = nerf["name"] if nerf else key
        if "${" in raw and not USERINFO.search(raw):  # read from the environment when npm runs (stockade's filter decides what passes)
            shown: str | None = raw
        elif key.lower() in NPM_PROXY:
            rewrite.withhold(key, OWN_PROXY)
            continue
        elif key.lower() in NPM_CA or name.lower() in ("cafile", "ca"):
            rewrite.withhold(key, OWN_CA)
            continue
        elif name in ("_authToken", "_auth", "_password"):
            shown = _npm_secret(rewrite, key, name, raw, nerf["host"] if nerf else None, registry)
        elif name in ("username", "email", "always-auth", "certfile", "keyfile") or key == "registry" or key.endswith(":registry"):
            shown = value(rewrite, key, raw, words=False)
        else:
            shown = keep(rewrite, key, raw)
        if shown is not None:
            lines.append(f"{_npm_key(key)}{' ' if spaced else '='}{_json_quoted(shown) if _needs_quotes(shown) else shown}")
    return _finish(rewrite, "".join(line + "\n" for line in lines))


def _npm_key(key: str) -> str:
    return _json_quoted(key) if _needs_quotes(key) or "=" in key else key


def _json_quoted(text: str) -> str:
    import json

    return json.dumps(text)


def _needs_quotes(text: str) -> bool:
    return text != text.strip() or any(char in text for char in ";#\\\"'") or text.startswith("[")


def _npm_secret(rewrite: Rewrite, key: str, name: str, raw: str, host: str | None, registry: str) -> str | None:
    if host is None:
        hosts = (url_host(registry),)
    else:
        hosts = (host_rule("https", host),)
    if hosts[0] is None:
        rewrite.withhold(key, NO_HOST)
        return None
    rule = (str(hosts[0]),)
    if name == "_authToken":
        return rewrite.mark(key, raw, rule)
    decoded = _unb64(raw)
    if decoded is None:
        rewrite.withhold(key, "not base64 as npm writes it")
        return None
    if name == "_password":
        return rewrite.mark(key, decoded, rule, _b64)
    user, colon, password = decoded.partition(":")
    if not colon:
        rewrite.withhold(key, "not user:password as npm writes it")
        return None
    return rewrite.mark(key, password, rule, _basic_pair(user))


# --- ini files: pip.conf, .pypirc ---

PYPI_UPLOAD = {"pypi": "https://upload.pypi.org/legacy/", "testpypi": "https://test.pypi.org/legacy/"}
PIP_OWN = {"proxy": OWN_PROXY, "cert": OWN_CA}  # pip's own keys, with or without their leading dashes


def ini(text: str, where: str) -> Rewrite:
    """pip.conf and .pypirc, read as configparser (so pip and twine) reads them and written anew.
    A .pypirc `password` goes to its section's `repository` (PyPI's, by the section's name)."""
    import configparser

    parser = configparser.RawConfigParser(strict=False, interpolation=None, delimiters=("=", ":"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(_normalised(text))
    except configparser.Error as exc:
        raise Unreadable(f"it is not an INI file ({exc.message.splitlines()[0]})") from None
    rewrite = Rewrite(where)
    out = []
    for section in parser.sections():
        out.append(f"[{section}]")
        options = {name.lower(): raw for name, raw in parser.items(section)}
        for name, raw in parser.items(section):
            label = f"[{section}] {name}"
            lowered = name.lower().lstrip("-")
            if lowered in PIP_OWN:
                rewrite.withhold(label, PIP_OWN[lowered])
                continue
            if lowered == "password" and raw:
                url = options.get("repository") or PYPI_UPLOAD.get(section)
                host = url_host(url)
                if host is None:
                    rewrite.withhold(label, NO_HOST)
                    continue
                shown: str | None = rewrite.mark(label, raw.strip(), (host,))
            elif lowered in ("username", "client-cert", "trusted-host", "index-url", "extra-index-url", "find-links", "index", "repository"):
                shown = value(rewrite, label, raw, words=False)
            else:
                shown = keep(rewrite, label, raw)
            if shown is not None:
                out.append(f"{name} = {shown.strip().replace(chr(10), chr(10) + '    ')}")
        out.append("")
    return _finish(rewrite, "\n".join(out))


# --- TOML: uv, cargo, poetry ---

CRATES_IO = "crates.io:443"


def toml(text: str, where: str, hosts_of: Callable[[str, str], str | None] | None = None) -> Rewrite:
    """uv.toml, cargo's config and credentials, poetry's config and auth, read with tomllib and
    written anew. `hosts_of(table, key)` names the host of a table's secret (cargo's registries
    and poetry's repositories are named in another file); one it has no host for is withheld."""
    import tomllib

    import tomlkit

    try:
        tree = tomllib.loads(_normalised(text))
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"it is not TOML ({exc})") from None
    rewrite = Rewrite(where)

    def walk(node: dict[str, Any], table: str, secret: bool) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        for key, item in node.items():
            label = f"{table}.{key}" if table else key
            inner = secret or secret_key(key)
            if isinstance(item, dict):
                shown[key] = walk(item, label, inner)
            elif isinstance(item, list):
                kept = [walk(x, label, inner) if isinstance(x, dict) else _toml_leaf(rewrite, label, table, key, x, hosts_of, inner) for x in item]
                shown[key] = [x for x in kept if x is not _GONE]
            else:
                leaf = _toml_leaf(rewrite, label, table, key, item, hosts_of, inner)
                if leaf is not _GONE:
                    shown[key] = leaf
        return shown

    return _finish(rewrite, tomlkit.dumps(walk(tree, "", False)))


def _toml_leaf(
    rewrite: Rewrite, label: str, table: str, key: str, item: object, hosts_of: Callable[[str, str], str | None] | None, secret: bool
) -> object:
    """One value: a secret (by its name or a table's above it) to its host or withheld; the rest gated."""
    if key == "proxy":
        rewrite.withhold(label, OWN_PROXY)
        return _GONE
    if key in ("cainfo", "ca-certificates", "cert"):
        rewrite.withhold(label, OWN_CA)
        return _GONE
    if secret:
        host = hosts_of(table, key) if hosts_of is not None and isinstance(item, str) else None
        if host is not None:
            return rewrite.mark(label, str(item), (host,))
        if isinstance(item, str) and item.strip().startswith(("/", "~/")):
            return item  # a path to where a secret is, not the secret
        rewrite.withhold(label, NO_HOST if hosts_of is not None else UNKNOWN_SECRET)
        return _GONE
    if not isinstance(item, str):
        return _GONE if looks_secret(str(item)) else item
    shown = keep(rewrite, label, item)
    return _GONE if shown is None else shown


def toml_tables(text: str) -> dict[str, Any]:
    """The tables of another file a reader takes hosts from; {} when it cannot be parsed."""
    import tomllib

    try:
        return tomllib.loads(_normalised(text))
    except tomllib.TOMLDecodeError:
        return {}


# --- properties: gradle.properties ---


def properties(text: str, where: str) -> Rewrite:
    """`key=value` or `key: value` lines; a secret's host is never named here, so each is withheld.
    Continued lines, lone words and comments are left out."""
    rewrite = Rewrite(where)
    lines: list[str] = []
    for number, line in enumerate(_normalised(text).split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        if stripped.endswith("\\"):
            raise Unreadable(f"line {number} is continued on the next")
        match = re.match(r"^(?P<key>[^=:\s]+)\s*[=:]\s*(?P<value>.*)$", stripped)
        if match is None:
            rewrite.withhold(f"line {number}", "a lone word, which may be a secret")
            continue
        shown = keep(rewrite, match["key"], match["value"])
        if match["key"].startswith("systemProp.http") and "proxy" in match["key"].lower():
            rewrite.withhold(match["key"], OWN_PROXY)
            continue
        if shown is not None:
            lines.append(f"{match['key']}={shown}")
    return _finish(rewrite, "".join(line + "\n" for line in lines))


# --- netrc ---


def netrc(text: str, where: str) -> Rewrite:
    """Read as Python's netrc module reads it (curl's grammar): each machine's login and password
    are marked for that host name; the `default` entry and macros are left out."""
    import io
    import netrc as netrc_module

    parsed = netrc_module.netrc.__new__(netrc_module.netrc)  # the module reads only named files: its parser, on the text
    parsed.hosts, parsed.macros = {}, {}
    try:
        parsed._parse(where, io.StringIO(_normalised(text)), False)  # type: ignore[attr-defined]
    except netrc_module.NetrcParseError as exc:
        raise Unreadable(f"it is not a netrc file ({exc.msg})") from None
    rewrite = Rewrite(where)
    lines = []
    for machine, (login, account, password) in parsed.hosts.items():
        label = f"machine {machine}"
        if machine == "default":
            rewrite.withhold("the default entry", NO_HOST)
            continue
        try:
            host_rule("https", machine)  # a literal host name or IPv4 address: no wildcard, no network
        except Unreadable:
            rewrite.withhold(label, "not a host name")
            continue
        words = [f"machine {machine}"]
        if login:
            words.append(f"login {rewrite.mark(f'{label} login', login, (machine,))}")
        if password:
            words.append(f"password {rewrite.mark(f'{label} password', password, (machine,))}")
        if account:
            rewrite.withhold(f"{label} account", UNKNOWN_SECRET)
        lines.append(" ".join(words))
    if parsed.macros:
        rewrite.withhold("macdef", "a macro, which is ftp's")
    return _finish(rewrite, "".join(line + "\n" for line in lines))


# --- git: config and the store helper's file ---

_GIT_SECTION = re.compile(r'^\s*\[\s*(?P<name>[A-Za-z0-9.-]+)(\s+"(?P<sub>(?:[^"\\]|\\.)*)")?\s*\]\s*([#;].*)?$')
_GIT_PAIR = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z0-9-]*)\s*(=\s*(?P<value>.*))?$")
_AUTHORIZATION = re.compile(r"^\s*authorization\s*:\s*(?P<scheme>[A-Za-z]+)\s+(?P<value>\S+)\s*$", re.I)
GIT_OWN = {("http", "proxy"): OWN_PROXY, ("https", "proxy"): OWN_PROXY, ("http", "sslcainfo"): OWN_CA, ("http", "sslcapath"): OWN_CA}


def gitconfig(text: str, where: str) -> Rewrite:
    """git's config, checked with git's grammar (profiles/gitconfig.py) and written anew line by
    line: passwords in URLs (`url.<base>.insteadOf` sections included) and `http.<url>.extraHeader
    = Authorization: ...` are marked for their URL's host; a section heading with a password the
    file could not be shown without, a line continued on the next, or a key on a heading's line,
    make the file unreadable."""
    from stockade.profiles.gitconfig import ConfigSyntaxError, parse

    text = _normalised(text).removeprefix("\ufeff")
    try:
        parse(text)
    except ConfigSyntaxError as exc:
        raise Unreadable(f"git would refuse it ({exc})") from None
    rewrite = Rewrite(where)
    lines: list[str] = []
    section, sub, dropping = "", "", False
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.endswith("\\"):
            raise Unreadable(f"line {number} is continued on the next")
        heading = _GIT_SECTION.match(line)
        if stripped.startswith("[") and heading is None:
            raise Unreadable(f"line {number} holds a section heading stockade does not follow")
        if heading:
            section, sub = heading["name"].lower(), re.sub(r"\\(.)", r"\1", heading["sub"] or "")  # git drops a backslash before any character
            label = f"[{section}{' subsection' if sub else ''}]"
            shown_sub = value(rewrite, label, sub) if sub else ""
            dropping = shown_sub is None
            if not dropping:
                lines.append(f"[{section}" + (f' "{_git_quote_sub(shown_sub or "")}"' if sub else "") + "]")
            continue
        if dropping:
            continue
        pair = _GIT_PAIR.match(line)
        if pair is None:
            raise Unreadable(f"line {number} is not a `key = value` git follows")
        key, raw = pair["key"].lower(), pair["value"]
        label = f"{section}{'.<subsection>' if sub else ''}.{key}"
        if raw is None:
            if looks_secret(key):
                rewrite.withhold(f"a key of [{section}]", LOOKS_SECRET)
                continue
            lines.append(f"\t{pair['key']}")
            continue
        content = _git_unquote(raw)
        if (section, key) in GIT_OWN:
            rewrite.withhold(label, GIT_OWN[(section, key)])
            continue
        if section == "http" and key == "extraheader":
            shown = _extra_header(rewrite, label, sub, content)
        elif key in ("helper", "usehttppath", "name", "email", "username", "signingkey", "url", "insteadof", "pushinsteadof"):
            shown = value(rewrite, label, content, words=False)
        else:
            shown = keep(rewrite, label, content)
        if shown is not None:
            lines.append(f"\t{pair['key']} = {_git_quote(shown)}")
    return _finish(rewrite, "".join(line + "\n" for line in lines))


def _extra_header(rewrite: Rewrite, label: str, url: str, content: str) -> str | None:
    header = _AUTHORIZATION.match(content)
    host = url_host(url) if url else None
    if header is None or host is None:
        rewrite.withhold(label, NO_HOST if header is not None else "a header stockade cannot swap")
        return None
    scheme, secret = header["scheme"], header["value"]
    if scheme.lower() == "basic":
        user, colon, password = (_unb64(secret) or "").partition(":")
        if not colon:
            rewrite.withhold(label, "not base64 of user:password")
            return None
        return f"Authorization: {scheme} {rewrite.mark(label, password, (host,), _basic_pair(user))}"
    return f"Authorization: {scheme} {rewrite.mark(label, secret, (host,))}"


def _git_unquote(raw: str) -> str:
    """A value as git reads it: quotes removed, escapes \\\\ \\" \\n \\t \\b, comments cut."""
    out, quoted, index = "", False, 0
    while index < len(raw):
        char = raw[index]
        if char == "\\" and index + 1 < len(raw):
            out += {"n": "\n", "t": "\t", "b": "\b"}.get(raw[index + 1], raw[index + 1])
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char in "#;" and not quoted:
            break
        else:
            out += char
        index += 1
    return out.strip() if not quoted else out


def _git_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _git_quote_sub(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def url_lines(text: str, where: str) -> Rewrite:
    """One URL per line (git's credential store): the user and password of each marked for its host."""
    rewrite = Rewrite(where)
    lines = []
    for number, line in enumerate(_normalised(text).split("\n"), 1):
        if not line.strip():
            continue
        if "://" not in line or not _URL.search(line):
            raise Unreadable(f"line {number} is not a URL with a user")
        shown = value(rewrite, f"line {number}", line.strip())
        if shown is not None:
            lines.append(shown)
    return _finish(rewrite, "".join(line + "\n" for line in lines))


# --- JSON: docker's config.json ---

DOCKER_SECRETS = ("auth", "password", "identitytoken", "registrytoken")


def docker_json(text: str, where: str) -> Rewrite:
    """Registry logins under `auths` are withheld (the docker daemon sends them, not the sandbox's
    network), so are `HttpHeaders`; helpers and every other setting stay, each value gated."""
    import json

    try:
        config = json.loads(text)
    except ValueError:
        raise Unreadable("it is not JSON") from None
    if not isinstance(config, dict):
        raise Unreadable("it is not a JSON object")
    rewrite = Rewrite(where)
    shown = _json_walk(rewrite, config, "")
    return _finish(rewrite, json.dumps(shown, indent="\t") + "\n")


def _json_walk(rewrite: Rewrite, node: Any, path: str) -> Any:
    rewrite.count()
    if isinstance(node, dict):
        out = {}
        for key, item in node.items():
            label = f"{path}.{key}" if path else str(key)
            lowered = str(key).lower()
            if lowered in DOCKER_SECRETS:
                rewrite.withhold(label, "the docker daemon sends registry logins, not the sandbox")
                continue
            if secret_key(str(key)) and not (isinstance(item, str) and item.strip().startswith(("/", "~/"))):
                rewrite.withhold(label, UNKNOWN_SECRET)
                continue
            kept = _json_walk(rewrite, item, label)
            if kept is not _GONE:
                out[key] = kept
        return out
    if isinstance(node, list):
        return [kept for kept in (_json_walk(rewrite, item, path) for item in node) if kept is not _GONE]
    if isinstance(node, str):
        shown = keep(rewrite, path, node)
        return _GONE if shown is None else shown
    return _GONE if looks_secret(str(node)) else node


_GONE = object()


# --- XML: maven's settings.xml ---


def maven_settings(text: str, where: str) -> Rewrite:
    """Each `<server>`'s password and passphrase go to the URL of the mirror or repository with the
    same `<id>` in the file; one with none is withheld, and so is any other text that looks like a
    secret (an `<httpHeaders>` value, a proxy's password, a profile's gpg.passphrase)."""
    import xml.etree.ElementTree as ElementTree

    try:
        root = ElementTree.fromstring(text.encode())
    except ElementTree.ParseError:
        raise Unreadable("it is not well-formed XML") from None
    namespace = root.tag[1:].partition("}")[0] if root.tag.startswith("{") else ""
    if namespace:
        ElementTree.register_namespace("", namespace)
    rewrite = Rewrite(where)
    urls: dict[str, str] = {}
    for element in root.iter():
        if _local(element.tag) in ("mirror", "repository", "pluginRepository"):
            ident, url = _child_text(element, "id"), _child_text(element, "url")
            if ident and url:
                urls.setdefault(ident, url)
    servers = {id(element) for element in root.iter() if _local(element.tag) == "server"}
    parents = {id(child): parent for parent in root.iter() for child in parent}

    def secret_above(element: Any) -> bool:
        while id(element) in parents:
            element = parents[id(element)]
            if secret_key(_local(element.tag)):
                return True
        return False

    for parent in root.iter():
        for element in list(parent):
            tag = _local(element.tag)
            if element.text is None or not element.text.strip() or len(element):
                continue
            label = f"{_local(parent.tag)}.{tag}"
            if secret_above(element):
                rewrite.withhold(label, UNKNOWN_SECRET)
                element.text = ""
                continue
            if id(parent) in servers and tag in ("password", "passphrase"):
                ident = _child_text(parent, "id") or "?"
                host = url_host(urls.get(ident))
                if host is None:
                    rewrite.withhold(f"server {ident} {tag}", NO_HOST)
                    element.text = ""
                else:
                    element.text = rewrite.mark(f"server {ident} {tag}", element.text.strip(), (host,))
                continue
            shown = keep(rewrite, label, element.text)
            element.text = "" if shown is None else shown
    return _finish(rewrite, '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n")


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _child_text(element: Any, name: str) -> str:
    for child in element:
        if _local(child.tag) == name and child.text:
            return str(child.text).strip()
    return ""


# --- YAML: conda's .condarc, yarn's .yarnrc.yml ---

_CONDA_TOKEN = re.compile(r"/t/[^/]+/")
YARN_DEFAULT = "https://registry.yarnpkg.com"
YAML_OWN = {"httpProxy": OWN_PROXY, "httpsProxy": OWN_PROXY, "proxy_servers": OWN_PROXY, "caFilePath": OWN_CA,
            "httpsCaFilePath": OWN_CA, "ssl_verify": OWN_CA, "client_cert": OWN_CA}  # fmt: skip


def yaml(text: str, where: str) -> Rewrite:
    """Read with a YAML safe loader (anchors and flow style as the tool reads them) and written
    anew. yarn's npmAuthToken and npmAuthIdent go to the registry they sit under (an
    npmRegistries key, a scope's or the top npmRegistryServer); a conda channel's `/t/TOKEN/`
    travels in the path, where no placeholder is swapped, so that channel is withheld."""
    import yaml as pyyaml

    try:
        tree = pyyaml.safe_load(_normalised(text))
    except pyyaml.YAMLError:
        raise Unreadable("it is not YAML stockade can read") from None
    if tree is None:
        return _finish(Rewrite(where), "")
    if not isinstance(tree, dict):
        raise Unreadable("it is not a YAML mapping")
    rewrite = Rewrite(where)
    top = tree.get("npmRegistryServer") if isinstance(tree.get("npmRegistryServer"), str) else YARN_DEFAULT
    shown = _yaml_walk(rewrite, tree, "", str(top))
    return _finish(rewrite, pyyaml.safe_dump(shown, sort_keys=False, allow_unicode=True))


def _yaml_walk(rewrite: Rewrite, node: Any, path: str, registry: str | None) -> Any:
    rewrite.count()
    if isinstance(node, dict):
        if isinstance(node.get("npmRegistryServer"), str) and path:
            registry = node["npmRegistryServer"]
        out = {}
        for key, item in node.items():
            label = f"{path}.{key}" if path else str(key)
            if str(key) in YAML_OWN:
                rewrite.withhold(label, YAML_OWN[str(key)])
                continue
            inner = registry
            if path.rsplit(".", 1)[-1] == "npmRegistries":
                inner = str(key) if "://" in str(key) else f"https:{key}"
            elif path.rsplit(".", 1)[-1] == "npmScopes":
                inner = None  # a scope's registry is its own npmRegistryServer, or none
            if key in ("npmAuthToken", "npmAuthIdent") and not isinstance(item, (dict, list)):
                item = str(item)
                host = url_host(registry)
                if host is None:
                    rewrite.withhold(label, NO_HOST)
                    continue
                if key == "npmAuthIdent":
                    user, colon, password = item.partition(":")
                    if not colon:
                        rewrite.withhold(label, "not user:password")
                        continue
                    out[key] = f"{user}:{rewrite.mark(label, password, (host,))}"
                else:
                    out[key] = rewrite.mark(label, item, (host,))
                continue
            if secret_key(str(key)) and not (isinstance(item, str) and item.strip().startswith(("/", "~/"))):
                rewrite.withhold(label, UNKNOWN_SECRET)
                continue
            kept = _yaml_walk(rewrite, item, label, inner)
            if kept is not _GONE:
                out[key] = kept
        return out
    if isinstance(node, list):
        return [kept for kept in (_yaml_walk(rewrite, item, path, registry) for item in node) if kept is not _GONE]
    if isinstance(node, str):
        if _CONDA_TOKEN.search(node) and "://" in node:
            rewrite.withhold(f"{path} (a channel with a token)", "the token travels in the path")
            return _GONE
        shown = keep(rewrite, path, node)
        return _GONE if shown is None else shown
    if isinstance(node, (bytes, bytearray)) or looks_secret(str(node)):
        rewrite.withhold(path, LOOKS_SECRET)
        return _GONE
    return node


def _finish(rewrite: Rewrite, text: str) -> Rewrite:
    rewrite.text = text
    return rewrite
