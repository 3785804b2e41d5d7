"""Every source or test file the docs name exists: a moved module cannot leave the map pointing at nothing.

docs/architecture.md is kept true in the change that makes it false; this
holds it (and the README and docs/) to the paths at least.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LAYERS = "cli|bwrap|seatbelt|proxy|profiles|core"
SOURCE = re.compile(rf"(?<![\w/.-])(?:src/stockade/)?((?:{LAYERS})/[\w/]+\.(?:py|sb|toml))")
TEST = re.compile(r"(?<![\w/.-])(tests/[\w/]+\.py)")
PLACEHOLDERS = ("PKG", "SUB", "MOD")


def named_paths(text: str) -> set[str]:
    found = {f"src/stockade/{path}" for path in SOURCE.findall(text)}
    found |= set(TEST.findall(text))
    return {path for path in found if not any(word in path for word in PLACEHOLDERS)}


def test_every_path_the_docs_name_exists() -> None:
    missing = [
        f"{doc.relative_to(ROOT)}: {path}"
        for doc in DOCS
        for path in sorted(named_paths(doc.read_text(encoding="utf-8")))
        if not (ROOT / path).exists()
    ]
    assert missing == [], "the docs name files that are not there (moved or renamed?):\n" + "\n".join(missing)


def test_the_check_reads_both_spellings_and_skips_placeholders() -> None:
    """Control: the check above can fail."""
    text = "see `proxy/gone.py`, src/stockade/core/errors.py, tests/cli/test_x.py and tests/PKG/test_MOD.py"
    assert named_paths(text) == {"src/stockade/proxy/gone.py", "src/stockade/core/errors.py", "tests/cli/test_x.py"}
