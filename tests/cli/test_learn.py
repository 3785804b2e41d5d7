"""stockade learn's layer for the next round: the learned entries as TOML the loader reads back as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.cli.learn import additions_text
from stockade.cli.main import main
from stockade.profiles.editing import Entry
from stockade.profiles.loader import parse_layer


def test_the_next_rounds_layer_reads_back_whatever_characters_the_entries_hold() -> None:
    # A path past U+FFFF (JSON spells it as a surrogate pair, which TOML refuses), DEL, quotes, and a
    # table name that is a Python identifier but no TOML bare key: each made round 2 a policy error.
    path = '/home/u/Fotos 😀/a\x7fb "q" \\'
    entries = [
        Entry(("filesystem",), "allow_read", path),
        Entry(("network", "http", "héllo"), "allow", "GET /x"),
    ]
    layer = parse_layer(additions_text(entries, network_off=True), "learn", base=Path("/p"), home=Path("/home/u"))
    assert list(layer.values["filesystem"]["allow_read"]) == [path]
    assert layer.values["network"]["mode"] == "allowlist"


def test_later_rounds_get_hosts_and_places_outside_the_home_but_not_the_homes_files() -> None:
    from stockade.cli.learn import granted
    from stockade.profiles.editing import Entry

    entries = [
        Entry(("network",), "allow", "pypi.org"), Entry(("filesystem",), "allow_write", "/srv/cache"),
        Entry(("filesystem",), "allow_read", "~/.config/tool/settings.ini"), Entry(("filesystem",), "allow_write", "~/.cache/tool"),
    ]  # fmt: skip
    assert [entry.value for entry in granted(entries)] == ["pypi.org", "/srv/cache"]


@pytest.mark.parametrize("args", [["learn", "--bogus"], ["learn", "--write", "--bogus", "--", "true"]])
def test_an_unknown_option_is_a_usage_error_not_the_command(project: object, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "unknown option '--bogus'" in err and len(err.strip().splitlines()) == 1


def test_a_deleted_working_directory_is_125_as_for_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert main(["learn", "--", "true"]) == 125
    assert "the working directory no longer exists" in capsys.readouterr().err
