"""Find the secrets in a tool's own configuration file, and write the file without them.

Each reader takes a file's text and returns a `Rewrite`: the text with every
secret replaced by a mark, and for each mark the value, the hosts it belongs
to and how its placeholder is spelled in the file (a Basic pair is base64 of
"user:" and the placeholder). profiles/toolconfig.py puts a per-run
placeholder at each mark; the proxy daemon swaps it back only on requests
to those hosts, as it does for `[credentials]` (proxy/inject.py).

What no host can be named for (a token in a properties file, a `default`
netrc entry), and a proxy of the tool's own (inside, stockade's filter is
the proxy), is withheld: removed, and named in `Rewrite.withheld`. Keys that
look like secrets but that no reader knows are withheld too: a file is shown
without what might be a secret rather than with it. A file a reader cannot
follow raises `Unreadable`, and is then hidden whole.

Readers work line by line on the file's own text, so everything else in it
(comments, order, spelling) reaches the tool unchanged; the file is parsed
as a whole only to check the result where a parser is at hand.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

MARK = "\x00stockade-secret-{}\x00"  # no configuration file holds a NUL


class Unreadable(ValueError):
    """The file is not in a form its reader can follow: it is hidden whole."""


class Found:
    """One secret: `key` names where it was (never the value), `spell` writes a placeholder as the file holds it."""

    __slots__ = ("key", "value", "hosts", "spell")

    def __init__(self, key: str, value: str, hosts: tuple[str, ...], spell: Callable[[str], str] | None = None) -> None:
        self.key = key
        self.value = value
        self.hosts = hosts
        self.spell = spell or (lambda placeholder: placeholder)

    def __repr__(self) -> str:
        return f"Found({self.key!r}, hosts={self.hosts!r})"


class Rewrite:
    """A file's text with marks where its secrets were, what they were, and what was left out."""

    def __init__(self) -> None:
        self.text = ""
        self.found: list[Found] = []
        self.withheld: list[str] = []

    def mark(self, found: Found) -> str:
        self.found.append(found)
        return MARK.format(len(self.found) - 1)

    def withhold(self, key: str, why: str) -> None:
        self.withheld.append(f"{key} ({why})")


# Keys that name a secret in any of these formats; a reader that knows better handles its own first.
SECRET_KEY = re.compile(r"(pass(word|wd|phrase)?|token|secret|_auth|auth[-_]?ident|api[-_]?key|access[-_]?key|private[-_]?key|credential)", re.I)
NO_HOST = "no host it belongs to is named"
OWN_PROXY = "a proxy of the tool's own: inside, stockade's filter is the proxy"


# --- URLs with a password in them (pip, uv, poetry, conda, git, git-credentials, npm's registry) ---

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<user>[^\s/@:'\"<>]*)(?::(?P<password>[^\s/@'\"<>]*))?@(?P<host>[^\s/'\"?#<>]+)")
LONE_USER_TOKEN = 20  # a user name alone this long is taken for a token (https://TOKEN@host/)


def host_rule(scheme: str, host: str) -> str:
    """The `[network]` rule a URL's secret may travel to: its host and port (the scheme's if none)."""
    scheme = scheme.lower().rsplit("+", 1)[-1]
    try:
        parts = urlsplit(f"{scheme}://{host}")
        name, port = parts.hostname, parts.port
    except ValueError:
        raise Unreadable(f"the address {host!r} cannot be read") from None
    if not name or ":" in name:
        raise Unreadable(f"the address {host!r} cannot be read")
    return f"{name}:{port or (80 if scheme == 'http' else 443)}"


