"""Add entries to a policy file's lists, keeping its comments, order and layout.

`stockade allow` and `stockade learn --write` both change a file a user
wrote by hand, so neither may reformat it: tomlkit parses the text into a
document that dumps back byte for byte, and only the lists named change.
An entry already in its list is left alone. Each new entry may carry a
comment saying why it is there (learn's explanation).

`allow_host` is the whole of `stockade allow` (and of an approval's
"always"): the new text is validated as a whole policy before it replaces
the old one (through a temporary file and a rename, never through a link),
and a file the user had trusted is trusted again, since the user asked for
exactly this change. A file that was not trusted stays untrusted: trusting
it would also trust everything else a cloned repository put in it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stockade.core.errors import PolicyError, UsageError
from stockade.core.locations import Locations
from stockade.profiles.text import shown


@dataclass(frozen=True)
class Entry:
    """One value for one list: `("network",), "allow", "pypi.org"` or
    `("network", "http", "api.example.com"), "allow", "GET /v1/**"`."""

    table: tuple[str, ...]
    key: str
    value: str
    comment: str = ""

    @property
    def where(self) -> str:
        """The table and key as a reader finds them in the file: `[network] allow`."""
        parts = [part if part.replace("_", "").replace("-", "").isalnum() else f'"{part}"' for part in self.table]
        return f"[{'.'.join(parts)}] {self.key}"


def add_entries(text: str, entries: list[Entry], *, file: str, extends: str | None = None) -> tuple[str, list[Entry]]:
    """The text with every entry added; returns (new text, the entries that were not there yet).

    `extends` (a new file only) names the built-in it builds on. A network allow entry turns
    `mode = "none"` into an allowlist, since the host would change nothing otherwise."""
    import tomlkit  # only the commands that edit policy files pay for it

    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise PolicyError(f"not valid TOML: {exc}", file=file) from None
    if extends is not None:
        document["extends"] = [extends]
    added: list[Entry] = []
    for entry in entries:
        table = _table(document, entry.table, file)
        values = table.get(entry.key)
        if values is None:
            table[entry.key] = tomlkit.array()
            values = table[entry.key]
        elif not isinstance(values, list):
            raise PolicyError(f"{entry.where} is not a list", file=file)
        if entry.value in [str(item) for item in values]:
            continue
        if entry.comment:
            # The comment may hold a path the sandboxed command chose: a line break would end the
            # comment (tomlkit refuses it), a terminal escape would act in the printed diff.
            values.add_line(entry.value, comment=shown(entry.comment))
        else:
            values.append(entry.value)
        added.append(entry)
        if entry.table == ("network",) and entry.key == "allow" and table.get("mode") == "none":
            table["mode"] = "allowlist"
    for values in _touched_arrays(document, added):
        _close_on_own_line(values)
    return (tomlkit.dumps(document) if added or extends is not None else text), added


def _table(document: Any, path: tuple[str, ...], file: str) -> Any:
    """The table at `path`, made when absent (`[network.http]` as a header-less super table)."""
    import tomlkit

    current = document
    for depth, name in enumerate(path):
        found = current.get(name)
        if found is None:
            found = tomlkit.table(is_super_table=depth + 1 < len(path))
            current[name] = found
            found = current[name]
        elif not isinstance(found, dict):
            shown = ".".join(path[: depth + 1])
            raise PolicyError(f"{shown} is not a table; write [{shown}] with its keys under it", file=file)
        current = found
    return current


def _touched_arrays(document: Any, added: list[Entry]) -> list[Any]:
    seen: dict[int, Any] = {}
    for entry in added:
        if not entry.comment:
            continue
        values = _table(document, entry.table, "")[entry.key]
        seen[id(values)] = values
    return list(seen.values())


def _close_on_own_line(values: Any) -> None:
    """A commented entry's comment runs to the end of its line: the closing bracket needs its own."""
    values.add_line(indent="")


def allow_host(rule: str, target: Path, locations: Locations, extends: str | None = None) -> str:
    """Add `rule` (canonical) to [network] allow of `target`; returns the sentence saying what was done.
    `extends` names the built-in a new file builds on."""
    from stockade.profiles.discovery import PROJECT_FILE
    from stockade.profiles.resolve import project_chain
    from stockade.profiles.trust import TrustStore, chain_digest

    if target.is_symlink():
        # A cloned repository's .stockade.toml linked to a TOML secret (~/.cargo/credentials.toml):
        # reading through it and writing the result in the link's place copied the secret into
        # the project. No file is edited through a link.
        raise UsageError(f"{target} is a symlink; stockade allow edits no file through a link: give the file itself with --policy")
    if not target.parent.is_dir():
        raise UsageError(f"no folder {target.parent} for the policy file {target.name}: give --policy a file in a folder that exists")
    store = TrustStore(locations.trust_file)
    created = not target.exists()
    was_trusted = not created and _trusted(store, target, locations)
    old_text = "" if created else read_text(target)
    new_text, added = add_entries(old_text, [Entry(("network",), "allow", rule)], file=str(target), extends=extends if created else None)
    if not added:
        return f"stockade: {rule} is already in [network] allow of {target}"
    write_checked(target, new_text, None if created else old_text, locations)
    said = f"stockade: added {rule} to [network] allow in {target}"
    if created or was_trusted:
        if target.name == PROJECT_FILE:
            store.trust(target, chain_digest(project_chain(target, locations)))
            said += " (trusted, as you asked for it)" if was_trusted else " (a new file, trusted)"
    elif target.name == PROJECT_FILE:
        said += f"; the file is not trusted, so the host applies only once you have read it and run: stockade trust {target}"
    return said


def write_checked(target: Path, new_text: str, old_text: str | None, locations: Locations) -> None:
    """Replace the file's text, then check the whole policy it is part of; a policy error puts
    the old text back (`old_text` None: the file was new, and is removed) and is raised."""
    from stockade.profiles.resolve import resolve

    replace_text(target, new_text)
    try:
        resolve(target.parent, locations, policy_file=target)
    except PolicyError:
        if old_text is None:
            target.unlink()
        else:
            replace_text(target, old_text)
        raise


def _trusted(store: Any, target: Path, locations: Locations) -> bool:
    from stockade.profiles.resolve import project_chain
    from stockade.profiles.trust import chain_digest

    try:
        return bool(store.is_trusted(target, chain_digest(project_chain(target, locations))))
    except PolicyError:
        return False


def read_text(path: Path) -> str:
    """A policy file's text, never through a link put there since it was checked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def replace_text(path: Path, text: str) -> None:
    """Through a temporary file and a rename, keeping the file's permissions."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, temporary = tempfile.mkstemp(prefix=".stockade-edit-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
