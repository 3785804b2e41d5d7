"""`stockade init`: a commented starter `.stockade.toml` for the kind of project here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from stockade.core.errors import UsageError
from stockade.profiles.discovery import PROJECT_FILE

KINDS: dict[str, tuple[tuple[str, ...], str, list[str], list[str]]] = {
    # kind: (marker files, extends, extra writable caches, allowed hosts)
    "python": (
        ("pyproject.toml", "setup.py", "requirements.txt", "setup.cfg"),
        "pypi",
        ["~/.cache/pip", "~/.cache/uv"],
        ["pypi.org:443", "files.pythonhosted.org:443"],
    ),
    "node": (("package.json",), "npm", ["~/.npm", "~/.cache/yarn"], ["registry.npmjs.org:443"]),
    "rust": (("Cargo.toml",), "default", ["~/.cargo/registry", "~/.cargo/git"], ["crates.io:443", "static.crates.io:443", "index.crates.io:443"]),
    "go": (("go.mod",), "default", ["~/go/pkg/mod", "~/.cache/go-build"], ["proxy.golang.org:443", "sum.golang.org:443"]),
    "generic": ((), "default", [], []),
}


def detect_kind(folder: Path) -> str:
    for kind, (markers, *_rest) in KINDS.items():
        if any((folder / marker).exists() for marker in markers):
            return kind
    return "generic"


def _list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def starter_text(kind: str) -> str:
    _markers, extends, caches, hosts = KINDS[kind]
    mode = "allowlist" if hosts else "none"
    return f"""# stockade policy for this {kind} project. Check it with `stockade explain`.
# Until you run `stockade trust`, this file can only narrow your own default policy.
extends = ["{extends}"]           # built-in profiles: default, offline, pypi, npm, github, git, agent

[filesystem]
allow_write = {_list([".", *caches])}   # "." is this project
deny_read   = ["**/.env", "**/.env.*"]  # secrets in the project (~/.ssh etc. come from "default")
# deny_write = ["dist"]                 # read-only carve-outs inside writable places

[network]
mode  = "{mode}"                   # "none" | "allowlist" | "open"
allow = {_list(hosts)}
# deny = ["uploads.example.com"]

[env]
# deny = ["MY_COMPANY_*"]               # never passed in (well-known secrets never are)
# set  = {{ CI = "1" }}

[limits]
# memory = "4G"
# pids = 1024
# wall_time = "30m"
"""


def init(
    kind: Annotated[str | None, typer.Option("--kind", help="python, node, rust, go or generic (default: detected).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing .stockade.toml.")] = False,
) -> None:
    folder = Path(os.getcwd())
    target = folder / PROJECT_FILE
    if kind is not None and kind not in KINDS:
        raise UsageError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if target.is_symlink():  # a cloned repository's link to ~/.bashrc must not be written through
        raise UsageError(f"{target} is a symbolic link; stockade init writes only a file of its own (remove the link first)")
    if target.exists() and not force:
        raise UsageError(f"{target} already exists; use --force to overwrite it")
    chosen = kind or detect_kind(folder)
    _write_own(target, starter_text(chosen), replace=force)
    print(f"stockade: wrote {target} for a {chosen} project; review it with `stockade explain`, then `stockade trust`")


def _write_own(target: Path, text: str, *, replace: bool) -> None:
    """Write the file itself, never through a link (O_NOFOLLOW) that appeared since the check above."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_TRUNC if replace else os.O_EXCL)
    try:
        fd = os.open(target, flags, 0o644)
    except FileExistsError:
        raise UsageError(f"{target} already exists; use --force to overwrite it") from None
    except OSError as error:
        raise UsageError(f"cannot write {target}: {error.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
