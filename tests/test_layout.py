"""The tests mirror the code: src/stockade/PKG/MOD.py is tested in tests/PKG/test_MOD.py.

Like mitmproxy's test/filename_matching.py: a module without its test file
fails here, so a new module cannot arrive untested. Modules without logic of
their own are listed in NO_LOGIC; modules tested today only through whole
runs are listed in END_TO_END_ONLY with the tests that run them. That list
only shrinks: a listed module that gets its own test file fails here until
it leaves the list.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "stockade"

NO_LOGIC = {
    "cli/version",  # one constant
    "cli/selection",  # which names a command takes, one table
    "profiles/model",  # frozen dataclasses
    "profiles/schema",  # the table of keys and kinds (tests/profiles/test_policy_fuzz.py reads it)
    "core/errors",  # the exception classes and exit codes
    "proxy/daemon/__main__",  # `python -m stockade.proxy.daemon`: calls main.main
}

# module: the tests that exercise it through whole runs, until it has tests of its own
END_TO_END_ONLY = {
    "proxy/filter/splice_body": "tests/e2e/test_b_network.py",
}


def _modules() -> list[str]:
    return sorted(
        str(path.relative_to(SOURCE).with_suffix("")) for path in SOURCE.rglob("*.py") if path.name != "__init__.py" and "builtin" not in path.parts
    )


def _test_file(module: str) -> Path:
    package, _, name = module.rpartition("/")
    return ROOT / "tests" / package / f"test_{name}.py"


def test_every_module_has_its_test_file() -> None:
    missing = [m for m in _modules() if not _test_file(m).exists() and m not in NO_LOGIC and m not in END_TO_END_ONLY]
    assert missing == [], f"add tests/PKG/test_MOD.py for: {missing}"


def test_the_end_to_end_only_list_only_shrinks() -> None:
    mirrored = [m for m in END_TO_END_ONLY if _test_file(m).exists()]
    assert mirrored == [], f"these have their own test file now: remove them from END_TO_END_ONLY: {mirrored}"
    gone = [m for m in (*END_TO_END_ONLY, *NO_LOGIC) if m not in _modules()]
    assert gone == [], f"no such module any more: {gone}"
    unrun = [f"{m}: {where}" for m, where in END_TO_END_ONLY.items() if not (ROOT / where).is_file()]
    assert unrun == [], unrun


def test_every_test_folder_is_a_package() -> None:
    """Helpers are imported by package path (tests.e2e.boxes), never by a bare name on sys.path."""
    folders = {path.parent for path in (ROOT / "tests").rglob("test_*.py") if ".cache" not in path.parts}
    assert [str(f) for f in sorted(folders) if not (f / "__init__.py").exists()] == []
