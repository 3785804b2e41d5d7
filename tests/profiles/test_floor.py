"""The mandatory floor as data: protected paths for every writable root."""

from __future__ import annotations

from pathlib import Path

from stockade.core.locations import Locations
from stockade.profiles.floor import floor_for, is_folder_entry


def locs(home: str) -> Locations:
    h = Path(home)
    return Locations(
        home=h, config=h / ".config/stockade", state=h / ".local/state/stockade", cache=h / ".cache/stockade", runtime=h / ".local/state/stockade/run"
    )


def test_project_root_gets_runs_later_files() -> None:
    floor = floor_for(("/p",), locs("/h"), ("/p/.stockade.toml", "/elsewhere/x.toml"))
    for path in ("/p/.git/hooks", "/p/.git/config", "/p/.envrc", "/p/.vscode", "/p/.stockade.toml", "/p/.claude", "/p/.mcp.json", "/p/.idea"):
        assert path in floor.read_only
    assert "/h/.bashrc" not in floor.read_only  # home is not writable here
    assert "/elsewhere/x.toml" not in floor.read_only  # already read-only: outside every root
    assert "/h/.local/state/stockade" in floor.hidden


def test_writable_home_protects_rc_files_and_stockade_config() -> None:
    floor = floor_for(("/h",), locs("/h"))
    for path in (
        "/h/.bashrc",
        "/h/.zshenv",
        "/h/.profile",
        "/h/.config/fish",
        "/h/.ssh",
        "/h/.config/stockade",
        "/h/.local/bin",
        "/h/.config/autostart",
    ):
        assert path in floor.read_only


def test_folder_entries() -> None:
    assert is_folder_entry("/p/.vscode") and is_folder_entry("/p/.git/hooks")
    assert not is_folder_entry("/p/.envrc") and not is_folder_entry("/p/.git/config")
