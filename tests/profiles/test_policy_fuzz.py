"""Any policy file is either a policy or a FILE:LINE error with exit 2, never a crash.

Two generators: whole TOML documents of any shape built from the schema's
tables and keys (and unknown ones), with values of every TOML type nested
at random; and byte-level damage to real policies (the built-in profiles),
which also yields encoding errors and errors at the end of the document.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stockade.core.errors import PolicyError
from stockade.profiles.loader import builtin_names, builtin_text, load_file
from stockade.profiles.schema import TABLES

KEYS = sorted({key for table in TABLES.values() for key in table} | {"alow", "", "x y"})
TABLE_NAMES = sorted(name for name in TABLES if name) + ["filesytem", "network.extra"]
SEEDS = [builtin_text(name).encode() for name in builtin_names()]

scalars = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["none", "allowlist", "open", "private", "host", ".", "~", "/", "~/.ssh", "**/.env", "4G", "30m", "pypi.org"]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=12)


def toml_value(value: Any) -> str:
    """A TOML spelling of a generated value (inline arrays and tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


@st.composite
def documents(draw: st.DrawFn) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append(f"extends = {toml_value(draw(values))}")
    for table in draw(st.lists(st.sampled_from(TABLE_NAMES), max_size=3, unique=True)):
        lines.append(f"[{table}]")
        for key in draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True)):
            lines.append(f"{json.dumps(key)} = {toml_value(draw(values))}")
    return "\n".join(lines) + "\n"


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        where = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "truncate"]))
        if action == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b"[", b"]]", b'"', b"=", b"\xff", b"\n[[x]]\n"]))
        elif action == "delete":
            del data[where : where + draw(st.integers(1, 20))]
        else:
            del data[where:]
    return bytes(data)


def _load(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "policy.toml"
    path.write_bytes(data)
    try:
        load_file(path, home=tmp_path / "home")
    except PolicyError as error:
        assert str(error).startswith(f"{path}:"), str(error)
        assert "\n" not in str(error).rstrip("\n"), str(error)


FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(text=documents())
def test_generated_documents_load_or_fail_with_the_file(tmp_path: Path, text: str) -> None:
    _load(tmp_path, text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(data=damaged())
def test_damaged_policies_load_or_fail_with_the_file(tmp_path: Path, data: bytes) -> None:
    _load(tmp_path, data)


def test_every_text_level_error_names_its_line(tmp_path: Path) -> None:
    cases = {
        b'[network]\nmode = ["x"]\n': 2,
        b"x = " + b"[" * 3000 + b"]" * 3000 + b"\n": 1,
        b'[filesystem]\nallow_write = ["\xff"]\n': 2,
        b"[network]\nallow = [": 2,
        b"[limits]\nmemory = true\n": 2,
        b"extends = 5\n": 1,
    }
    for data, line in cases.items():
        path = tmp_path / "policy.toml"
        path.write_bytes(data)
        try:
            load_file(path, home=tmp_path)
        except PolicyError as error:
            assert error.line == line, (data[:40], str(error))
        else:
            raise AssertionError(f"{data[:40]!r} loaded")


def test_only_short_regular_files_are_read(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (2 << 20))
    for path, words in (
        (big, "larger than"),
        (Path("/dev/zero"), "under /dev"),
        (Path("/proc/self/status"), "under /proc"),
        (tmp_path, "not a regular file"),
    ):
        try:
            load_file(path, home=tmp_path)
        except PolicyError as error:
            assert words in str(error), str(error)
        else:
            raise AssertionError(f"{path} loaded")
