"""bwrap ignores the terminal's signals, the command gets them back: the env words and their cache."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from stockade.bwrap.running import signal_reset

pytestmark = pytest.mark.skipif(not signal_reset.supported("/nonexistent-cache-probe"), reason="this env lacks --default-signal")


def test_bwrap_ignores_all_four_and_the_command_gets_back_only_those_given(tmp_path: Path) -> None:
    """Under nohup (HUP ignored from the start) the command keeps HUP ignored: only INT and TERM come back."""
    outer, inner = signal_reset.wrappers(str(tmp_path), ["sleep", "1"], [signal.SIGINT, signal.SIGTERM])
    assert outer == ["/usr/bin/env", "--ignore-signal=INT,QUIT,HUP,TERM,USR1,USR2,ALRM,VTALRM,PROF,XCPU,PWR"]
    assert inner == ["/usr/bin/env", "--default-signal=INT,TERM", "--"]


def test_a_first_word_env_would_read_as_a_variable_goes_through_sh(tmp_path: Path) -> None:
    """env takes `./a=b` for a variable: sh runs it, after env reset the signals."""
    script = tmp_path / "a=b"
    script.write_text('#!/bin/sh\ngrep SigIgn /proc/self/status\necho "$0 $1"\n')
    script.chmod(0o755)
    outer, inner = signal_reset.wrappers(str(tmp_path), [str(script), "one"], [signal.SIGINT])
    assert inner[-3:] == ["/bin/sh", "-c", 'exec "$0" "$@"']
    done = subprocess.run([*outer, *inner, str(script), "one"], capture_output=True, text=True, check=True)
    ignored, said = done.stdout.splitlines()
    assert not int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1))
    assert said == f"{script} one"  # its own argv[0]


def test_no_wrappers_without_a_command(tmp_path: Path) -> None:
    assert signal_reset.wrappers(str(tmp_path), [], [signal.SIGINT]) == ([], [])


def test_no_wrappers_when_nothing_is_to_be_reset(tmp_path: Path) -> None:
    assert signal_reset.wrappers(str(tmp_path), ["true"], []) == ([], [])


def test_the_outer_ignores_and_the_inner_restores(tmp_path: Path) -> None:
    """The whole point: the middle (bwrap) ignores SIGINT and SIGTERM, the command has them at default."""
    outer, inner = signal_reset.wrappers(str(tmp_path), ["grep"], [signal.SIGINT, signal.SIGTERM])
    middle = 'grep SigIgn /proc/$$/status; exec "$@"'
    words = [*outer, "/bin/sh", "-c", middle, "sh", *inner, "grep", "SigIgn", "/proc/self/status"]
    lines = subprocess.run(words, capture_output=True, text=True, check=True).stdout.split()
    ignored_in_middle, ignored_in_command = int(lines[1], 16), int(lines[3], 16)
    for number in (signal.SIGINT, signal.SIGTERM):
        assert ignored_in_middle & (1 << (number - 1))
        assert not ignored_in_command & (1 << (number - 1))


def test_the_answer_is_cached_per_env_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    monkeypatch.setattr(signal_reset, "_ask", lambda: asked.append(True) or True)
    assert signal_reset.supported(str(tmp_path)) is True
    assert signal_reset.supported(str(tmp_path)) is True
    assert asked == [True]
    record = tmp_path / "env-signals"
    stamp = record.read_text().split()[0]
    record.write_text(f"{stamp} no\n")
    assert signal_reset.supported(str(tmp_path)) is False  # the record speaks for the same binary
    record.write_text("0:0:0:0 yes\n")  # another binary (an upgrade): asked again
    assert signal_reset.supported(str(tmp_path)) is True
    assert asked == [True, True]


def test_an_env_without_the_options_is_no(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "env"
    fake.write_text("#!/bin/sh\necho 'env: unrecognized option' >&2\nexit 125\n")
    fake.chmod(0o755)
    monkeypatch.setattr(signal_reset, "ENV", str(fake))
    assert signal_reset.supported(str(tmp_path / "cache")) is False
    assert (tmp_path / "cache" / "env-signals").read_text().endswith(" no\n")


def test_no_env_at_all_is_no(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signal_reset, "ENV", str(tmp_path / "missing"))
    assert signal_reset.supported(str(tmp_path)) is False
    assert not os.path.exists(tmp_path / "env-signals")


def test_the_starting_marks_are_bwraps_command_line_and_the_inner_envs() -> None:
    inner = ["/usr/bin/env", "--default-signal=INT,TERM", "--"]
    assert signal_reset.starting_marks("/usr/bin/bwrap", inner) == (b"/usr/bin/bwrap\0", b"/usr/bin/env\0--default-signal=INT,TERM")
    assert signal_reset.starting_marks("/usr/bin/bwrap", []) == ()