def urls(line: str, rewrite: Rewrite, where: str) -> str:
    """Every URL in `line` with a password (or a user name that is a token) gets a mark for it."""

    def one(match: re.Match[str]) -> str:
        scheme, user, password, host = match["scheme"], match["user"], match["password"], match["host"]
        if scheme.lower().rsplit("+", 1)[-1] not in ("http", "https"):
            return match[0]
        if password:
            found = Found(f"{where}: the password in {scheme}://{user}:…@{host}", unquote(password), (host_rule(scheme, host),))
            return f"{scheme}://{user}:{rewrite.mark(found)}@{host}"
        if len(user) >= LONE_USER_TOKEN:
            found = Found(f"{where}: the token in {scheme}://…@{host}", unquote(user), (host_rule(scheme, host),))
            return f"{scheme}://{rewrite.mark(found)}@{host}"
        return match[0]

    return _URL.sub(one, line)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _basic_pair(user: str) -> Callable[[str], str]:
    """How a placeholder is spelled where a file keeps base64 of "user:password"."""
    return lambda placeholder: _b64(f"{user}:{placeholder}")


def _unb64(value: str) -> str | None:
    try:
        return base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _unquote_value(value: str) -> tuple[str, str]:
    """(the value without its quotes, the quote character or "")."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1], value[0]
    return value, ""


# --- npm, pnpm and yarn 1: .npmrc, .yarnrc ---

_NERF = re.compile(r"^//(?P<host>[^/]+)(?P<path>/.*)?:(?P<name>[^:/]+)$")
NPM_DEFAULT = "https://registry.npmjs.org/"
NPM_PROXY_KEYS = {"proxy", "https-proxy", "http-proxy"}


def npmrc(text: str, where: str, spaced: bool = False) -> Rewrite:
    """`key=value` lines (`key value` for .yarnrc); a token is `//host/path/:_authToken`, or bare
    `_authToken` for the default registry; `_auth` is base64 of user:password, `_password` base64."""
    rewrite = Rewrite()
    registry = NPM_DEFAULT
    parsed = [_npm_line(line, spaced) for line in text.split("\n")]
    for key, value in (pair for pair in parsed if pair is not None):
        if key == "registry":
            registry = _unquote_value(value)[0]
    lines = []
    for number, (line, pair) in enumerate(zip(text.split("\n"), parsed, strict=True), 1):
        if pair is None:
            lines.append(line)
            continue
        key, raw = pair
        if not raw and (" " if spaced else "=") not in line.strip():
            rewrite.withhold(f"{where}: line {number}", "a lone word, which may be a secret")
            continue
        value, quote = _unquote_value(raw)
        nerf = _NERF.match(key)
        name = nerf["name"] if nerf else key
        if "${" in value:  # the value is read from the environment when npm runs: no secret here
            lines.append(line)
        elif key.lower() in NPM_PROXY_KEYS:
            rewrite.withhold(f"{where}: {key}", OWN_PROXY)
        elif name in ("_authToken", "_auth", "_password"):
            spelled = _npm_secret(rewrite, where, key, name, value, nerf["host"] if nerf else None, registry)
            if spelled is None:
                continue
            separator = " " if spaced else "="
            lines.append(f"{key}{separator}{quote}{spelled}{quote}")
        elif name in ("username", "email", "certfile", "keyfile", "always-auth") or not SECRET_KEY.search(name):
            lines.append(urls(line, rewrite, where))
        else:
            rewrite.withhold(f"{where}: {key}", "not a kind of secret stockade knows where to send")
    return _finish(rewrite, "\n".join(lines))


def _npm_line(line: str, spaced: bool) -> tuple[str, str] | None:
    stripped = line.strip()
    if not stripped or stripped[0] in "#;[":
        return None
    if not spaced and "=" not in stripped:
        return stripped, ""  # npm reads a bare word as a flag set to true
    if spaced:
        key, _, value = stripped.partition(" ")
        return _unquote_value(key)[0], value
    key, _, value = stripped.partition("=")
    return _unquote_value(key.strip())[0], value


def _npm_secret(rewrite: Rewrite, where: str, key: str, name: str, value: str, host: str | None, registry: str) -> str | None:
    if host is None:
        parts = urlsplit(registry)
        host, scheme = parts.netloc.rpartition("@")[2], parts.scheme or "https"
    else:
        scheme = "https"
    hosts = (host_rule(scheme, host),)
    label = f"{where}: {key}"
    if name == "_authToken":
        return rewrite.mark(Found(label, value, hosts))
    decoded = _unb64(value)
    if decoded is None:
        rewrite.withhold(label, "not base64 as npm writes it")
        return None
    if name == "_password":
        return rewrite.mark(Found(label, decoded, hosts, _b64))
    user, colon, password = decoded.partition(":")
    if not colon:
        rewrite.withhold(label, "not user:password as npm writes it")
        return None
    return rewrite.mark(Found(label, password, hosts, _basic_pair(user)))


# --- ini files: pip.conf, .pypirc ---

PYPI_UPLOAD = {"pypi": "https://upload.pypi.org/legacy/", "testpypi": "https://test.pypi.org/legacy/"}


def ini(text: str, where: str) -> Rewrite:
    """pip.conf and .pypirc: `[section]`, `key = value` and indented continuation lines. Passwords
    in URLs are marked; a .pypirc `password` goes to its section's `repository` (PyPI's by name)."""
    import configparser

    try:
        configparser.RawConfigParser(strict=False, interpolation=None).read_string(text)
    except configparser.Error as exc:
        raise Unreadable(f"it is not an INI file ({exc.message.splitlines()[0]})") from None
    rewrite = Rewrite()
    sections = _ini_sections(text)
    lines: list[str] = []
    section, dropping = "", False
    for line in text.split("\n"):
        stripped = line.strip()
        if dropping and line[:1] in (" ", "\t") and stripped:
            continue  # a continuation of a withheld value
        dropping = False
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
            lines.append(line)
            continue
        match = re.match(r"^(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*)$", line) if line[:1] not in (" ", "\t", "#", ";") else None
        if match is None:
            lines.append(urls(line, rewrite, where))
            continue
        key, value = match["key"].strip(), match["value"].strip()
        label = f"{where}: [{section}] {key}"
        if key.lower() == "proxy":
            rewrite.withhold(label, OWN_PROXY)
            dropping = True
        elif key.lower() == "password" and value:
            url = sections.get(section, {}).get("repository") or PYPI_UPLOAD.get(section)
            if url is None:
                rewrite.withhold(label, NO_HOST)
                dropping = True
                continue
            parts = urlsplit(url)
            found = Found(label, value, (host_rule(parts.scheme or "https", parts.netloc.rpartition("@")[2]),))
            lines.append(f"{match['key']} = {rewrite.mark(found)}")
        elif SECRET_KEY.search(key) and value and key.lower() not in ("client-cert", "cert", "trusted-host"):
            rewrite.withhold(label, "not a kind of secret stockade knows where to send")
            dropping = True
        else:
            lines.append(urls(line, rewrite, where))
    return _finish(rewrite, "\n".join(lines))


def _ini_sections(text: str) -> dict[str, dict[str, str]]:
    sections: dict[str, dict[str, str]] = {}
    current = sections.setdefault("", {})
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = sections.setdefault(stripped[1:-1].strip(), {})
        elif "=" in stripped and line[:1] not in (" ", "\t", "#", ";"):
            key, _, value = stripped.partition("=")
            current[key.strip().lower()] = value.strip()
    return sections


# --- TOML: uv, cargo, poetry ---

_TABLE = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(#.*)?$")
_PAIR = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.\"' -]+?)\s*=\s*(?P<value>.*)$")
CRATES_IO = "crates.io:443"


def toml(text: str, where: str, hosts_of: Callable[[str, str], str | None] | None = None) -> Rewrite:
    """uv.toml, cargo's config and credentials, poetry's config and auth: `[table]` and one-line
    `key = "string"` pairs. `hosts_of(table, key)` names the host a table's secret goes to (cargo's
    registries and poetry's repositories are named in another file); secrets it has no host for
    are withheld. Multi-line strings and inline tables holding a secret make the file unreadable."""
    import tomllib

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"it is not TOML ({exc})") from None
    rewrite = Rewrite()
    lines: list[str] = []
    table = ""
    for line in text.split("\n"):
        if '"""' in line or "'''" in line:
            raise Unreadable("it holds a multi-line string")
        heading = _TABLE.match(line)
        if heading:
            table = ".".join(part.strip().strip("\"'") for part in heading["name"].split("."))
            lines.append(urls(line, rewrite, where))
            continue
        pair = _PAIR.match(line)
        if pair is None or line.lstrip().startswith("#"):
            lines.append(urls(line, rewrite, where))
            continue
        key = pair["key"].strip().strip("\"'")
        label = f"{where}: {f'[{table}] ' if table else ''}{key}"
        if not SECRET_KEY.search(key) and not (table.startswith("pypi-token") and key):
            if key == "proxy":
                rewrite.withhold(label, OWN_PROXY)
                continue
            if "{" in pair["value"] and SECRET_KEY.search(pair["value"]):
                raise Unreadable(f"{label} is an inline table with a secret in it")
            lines.append(urls(line, rewrite, where))
            continue
        try:
            value = tomllib.loads(f"v = {pair['value']}")["v"]
        except tomllib.TOMLDecodeError:
            raise Unreadable(f"{label} cannot be read") from None
        if not isinstance(value, str):
            raise Unreadable(f"{label} is not a string")
        host = hosts_of(table, key) if hosts_of is not None else None
        if host is None:
            rewrite.withhold(label, NO_HOST)
            continue
        lines.append(f'{pair["indent"]}{pair["key"]} = "{rewrite.mark(Found(label, value, (host,)))}"')
    shown = "\n".join(lines)
    try:
        tomllib.loads(shown.replace("\x00", ""))
    except tomllib.TOMLDecodeError:
        raise Unreadable("it could not be written without its secrets as TOML") from None
    return _finish(rewrite, shown)


