"""A file name the sandboxed command chose reaches the user's terminal only as visible text."""

from __future__ import annotations

import unicodedata

from tests.work.realwork import Workplace

# Every C0 and C1 control but NUL and "/" (no file name holds those), ESC sequences that clear the
# screen, move the cursor and set the window title, a right-to-left override and a zero-width space.
HOSTILE = "".join(chr(c) for c in [*range(0x01, 0x20), *range(0x7F, 0xA0)]) + "\x1b[2J\x1b[1A\x1b]0;pwned\x07\u202e\u200b"


def raw(text: str) -> list[str]:
    return [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf")]


def test_a_hostile_folder_name_in_the_run_summary_is_shown_escaped(work: Workplace) -> None:
    work.project.mkdir()
    (work.project / "make.py").write_text(f"import os\nd = {HOSTILE!r}\nos.mkdir(d)\nopen(os.path.join(d, 'package.json'), 'w').write('{{}}')\n")
    done = work.shell("python3 make.py", sandboxed=True)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "package.json" in line]
    assert lines, done.stderr  # the control: the summary does report the file
    assert raw(done.stderr) == [], repr(done.stderr)
    assert "\\x1b[2J" in lines[0] and "\\u202e" in lines[0], lines[0]
