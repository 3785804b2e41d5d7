"""`stockade allow HOST`: add a host to the right policy file's [network] allow list.

Every denial's hint is this command, so what a user (or an agent) is told can
be pasted as it is. The file is edited with tomlkit, which keeps its comments,
order and layout; the new text is validated as a whole policy before it
replaces the old one (through a temporary file and a rename), and a file the
user had trusted is trusted again, since the user asked for exactly this
change. A file that was not trusted stays untrusted: trusting it would also
trust everything else a cloned repository put in it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from stockade.core.errors import PolicyError, UsageError
from stockade.core.locations import locate
from stockade.profiles.discovery import PROJECT_FILE, find_project_policy
from stockade.profiles.domains import parse_rule
from stockade.profiles.resolve import project_chain, resolve
from stockade.profiles.trust import TrustStore, chain_digest


def allow(
    host: Annotated[str, typer.Argument(help="Host to allow: pypi.org, *.example.com, host:port or an IP.")],
    policy: Annotated[Path | None, typer.Option("--policy", "-p", help="Policy file to change (default: this project's .stockade.toml).")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="When the file is new: the built-in it extends.")] = None,
) -> None:
    try:
        rule = str(parse_rule(host))
    except ValueError as exc:
        raise UsageError(f"cannot allow {host!r}: {exc}") from None
    cwd = Path(os.getcwd())
    target = (policy if policy.is_absolute() else cwd / policy) if policy is not None else (find_project_policy(cwd) or cwd / PROJECT_FILE)
    if target.is_symlink():
        # A cloned repository's .stockade.toml linked to a TOML secret (~/.cargo/credentials.toml):
        # reading through it and writing the result in the link's place copied the secret into
        # the project. No file is edited through a link.
        raise UsageError(f"{target} is a symlink; stockade allow edits no file through a link: give the file itself with --policy")
    locations = locate()
    store = TrustStore(locations.trust_file)
    created = not target.exists()
    was_trusted = not created and _trusted(store, target, locations)
    old_text = "" if created else _read(target)
    new_text, already = _with_host(old_text, rule, target, profile if created else None)
    if already:
        print(f"stockade: {rule} is already in [network] allow of {target}")
        return
    _replace(target, new_text)
    try:
        resolve(target.parent, locations, policy_file=target)  # the whole policy must still be valid
    except PolicyError:
        if created:
            target.unlink()
        else:
            _replace(target, old_text)
        raise
    said = f"stockade: added {rule} to [network] allow in {target}"
    if created or was_trusted:
        if target.name == PROJECT_FILE:
            store.trust(target, chain_digest(project_chain(target, locations)))
            said += " (trusted, as you asked for it)" if was_trusted else " (a new file, trusted)"
    elif target.name == PROJECT_FILE:
        said += f"; the file is not trusted, so the host applies only once you have read it and run: stockade trust {target}"
    print(said)


def _trusted(store: TrustStore, target: Path, locations: Any) -> bool:
    try:
        return store.is_trusted(target, chain_digest(project_chain(target, locations)))
    except PolicyError:
        return False


def _read(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # a link put there since: refused
        with os.fdopen(fd, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def _with_host(text: str, rule: str, target: Path, extends: str | None) -> tuple[str, bool]:
    """The file's text with `rule` added to [network] allow; (text, True) when it is there already."""
    from stockade.profiles.editing import Entry, add_entries

    new_text, added = add_entries(text, [Entry(("network",), "allow", rule)], file=str(target), extends=extends)
    return new_text, not added


def _replace(path: Path, text: str) -> None:
    """Through a temporary file and a rename, keeping the file's permissions."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, temporary = tempfile.mkstemp(prefix=".stockade-allow-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
