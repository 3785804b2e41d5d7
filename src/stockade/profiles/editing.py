"""Add entries to a policy file's lists, keeping its comments, order and layout.

`stockade allow` and `stockade learn --write` both change a file a user
wrote by hand, so neither may reformat it: tomlkit parses the text into a
document that dumps back byte for byte, and only the lists named change.
An entry already in its list is left alone. Each new entry may carry a
comment saying why it is there (learn's explanation).

Writing the file, validating the result and trusting it are the callers'
business; this module only turns text into text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stockade.core.errors import PolicyError
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
