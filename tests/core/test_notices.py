"""An agent session is told each notice once, and a session's record ends a day after its last use."""

from __future__ import annotations

import os
import time
from pathlib import Path

from stockade.core import notices


def test_a_line_is_new_once_per_session(tmp_path: Path) -> None:
    state = str(tmp_path)
    assert notices.first_time(state, "s1", "stockade: the file is not trusted")
    assert not notices.first_time(state, "s1", "stockade: the file is not trusted")
    assert notices.first_time(state, "s1", "stockade: another notice")
    assert notices.first_time(state, "s2", "stockade: the file is not trusted")  # another agent session


def test_without_a_session_every_line_is_said(tmp_path: Path) -> None:
    assert notices.first_time(str(tmp_path), None, "x") and notices.first_time(str(tmp_path), None, "x")
    assert not (tmp_path / "agent-sessions").exists()


def test_old_sessions_are_forgotten_when_a_new_one_starts(tmp_path: Path) -> None:
    notices.first_time(str(tmp_path), "old", "x")
    old = tmp_path / "agent-sessions" / "old"
    past = time.time() - notices.KEEP_SECONDS - 60
    os.utime(old, (past, past))
    notices.first_time(str(tmp_path), "new", "x")
    assert not old.exists() and (tmp_path / "agent-sessions" / "new").exists()


def test_an_unwritable_state_folder_still_says_the_line(tmp_path: Path) -> None:
    (tmp_path / "agent-sessions").write_text("a file where the folder goes")
    assert notices.first_time(str(tmp_path), "s", "x") and notices.first_time(str(tmp_path), "s", "x")


def test_session_names_are_safe_file_names() -> None:
    assert notices.session_name("ab-12_c.d") == "ab-12_c.d"
    assert notices.session_name("../../x") == "x"
    assert notices.session_name("") is None and notices.session_name(None) is None and notices.session_name("..") is None
    assert len(notices.session_name("a" * 500) or "") == 64
