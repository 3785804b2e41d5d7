"""The user's own tool configuration inside the sandbox, without its secrets.

A private home shows only what the policy names, and the deny list hides the
files that hold tokens (~/.npmrc). Both made a tool inside read other settings
than outside: a company registry or a private index in pip.conf silently
dropped, and the public index used instead. So each file in `TOOL_FILES` that
exists in the user's home is shown at its own path, as a private copy whose
secrets are replaced by placeholders made for the run (profiles/secretforms.py
finds them). The proxy daemon swaps a placeholder back only on requests to the
host that secret belongs to, over TLS, as it does for `[credentials]`; a
secret with no host to name is withheld. A file that cannot be read this way
is hidden whole, and the run says so in one line.

`[filesystem] tool_config = false` turns this off: the files are then hidden
as before (a file under a folder the policy hides, such as ~/.config/gh, is
never shown). The values are read at each run, never stored in a plan.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence

from stockade.profiles import secretforms as forms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stockade.profiles.credentials import Resolved
    from stockade.profiles.model import Policy

MAX_BYTES = 1 << 20
MAX_INCLUDES = 32  # files git's config names (includes, a credential store) followed at most
PLACEHOLDER = "stockade-placeholder-file-"


class ToolFile:
    """One configuration file, relative to the home, and the reader for its format."""

    __slots__ = ("path", "tools", "reader")

    def __init__(self, path: str, tools: str, reader: str) -> None:
        self.path = path
        self.tools = tools
        self.reader = reader


TOOL_FILES = (
    ToolFile(".config/pip/pip.conf", "pip", "ini"),
    ToolFile(".pip/pip.conf", "pip", "ini"),
    ToolFile(".pypirc", "twine", "ini"),
    ToolFile(".config/uv/uv.toml", "uv", "toml"),
    ToolFile(".config/pypoetry/config.toml", "poetry", "poetry"),
    ToolFile(".config/pypoetry/auth.toml", "poetry", "poetry"),
    ToolFile(".npmrc", "npm, pnpm", "npmrc"),
    ToolFile(".yarnrc", "yarn 1", "yarnrc"),
    ToolFile(".yarnrc.yml", "yarn", "yaml"),
    ToolFile(".condarc", "conda", "yaml"),
    ToolFile(".cargo/config.toml", "cargo", "cargo"),
    ToolFile(".cargo/config", "cargo", "cargo"),
    ToolFile(".cargo/credentials.toml", "cargo", "cargo"),
    ToolFile(".cargo/credentials", "cargo", "cargo"),
    ToolFile(".m2/settings.xml", "maven", "maven"),
    ToolFile(".gradle/gradle.properties", "gradle", "properties"),
    ToolFile(".docker/config.json", "docker", "docker"),
    ToolFile(".gitconfig", "git", "git"),
    ToolFile(".config/git/config", "git", "git"),
    ToolFile(".git-credentials", "git", "urls"),
    ToolFile(".config/git/credentials", "git", "urls"),
    ToolFile(".netrc", "curl, git, pip", "netrc"),
)


def candidates(home: str, real_home: str, denied: Iterable[str], default_denied: Iterable[str] = ()) -> list[tuple[str, str, str]]:
    """(path inside, real path, table path) of each table file a run may show. Not one under a
    folder the policy hides (~/.config/gh), nor one a deny entry of the user's or the project's
    own names (the file, or a glob such as ~/.m2/**): only the built-in default's entries for
    these files are what this view replaces. Whether each exists is seen at the run."""
    import fnmatch

    from stockade.profiles.paths import is_within  # planning only: its pathlib import stays off a run's path

    if home in ("", "/") or real_home in ("", "/"):
        return []
    builtin = set(default_denied)
    found = []
    for entry in TOOL_FILES:
        inside = os.path.join(home, entry.path)
        hidden = False
        for place in denied:
            if "*" in place:
                hidden = hidden or fnmatch.fnmatchcase(inside, place) and place not in builtin
            elif is_within(inside, place):
                hidden = hidden or inside != place or place not in builtin
        if not hidden:
            found.append((inside, os.path.join(real_home, entry.path), entry.path))
    return found


def policy_files(policy: Policy, home: str) -> list[tuple[str, str, str]]:
    """`candidates` for a policy and the home as spelled: none with `tool_config = false`."""
    home = home.rstrip("/")
    if not policy.filesystem.tool_config or not home:
        return []
    builtin = default_denied(home, str(policy.project_dir))
    return candidates(home, os.path.realpath(home), policy.filesystem.deny_read, builtin)


def default_denied(home: str, project: str) -> list[str]:
    """The built-in default profile's deny entries, as they read for this home."""
    from pathlib import Path

    from stockade.profiles.loader import load_builtin

    layer = load_builtin("default", project_dir=Path(project), home=Path(home))
    return list(layer.values.get("filesystem", {}).get("deny_read", ()))


class Shown:
    """One file as the sandbox gets it."""

    __slots__ = ("path", "data", "tools", "secrets", "withheld", "sources")

    def __init__(self, path: str, data: bytes, tools: str, secrets: list[str], withheld: list[str], sources: Sequence[str] = ()) -> None:
        self.path = path
        self.data = data
        self.tools = tools
        self.secrets = secrets  # where each replaced secret was, and its hosts (never a value)
        self.withheld = withheld
        self.sources = list(sources)  # withheld settings that say where the tool fetches from


class ToolView:
    """What one run shows of the user's tool configuration."""

    def __init__(self) -> None:
        self.shown: list[Shown] = []
        self.hidden: list[tuple[str, str]] = []  # (path, why)
        self.credentials: list[Resolved] = []  # for the daemon: each placeholder, its value and hosts


def read(files: Iterable[tuple[str, str, str]]) -> ToolView:
    """Each existing file of `files` (from `candidates`), read now, with its secrets made placeholders."""
    view = ToolView()
    present = [(inside, real, path) for inside, real, path in files if os.path.lexists(real)]
    if not present:
        return view
    texts = {path: _text(real) for _inside, real, path in present}
    by_path = {entry.path: entry for entry in TOOL_FILES}
    present += _git_related(present, texts, by_path)
    for inside, _real, path in present:
        text, entry = texts[path], by_path.get(path)
        if entry is None:
            continue  # a plan stored by another version of the table
        if isinstance(text, _Why):
            if text.why:
                view.hidden.append((inside, text.why))
            continue
        try:
            rewrite = _reader(entry.reader, texts)(text, path if path.startswith(("/", "~/")) else "~/" + path)
        except forms.Unreadable as why:
            view.hidden.append((inside, str(why)))
            continue
        except Exception as exc:  # noqa: BLE001 - a reader's fault hides the file, never ends the run
            view.hidden.append((inside, f"stockade could not read it ({type(exc).__name__})"))
            continue
        shown = _placed(rewrite, inside, entry.tools, view)
        if shown is None:
            view.hidden.append((inside, "a secret in it could not be told from the rest"))
            continue
        view.shown.append(shown)
    return view


def _git_related(present: list[tuple[str, str, str]], texts: dict[str, str | _Why], by_path: dict[str, ToolFile]) -> list[tuple[str, str, str]]:
    """The files git's config makes git read too: what `include.path` and `includeIf.*.path` name
    (read as git config) and a `store --file` credential helper's file (one URL per line), each
    read here and shown the same way, wherever it is. Their names join `texts` and `by_path`."""
    from stockade.profiles.gitconfig import ConfigSyntaxError, parse

    found: list[tuple[str, str, str]] = []
    queue = [(inside, real, path) for inside, real, path in present if by_path[path].reader == "git" if path in by_path]
    seen = {real for _inside, real, _path in present}
    while queue and len(found) < MAX_INCLUDES:
        inside, real, path = queue.pop(0)
        text = texts.get(path)
        if not isinstance(text, str):
            continue
        try:
            entries = parse(text)
        except ConfigSyntaxError:
            continue
        home_inside, home_real = inside[: len(inside) - len(path) - 1] if inside.endswith(path) else "", real[: len(real) - len(path) - 1]
        for name, value in entries:
            if name == "include.path" or name.startswith("includeif.") and name.endswith(".path"):
                reader, target = "git", value
            elif name.startswith("credential.") and name.endswith(".helper") and value.split()[:1] == ["store"]:
                reader, target = "urls", _store_file(value)
            else:
                continue
            if not target:
                continue
            target_real = os.path.join(home_real, target[2:]) if target.startswith("~/") else os.path.join(os.path.dirname(real), target)
            target_real = os.path.normpath(target_real)
            if target_real in seen:
                continue
            seen.add(target_real)
            below = home_real and target_real.startswith(home_real + "/")
            target_inside = home_inside + target_real[len(home_real) :] if below and home_inside else target_real
            key = "~/" + target_real[len(home_real) + 1 :] if below else target_real  # its name in messages
            by_path[key] = ToolFile(key, "git", reader)
            texts[key] = _text(target_real)
            item = (target_inside, target_real, key)
            if os.path.lexists(target_real):
                found.append(item)
                if reader == "git":
                    queue.append(item)
    return found


def _store_file(helper: str) -> str:
    """The file of a `store` credential helper: its --file, else none (the default is in the table)."""
    import shlex

    try:
        words = shlex.split(helper)
    except ValueError:
        return ""
    for index, word in enumerate(words):
        if word.startswith("--file="):
            return word.partition("=")[2]
        if word == "--file" and index + 1 < len(words):
            return words[index + 1]
    return ""


class _Why:
    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _text(path: str) -> str | _Why:
    """The file's text; a FIFO, a device or a huge file is never read (a run must not hang on one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return _Why("")  # a link to nothing
    except OSError as exc:
        return _Why(f"it cannot be read ({exc.strerror})")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _Why("it is not a regular file")
        if info.st_size > MAX_BYTES:
            return _Why(f"it is larger than {MAX_BYTES >> 20} MiB")
        data = b""
        while len(data) <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return _Why(f"it cannot be read ({exc.strerror})")
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _Why("it is not UTF-8 text")


READERS: dict[str, Callable[[str, str], forms.Rewrite]] = {
    "ini": forms.ini, "toml": forms.toml, "npmrc": forms.npmrc, "yaml": forms.yaml, "maven": forms.maven_settings,
    "properties": forms.properties, "docker": forms.docker_json, "git": forms.gitconfig, "urls": forms.url_lines, "netrc": forms.netrc,
}  # fmt: skip


def _reader(name: str, texts: dict[str, str | _Why]) -> Callable[[str, str], forms.Rewrite]:
    """A table row's reader; cargo's and poetry's take their secrets' hosts from another of `texts`."""
    if name == "yarnrc":
        return lambda text, where: forms.npmrc(text, where, spaced=True)
    if name == "cargo":
        return lambda text, where: forms.toml(text, where, _cargo_hosts(texts))
    if name == "poetry":
        return lambda text, where: forms.toml(text, where, _poetry_hosts(texts))
    return READERS[name]


def _tables(texts: dict[str, str | _Why], *paths: str) -> dict[str, object]:
    merged: dict[str, object] = {}
    for path in paths:
        text = texts.get(path)
        if isinstance(text, str):
            for key, value in forms.toml_tables(text).items():
                if isinstance(value, dict) and isinstance(merged.get(key), dict):
                    merged[key] = {**value, **merged[key]}  # type: ignore[dict-item]
                else:
                    merged.setdefault(key, value)
    return merged


def _cargo_hosts(texts: dict[str, str | _Why]) -> Callable[[str, str], str | None]:
    """`[registry] token` is crates.io's; `[registries.NAME] token` goes to NAME's index."""
    tables = _tables(texts, ".cargo/config.toml", ".cargo/config")

    def host(table: str, key: str) -> str | None:
        if key != "token":
            return None
        if table == "registry":
            return forms.CRATES_IO
        head, _, name = table.partition(".")
        registries = tables.get("registries")
        if head != "registries" or not isinstance(registries, dict) or not isinstance(registries.get(name), dict):
            return None
        return forms.url_host(registries[name].get("index"))

    return host


def _poetry_hosts(texts: dict[str, str | _Why]) -> Callable[[str, str], str | None]:
    """`[http-basic.NAME] password` and `[pypi-token] NAME` go to repository NAME's URL (PyPI's upload for `pypi`)."""
    tables = _tables(texts, ".config/pypoetry/config.toml")

    def host(table: str, key: str) -> str | None:
        head, _, name = table.partition(".")
        if head == "http-basic" and key == "password":
            repository = name
        elif table == "pypi-token":
            repository = key
        else:
            return None
        if repository == "pypi":
            return "upload.pypi.org:443"
        repositories = tables.get("repositories")
        if not isinstance(repositories, dict) or not isinstance(repositories.get(repository), dict):
            return None
        return forms.url_host(repositories[repository].get("url"))

    return host


def _placed(rewrite: forms.Rewrite, inside: str, tools: str, view: ToolView) -> Shown | None:
    """The file with a fresh placeholder at each mark; None when a secret's value is still in the
    text (the file is then hidden: a secret that also appears elsewhere in it is not told apart)."""
    from stockade.profiles.credentials import Resolved

    text = rewrite.text
    made: list[Resolved] = []
    for index, found in enumerate(rewrite.found):
        placeholder = f"{PLACEHOLDER}{os.urandom(20).hex()}"
        text = text.replace(forms.MARK.format(index), found.spell(placeholder))
        name = f"{found.key.split(': ', 1)[0].replace(' ', '_')}#{index + 1}"  # unique in the session: the file, and which of its secrets
        made.append(Resolved(name, placeholder, found.value, list(found.hosts), "Authorization", ""))
    if "stockade-secret-mark-" in text or any(len(found.value) >= 4 and found.value in text for found in rewrite.found):
        return None
    view.credentials += made
    secrets = [f"{_unnamed(found.key)} → {', '.join(found.hosts)}" for found in rewrite.found]
    return Shown(inside, text.encode(), tools, secrets, [_unnamed(line) for line in rewrite.withheld], rewrite.sources)


def _unnamed(key: str) -> str:
    """A secret's place without the file's name in front (messages name the file once)."""
    return key.split(": ", 1)[1] if ": " in key else key
