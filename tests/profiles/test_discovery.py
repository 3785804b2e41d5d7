"""find_project_policy: the nearest non-empty .stockade.toml at or above a folder."""

from __future__ import annotations

from pathlib import Path

from stockade.profiles.discovery import PROJECT_FILE, find_project_policy


def write(path: Path, text: str = 'extends = ["default"]\n') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def outside(found: Path | None, root: Path) -> bool:
    """Nothing found under `root` (a file above the test's folder is not the test's business)."""
    return found is None or root not in found.parents


def test_the_file_name() -> None:
    assert PROJECT_FILE == ".stockade.toml"


def test_found_in_the_start_folder(tmp_path: Path) -> None:
    policy = write(tmp_path / "proj" / PROJECT_FILE)
    assert find_project_policy(tmp_path / "proj") == policy


def test_walks_up_to_the_nearest(tmp_path: Path) -> None:
    write(tmp_path / PROJECT_FILE)
    nearer = write(tmp_path / "proj" / PROJECT_FILE)
    deep = tmp_path / "proj" / "a" / "b"
    deep.mkdir(parents=True)
    assert find_project_policy(deep) == nearer


def test_empty_files_are_skipped(tmp_path: Path) -> None:
    outer = write(tmp_path / PROJECT_FILE)
    write(tmp_path / "proj" / PROJECT_FILE, "")  # a placeholder mount point
    assert find_project_policy(tmp_path / "proj") == outer


def test_a_folder_of_that_name_is_not_a_policy(tmp_path: Path) -> None:
    (tmp_path / "proj" / PROJECT_FILE).mkdir(parents=True)
    assert outside(find_project_policy(tmp_path / "proj"), tmp_path)


def test_none_found(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert outside(find_project_policy(tmp_path / "a"), tmp_path)


def test_a_missing_start_folder_still_walks_up(tmp_path: Path) -> None:
    policy = write(tmp_path / PROJECT_FILE)
    assert find_project_policy(tmp_path / "gone" / "deeper") == policy
