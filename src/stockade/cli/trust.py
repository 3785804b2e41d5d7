"""`stockade trust`: let a project policy widen your own, like `direnv allow`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from stockade.core.errors import UsageError
from stockade.core.locations import locate
from stockade.profiles.credentials import Credential
from stockade.profiles.discovery import PROJECT_FILE, find_project_policy
from stockade.profiles.loader import Layer
from stockade.profiles.resolve import project_chain
from stockade.profiles.trust import TrustStore, chain_digest


def _target(file: Path | None) -> Path:
    if file is None:
        found = find_project_policy(Path(os.getcwd()))
        if found is None:
            raise UsageError(f"no {PROJECT_FILE} here or in any parent directory; give the file to trust")
        return found
    path = file if file.is_absolute() else Path(os.getcwd()) / file
    return Path(os.path.normpath(path))


def trust(
    file: Annotated[Path | None, typer.Argument(help=f"Policy file (default: the nearest {PROJECT_FILE}).")] = None,
    revoke: Annotated[bool, typer.Option("--revoke", help="Forget the trust recorded for FILE.")] = False,
) -> None:
    locations = locate()
    store = TrustStore(locations.trust_file)
    target = _target(file)
    if revoke:
        if store.revoke(target):
            print(f"stockade: no longer trusting {target}")
        else:
            print(f"stockade: {target} was not trusted")
        return
    if not target.is_file():
        raise UsageError(f"{target}: no such policy file")
    layers = project_chain(target, locations)  # validates the whole chain first
    store.trust(target, chain_digest(layers))
    files = [layer.source for layer in layers if not layer.is_builtin and not layer.implicit]
    count = f"{len(files)} file" + ("s" if len(files) != 1 else "")
    print(f"stockade: trusting {target} as it is now ({count}); any change makes it untrusted again")
    for line in trusted_credentials(layers):
        print(f"stockade: {line}")
    from stockade.profiles.merge import compose
    from stockade.profiles.openings import open_ends

    composed = compose(layers, project_dir=target.parent, origin=str(target))
    for line in open_ends(composed, str(locations.home)):
        print(f"stockade: note: {line}")
    from stockade.profiles.resolve import Resolution, baseline_note, within_baseline

    bound = within_baseline(Resolution(composed, project_file=target), locations, None)
    if bound.baseline:
        print(baseline_note(bound) or f"stockade: the system baseline ({', '.join(bound.baseline)}) still bounds it, and takes nothing from it")


def trusted_credentials(layers: list[Layer]) -> list[str]:
    """What trusting these files does with your secrets, one line per credential they name: which
    value it reads and where it sends it, and whether it replaces one of your own."""
    yours = {name: c for layer in layers if layer.implicit for name, c in layer.values.get("credentials", {}).items()}
    said = []
    for layer in layers:
        if layer.is_builtin or layer.implicit:
            continue
        for name, credential in layer.values.get("credentials", {}).items():
            line = (
                f"credential: [credentials.{name}] in {layer.source} reads {credential.described()} and sends it to "
                f"{', '.join(credential.hosts)} in {credential.places()}"
            )
            own = yours.get(name)
            if own is not None and _where(own) != _where(credential):
                line += f"; it replaces your own [credentials.{name}] ({own.described()}, sent to {', '.join(own.hosts)})"
            said.append(line)
    return said


def _where(credential: Credential) -> tuple[object, ...]:
    return (credential.source, credential.where, credential.hosts, credential.header, credential.query)
