"""Code and tests cite `ESCAPES N`: keep docs/escapes.md in step, so every citation has a section and every test it names exists."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "escapes.md"
# The repository's own code: the packages under src/stockade (cli, profiles, bwrap, seatbelt,
# proxy, core), the tests and the benchmarks.
SEARCHED = ("src", "tests", "bench")
SKIPPED = frozenset({".cache", "__pycache__"})

# `ESCAPES 4`, `ESCAPES case 16`, and lists such as `ESCAPES 54, 77`, `ESCAPES 2 and 78`,
# `ESCAPES 47/48`. A range (`ESCAPES 2-4`) counts its ends only: the numbering has gaps.
# `ESCAPES V3` names a verification note, not a case, and is not matched.
CITATION = re.compile(r"\bESCAPES(?: case)? (\d+(?:(?:, ?| and |/|-)\d+)*)")
HEADING = re.compile(r"^### (\d+)\. \S", re.MULTILINE)
TEST_REFERENCE = re.compile(r"([\w./-]+\.py)::(\w+)")


def python_files(root: Path) -> Iterator[Path]:
    for folder in SEARCHED:
        for current, dirs, files in os.walk(root / folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
            for name in sorted(files):
                if name.endswith(".py"):
                    yield Path(current) / name


def cited_numbers(root: Path) -> dict[int, list[str]]:
    """{case number: files that cite it}."""
    cited: dict[int, list[str]] = {}
    for path in python_files(root):
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            for number in re.findall(r"\d+", match.group(1)):
                cited.setdefault(int(number), []).append(str(path.relative_to(root)))
    return cited


def documented_numbers(doc: str) -> set[int]:
    return {int(number) for number in HEADING.findall(doc)}


def test_every_cited_case_has_a_heading() -> None:
    cited = cited_numbers(ROOT)
    assert cited, f"no `ESCAPES N` found under {SEARCHED}: the walk is looking in the wrong place"
    documented = documented_numbers(DOC.read_text(encoding="utf-8"))
    missing = {number: sorted(set(files)) for number, files in sorted(cited.items()) if number not in documented}
    assert not missing, f"cited in the code but without a `### N. ` heading in {DOC.relative_to(ROOT)}: {missing}"


def test_every_named_test_exists() -> None:
    references = TEST_REFERENCE.findall(DOC.read_text(encoding="utf-8"))
    assert references, f"{DOC.relative_to(ROOT)} names no test as path::test_name"
    broken: list[str] = []
    for relative, name in sorted(set(references)):
        path = ROOT / relative
        if not path.is_file():
            broken.append(f"{relative}::{name} (no such file)")
        elif not re.search(rf"\bdef {re.escape(name)}\(", path.read_text(encoding="utf-8")):
            broken.append(f"{relative}::{name} (no `def {name}` in the file)")
    assert not broken, f"{DOC.relative_to(ROOT)} names tests that do not exist: {broken}"
