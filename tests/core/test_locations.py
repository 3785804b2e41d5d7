"""Where stockade keeps its files: XDG folders from the environment, and the immutable Locations."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from stockade.core.locations import Locations, cache_folder, config_folder, home_folder, locate, runtime_folder, state_folder

HOME = {"HOME": "/home/ann"}


@pytest.mark.parametrize(
    ("env", "config", "state", "cache", "runtime"),
    [
        pytest.param(
            HOME,
            "/home/ann/.config/stockade",
            "/home/ann/.local/state/stockade",
            "/home/ann/.cache/stockade",
            "/home/ann/.local/state/stockade/run",
            id="defaults",
        ),
        pytest.param(
            {**HOME, "XDG_CONFIG_HOME": "/x/conf", "XDG_STATE_HOME": "/x/state", "XDG_CACHE_HOME": "/x/cache", "XDG_RUNTIME_DIR": "/run/user/1000"},
            "/x/conf/stockade",
            "/x/state/stockade",
            "/x/cache/stockade",
            "/run/user/1000/stockade",
            id="xdg",
        ),
        pytest.param(
            {**HOME, "XDG_CONFIG_HOME": "rel", "XDG_STATE_HOME": "", "XDG_CACHE_HOME": "./c", "XDG_RUNTIME_DIR": "run"},
            "/home/ann/.config/stockade",
            "/home/ann/.local/state/stockade",
            "/home/ann/.cache/stockade",
            "/home/ann/.local/state/stockade/run",
            id="relative-xdg-ignored",
        ),
        pytest.param(
            {**HOME, "XDG_STATE_HOME": "/x/state"},
            "/home/ann/.config/stockade",
            "/x/state/stockade",
            "/home/ann/.cache/stockade",
            "/x/state/stockade/run",
            id="runtime-follows-state",
        ),
    ],
)
def test_folders(env: dict[str, str], config: str, state: str, cache: str, runtime: str) -> None:
    assert (config_folder(env), state_folder(env), cache_folder(env), runtime_folder(env)) == (config, state, cache, runtime)
    assert locate(env) == Locations(home=Path(env["HOME"]), config=Path(config), state=Path(state), cache=Path(cache), runtime=Path(runtime))


@pytest.mark.parametrize("env", [{}, {"HOME": ""}])
def test_without_home_the_users_home_is_used(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/fallback")
    assert home_folder(env) == "/home/fallback"
    assert config_folder(env) == "/home/fallback/.config/stockade"


def test_locate_reads_the_process_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    found = locate()
    assert found.home == home
    assert found.cache == Path("/somewhere/cache/stockade")


def locations() -> Locations:
    return Locations(home=Path("/h"), config=Path("/c"), state=Path("/s"), cache=Path("/k"), runtime=Path("/r"))


def test_locations_files_and_private_dirs() -> None:
    where = locations()
    assert where.user_config_file == Path("/c/config.toml")
    assert where.trust_file == Path("/c/trusted.json")
    assert where.default_audit_log == Path("/s/audit.jsonl")
    assert where.private_dirs() == (Path("/s"), Path("/k"), Path("/r"))


def test_locations_are_values() -> None:
    assert locations() == locations() and hash(locations()) == hash(locations())
    assert locations() != locations().with_home(Path("/real/h"))
    assert locations() != "Locations"
    assert len({locations(), locations()}) == 1
    assert repr(locations()) == (
        "Locations(home=PosixPath('/h'), config=PosixPath('/c'), state=PosixPath('/s'), cache=PosixPath('/k'), runtime=PosixPath('/r'))"
    )


def test_locations_are_immutable() -> None:
    where = locations()
    with pytest.raises(AttributeError, match="immutable"):
        where.home = Path("/x")
    with pytest.raises(AttributeError):
        where.other = 1  # type: ignore[attr-defined]


def test_with_home_keeps_the_other_folders() -> None:
    moved = locations().with_home(Path("/real/h"))
    assert moved.home == Path("/real/h")
    assert (moved.config, moved.state, moved.cache, moved.runtime) == (Path("/c"), Path("/s"), Path("/k"), Path("/r"))


def test_ensure_makes_private_folders(tmp_path: Path) -> None:
    where = Locations(home=tmp_path, config=tmp_path / "c" / "stockade", state=tmp_path / "s", cache=tmp_path / "k", runtime=tmp_path / "s" / "run")
    where.ensure()
    where.ensure()  # again: nothing to do
    for folder in (*where.private_dirs(), where.config):
        assert folder.is_dir() and stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0, folder


def test_the_folder_functions_load_neither_pathlib_nor_dataclasses() -> None:
    probe = "import sys, stockade.core.locations as l; l.state_folder({'HOME': '/h'}); print(sorted({'pathlib', 'dataclasses'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    )
    assert out.stdout.strip() == "[]"


def test_a_file_where_a_folder_belongs_is_one_clear_setup_error(tmp_path: Path) -> None:
    from stockade.core.errors import SandboxSetupError

    (tmp_path / "state").write_text("not a folder")
    where = Locations(home=tmp_path, config=tmp_path / "config", state=tmp_path / "state" / "stockade", cache=tmp_path / "c", runtime=tmp_path / "r")
    with pytest.raises(SandboxSetupError) as caught:
        where.ensure()
    assert caught.value.exit_code == 125
    assert f"{tmp_path / 'state'} is a file, not a folder" in str(caught.value) and "mv " in str(caught.value)
    (tmp_path / "state").unlink()
    where.ensure()  # control: with the file gone, every folder is made
    assert (tmp_path / "state" / "stockade").is_dir()