def toml_tables(text: str) -> dict[str, dict[str, object]]:
    """The tables of another file a reader takes hosts from; {} when it cannot be parsed."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def url_host(url: object) -> str | None:
    """The host rule of a URL given in a configuration file (cargo's `sparse+https://...` too)."""
    if not isinstance(url, str) or "://" not in url:
        return None
    scheme, _, rest = url.partition("://")
    try:
        return host_rule(scheme, rest.split("/", 1)[0].rpartition("@")[2])
    except Unreadable:
        return None


# --- properties: gradle.properties ---


def properties(text: str, where: str) -> Rewrite:
    """`key=value`, `key: value` or `key value` lines; a secret's host is never named here, so each is withheld."""
    rewrite = Rewrite()
    lines: list[str] = []
    continued = False
    for number, line in enumerate(text.split("\n"), 1):
        if continued:
            continued = line.rstrip().endswith("\\")
            continue
        stripped = line.strip()
        key = re.split(r"\s*[=:\s]\s*", stripped, maxsplit=1)[0] if stripped and stripped[0] not in "#!" else ""
        if key and SECRET_KEY.search(key):
            rewrite.withhold(f"{where}: {key}", NO_HOST)
            continued = stripped.endswith("\\")
            continue
        if key and key == stripped:
            rewrite.withhold(f"{where}: line {number}", "a lone word, which may be a secret")
            continue
        lines.append(urls(line, rewrite, where))
    return _finish(rewrite, "\n".join(lines))


# --- netrc ---


def netrc(text: str, where: str) -> Rewrite:
    """`machine HOST login USER password SECRET` (curl, git, pip, requests); a `default` entry's password has no host."""
    if re.search(r"(^|\s)macdef(\s|$)", text):
        raise Unreadable("it defines a macro (macdef)")
    rewrite = Rewrite()
    tokens = re.split(r"(\s+)", text)
    machine: str | None = None
    out: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        out.append(token)
        if token in ("machine", "default"):
            machine = None
            if token == "machine" and index + 2 < len(tokens):
                out += [tokens[index + 1], tokens[index + 2]]
                machine = tokens[index + 2]
                index += 2
        elif token in ("login", "account", "port") and index + 2 < len(tokens):
            out += [tokens[index + 1], tokens[index + 2]]
            index += 2
        elif token.strip() and token not in ("password",):
            raise Unreadable(f"it holds a word netrc does not know ({len(token)} characters)")
        elif token == "password" and index + 2 < len(tokens):
            label = f"{where}: the password of {f'machine {machine}' if machine else 'the default entry'}"
            value = _unquote_value(tokens[index + 2])[0]
            if machine is None:
                rewrite.withhold(label, NO_HOST)
                out += [tokens[index + 1], '""']
            else:
                out += [tokens[index + 1], rewrite.mark(Found(label, value, (machine,)))]
            index += 2
        index += 1
    return _finish(rewrite, "".join(out))


# --- git: config and the store helper's file ---

_GIT_SECTION = re.compile(r'^\s*\[\s*(?P<name>[A-Za-z0-9.-]+)(\s+"(?P<sub>(?:[^"\\]|\\.)*)")?\s*\]')
_EXTRA_HEADER = re.compile(
    r"^(?P<head>\s*extraheader\s*=\s*\"?\s*authorization\s*:\s*)(?P<scheme>[A-Za-z]+)\s+(?P<value>[^\s\"]+)(?P<tail>\"?\s*)$", re.I
)


def gitconfig(text: str, where: str) -> Rewrite:
    """Passwords in URLs (`url.<base>.insteadOf` sections included), and `http.<url>.extraHeader =
    Authorization: ...` for its URL's host; an extraHeader for every host is withheld."""
    from stockade.profiles.gitconfig import ConfigSyntaxError, parse

    try:
        parse(text)
    except ConfigSyntaxError as exc:
        raise Unreadable(f"git would refuse it ({exc})") from None
    rewrite = Rewrite()
    lines: list[str] = []
    section, sub = "", ""
    for line in text.split("\n"):
        heading = _GIT_SECTION.match(line)
        if heading:
            section, sub = heading["name"].lower(), heading["sub"] or ""
            lines.append(urls(line, rewrite, where))
            continue
        key = line.strip().split("=", 1)[0].strip().lower()
        if key and "=" not in line and not key.startswith(("#", ";")) and (re.search(r"[\d_]", key) or len(key) > LONE_USER_TOKEN):
            rewrite.withhold(f"{where}: a key without a value in [{section}]", "a lone word that looks like a token")
            continue
        if section == "http" and key == "extraheader":
            header = _EXTRA_HEADER.match(line)
            host = url_host(sub) if sub else None
            label = f"{where}: http{f' {sub!r}' if sub else ''}.extraHeader"
            if header is None or host is None:
                rewrite.withhold(label, NO_HOST if header is not None else "not an Authorization header stockade can swap")
                continue
            value, scheme = header["value"], header["scheme"]
            if scheme.lower() == "basic":
                decoded = _unb64(value)
                user, colon, password = (decoded or "").partition(":")
                if not colon:
                    rewrite.withhold(label, "not base64 of user:password")
                    continue
                mark = rewrite.mark(Found(label, password, (host,), _basic_pair(user)))
            else:
                mark = rewrite.mark(Found(label, value, (host,)))
            lines.append(f"{header['head']}{scheme} {mark}{header['tail']}")
            continue
        if key and not key.startswith(("#", ";")) and SECRET_KEY.search(key) and "=" in line and key not in ("helper", "usehttppath"):
            rewrite.withhold(f"{where}: {section}.{key}", "not a kind of secret stockade knows where to send")
            continue
        lines.append(urls(line, rewrite, where))
    return _finish(rewrite, "\n".join(lines))


def url_lines(text: str, where: str) -> Rewrite:
    """One URL per line (git's credential store): each password marked for its URL's host."""
    rewrite = Rewrite()
    lines = text.split("\n")
    if any(line.strip() and "://" not in line for line in lines):
        raise Unreadable("a line in it is not a URL")
    return _finish(rewrite, "\n".join(urls(line, rewrite, where) for line in lines))


# --- JSON: docker's config.json ---

DOCKER_SECRETS = ("auth", "password", "identitytoken", "registrytoken")


def docker_json(text: str, where: str) -> Rewrite:
    """Registry logins under `auths` are withheld: the docker daemon, not the sandbox's network,
    sends them (so no placeholder would ever be swapped); helpers and every other setting stay."""
    import json

    try:
        config = json.loads(text)
    except ValueError:
        raise Unreadable("it is not JSON") from None
    if not isinstance(config, dict):
        raise Unreadable("it is not a JSON object")
    rewrite = Rewrite()
    auths = config.get("auths")
    if isinstance(auths, dict):
        for registry, entry in auths.items():
            if isinstance(entry, dict):
                for key in [k for k in entry if k.lower() in DOCKER_SECRETS]:
                    del entry[key]
                    rewrite.withhold(f"{where}: auths.{registry}.{key}", "the docker daemon sends registry logins, not the sandbox")
    return _finish(rewrite, json.dumps(config, indent="\t") + "\n")


# --- XML: maven's settings.xml ---

_SERVER = re.compile(r"<server>(?P<body>.*?)</server>", re.S)
_ELEMENT = "<{0}>(?P<value>[^<]*)</{0}>"


def maven_settings(text: str, where: str) -> Rewrite:
    """Each `<server>`'s password and passphrase go to the URL of the mirror or repository with
    the same `<id>` in the file; one with none is withheld."""
    import html
    import xml.etree.ElementTree as ElementTree

    try:
        ElementTree.fromstring(text.encode())
    except ElementTree.ParseError:
        raise Unreadable("it is not well-formed XML") from None
    rewrite = Rewrite()
    urls_by_id = _maven_urls(text)

    def server(match: re.Match[str]) -> str:
        body = match["body"]
        ident = re.search(_ELEMENT.format("id"), body)
        name = html.unescape(ident["value"].strip()) if ident else "?"
        host = url_host(urls_by_id.get(name))
        for element in ("password", "passphrase"):
            found = re.search(_ELEMENT.format(element), body)
            if found is None or not found["value"].strip():
                continue
            label = f"{where}: server {name} {element}"
            if host is None:
                rewrite.withhold(label, NO_HOST)
                replacement = f"<{element}></{element}>"
            else:
                replacement = f"<{element}>{rewrite.mark(Found(label, html.unescape(found['value'].strip()), (host,)))}</{element}>"
            body = body[: found.start()] + replacement + body[found.end() :]
        return f"<server>{body}</server>"

    return _finish(rewrite, _SERVER.sub(server, text))


def _maven_urls(text: str) -> dict[str, str]:
    import html

    found: dict[str, str] = {}
    for block in re.finditer(r"<(mirror|repository|pluginRepository)>(?P<body>.*?)</\1>", text, re.S):
        ident = re.search(_ELEMENT.format("id"), block["body"])
        url = re.search(_ELEMENT.format("url"), block["body"])
        if ident and url:
            found.setdefault(html.unescape(ident["value"].strip()), html.unescape(url["value"].strip()))
    return found


# --- YAML, read by lines: conda's .condarc, yarn's .yarnrc.yml ---

_YAML_PAIR = re.compile(r"^(?P<indent>\s*)(?P<dash>-\s+)?(?P<key>[\"']?[^\"'#:]+[\"']?|[\"'][^\"']*[\"'])\s*:(?:\s+(?P<value>.*?))?\s*$")
_CONDA_TOKEN = re.compile(r"/t/[A-Za-z0-9_-]{16,}/")
YARN_DEFAULT = "https://registry.yarnpkg.com"


def yaml_lines(text: str, where: str) -> Rewrite:
    """`key: value` lines by their indentation. yarn's npmAuthToken and npmAuthIdent go to the
    registry they sit under (npmRegistries' key, a scope's or the top npmRegistryServer); a
    conda channel's `/t/TOKEN/` travels in the path, where no placeholder is swapped, so its
    line is withheld; a proxy of the tool's own is withheld with its block."""
    if "\t" in text.replace("\n\t", "\n").split("\n", 1)[0] or re.search(r"(^|\n)\s*[|>][-+]?\s*$|:\s*[|>][-+]?\s*(\n|$)", text):
        raise Unreadable("it has a block scalar")
    rewrite = Rewrite()
    top_registry = YARN_DEFAULT
    for line in text.split("\n"):
        pair = _YAML_PAIR.match(line)
        if pair and not pair["indent"] and pair["key"].strip("\"'") == "npmRegistryServer" and pair["value"]:
            top_registry = pair["value"].strip("\"'")
    lines: list[str] = []
    stack: list[tuple[int, str, str | None]] = []  # (indent, key, the registry that block names)
    dropping: int | None = None
    for line in text.split("\n"):
        pair = _YAML_PAIR.match(line)
        indent = len(pair["indent"]) if pair else None
        if dropping is not None:
            inside_block = indent > dropping if indent is not None else line[:1] in (" ", "-")
            if line.strip() == "" or line.lstrip().startswith("#") or inside_block:
                continue
            dropping = None
        if pair is None and line.strip() and not line.lstrip().startswith(("#", "- ", "---")) and line.strip() != "-":
            raise Unreadable("a line in it is neither `key: value` nor a list item")
        if pair is None:
            if _CONDA_TOKEN.search(line):
                rewrite.withhold(f"{where}: {line.strip().lstrip('- ').split('/t/')[0]}/t/…", "the token travels in the path")
                continue
            lines.append(urls(line, rewrite, where))
            continue
        assert indent is not None
        key = pair["key"].strip().strip("\"'")
        value = (pair["value"] or "").strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        registry = next((named for _i, _k, named in reversed(stack) if named), None)
        if key == "npmRegistryServer" and stack:
            stack[-1] = (stack[-1][0], stack[-1][1], value.strip("\"'"))
        label = f"{where}: {'.'.join([*(k for _i, k, _n in stack), key])}"
        if key in ("httpProxy", "httpsProxy", "proxy_servers", "proxy"):
            rewrite.withhold(label, OWN_PROXY)
            dropping = indent
            continue
        if value and _CONDA_TOKEN.search(value):
            rewrite.withhold(label, "the token travels in the path")
            continue
        named = key if "://" in key or key.startswith("//") else None
        stack.append((indent, key, named))
        if key in ("npmAuthToken", "npmAuthIdent") and value:
            secret, quote = _unquote_value(value)
            server = registry or (top_registry if not any(k == "npmScopes" for _i, k, _n in stack) else None)
            host = url_host(server if server is None or "://" in server else f"https:{server}")
            if host is None:
                rewrite.withhold(label, NO_HOST)
                continue
            if key == "npmAuthIdent":
                user, colon, password = secret.partition(":")
                if not colon:
                    rewrite.withhold(label, "not user:password")
                    continue
                mark = f"{user}:{rewrite.mark(Found(label, password, (host,)))}"
            else:
                mark = rewrite.mark(Found(label, secret, (host,)))
            lines.append(f"{pair['indent']}{pair['dash'] or ''}{pair['key']}: {quote}{mark}{quote}")
            continue
        if value and SECRET_KEY.search(key):
            rewrite.withhold(label, "not a kind of secret stockade knows where to send")
            continue
        lines.append(urls(line, rewrite, where))
    return _finish(rewrite, "\n".join(lines))


def _finish(rewrite: Rewrite, text: str) -> Rewrite:
    rewrite.text = text
    return rewrite
