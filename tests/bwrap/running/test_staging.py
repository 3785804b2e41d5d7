"""A staged run's pieces that need no sandbox: what marks a git dir's files, and the mount points a project holds."""

from __future__ import annotations

import pytest

from stockade.bwrap.running import staging


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        ("src/config", "src"),
        ("repo.git/hooks/pre-commit", "repo.git"),
        ("a/info/attributes", "a"),
        ("x/commondir", "x"),
        ("config", ""),
        ("src/main.py", None),
        ("hooks", None),
        ("docs/info/readme", None),
    ],
)
def test_the_git_dir_a_file_would_run_code_from(path: str, folder: str | None) -> None:
    assert staging._git_dir_of(path) == folder


def test_mountinfo_escapes_are_read_back() -> None:
    assert staging._unescape("/work/a\\040b") == "/work/a b"
    assert staging._unescape("/plain") == "/plain"


def test_this_process_s_mount_points_under_a_folder() -> None:
    assert "/proc/sys" not in staging._mount_points_in("/proc/sys")  # strictly inside, not the folder itself
    assert staging._mount_points_in("/nonexistent-folder-of-the-test") == []
