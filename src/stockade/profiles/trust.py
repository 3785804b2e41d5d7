"""Trust records for project policies, like direnv's `allow`.

A project policy is trusted when the digest of its whole `extends` chain
matches what this user recorded with `stockade trust`; any change, to the
file or to a file it extends, makes it untrusted again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from stockade.core.errors import StockadeError
from stockade.profiles.loader import Layer


def chain_digest(layers: list[Layer]) -> str:
    """What trust is tied to: the project's files and the files they name. The user's own default,
    which a file without `extends` builds on, is the user's, and changing it untrusts nothing."""
    digest = hashlib.sha256()
    for layer in layers:
        if layer.implicit:
            continue
        digest.update(layer.source.encode() + b"\0" + layer.text.encode() + b"\0")
    return digest.hexdigest()


class TrustStore:
    """A JSON map of absolute policy path -> chain digest, owned by this user."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise StockadeError(f"{self.path}: cannot read the trust store ({exc}); fix or delete it") from None
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _write(self, records: dict[str, str]) -> None:
        import tempfile

        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".trusted-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(records, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, self.path)

    def is_trusted(self, policy_file: Path, digest: str) -> bool:
        return self._read().get(str(policy_file)) == digest

    def was_trusted(self, policy_file: Path) -> bool:
        """Trusted once, in another version (the file or one it extends changed since)."""
        return str(policy_file) in self._read()

    def trust(self, policy_file: Path, digest: str) -> None:
        records = self._read()
        records[str(policy_file)] = digest
        self._write(records)

    def revoke(self, policy_file: Path) -> bool:
        records = self._read()
        removed = records.pop(str(policy_file), None) is not None
        if removed:
            self._write(records)
        return removed
