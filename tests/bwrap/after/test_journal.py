"""The record of sweeps a run still owes (bwrap/after/journal.py)."""

from __future__ import annotations

import os
from pathlib import Path

from stockade.bwrap.after.journal import Journal, finish_abandoned


def test_a_record_whose_run_is_gone_is_swept_and_removed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    state = tmp_path / "state"
    planted = project / ".envrc"
    journal = Journal(str(state), "s1")
    journal.open([(str(planted), str(planted))], [str(project)])
    planted.write_text("planted\n")
    assert finish_abandoned(str(state), "later") == []  # its run still holds the record
    os.close(journal.fd)  # the run dies without closing its journal
    moved = finish_abandoned(str(state), "later")
    assert moved == [(str(planted), str(project / ".envrc.stockade-quarantine-later"))]
    assert os.listdir(state / "sweeps") == []
