"""A host socket that vanishes while bwrap sets up the sandbox neither fails the run nor leaves a file.

bwrap cannot mount over a missing file without making one: on the read-only
root it fails, in a writable place it makes an empty file on the host. These
tests stand in for the daemon that ends in those milliseconds.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from stockade.bwrap.parts.limits import plan_limits
from stockade.bwrap.running import execute
from stockade.bwrap.running.execute import Launch
from stockade.bwrap.running.supervise import Outcome
from stockade.core.errors import SandboxSetupError


def _launch(masks: list[str], writable: list[str]) -> Launch:
    values: dict[str, object] = {name: None for name in Launch.__slots__}
    values.update(
        bwrap="/usr/bin/bwrap",
        args=b"",
        command=["/bin/true"],
        env={},
        cwd="/",
        project="/",
        writable=writable,
        unguarded=[],
        socket_masks=masks,
        notes=[],
        interactive=False,
        quiet=True,
        allow_unix=False,
    )
    return Launch(**values)


def _socket(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The masks bwrap was given, per start; bwrap itself is not run."""
    seen: list[list[str]] = []
    monkeypatch.setattr(execute, "_seccomp_fd", lambda launch: os.open("/dev/null", os.O_RDONLY))
    return seen


def _fake_supervise(seen: list[list[str]], vanish: Path | None):
    def supervise(argv: list[str], **kwargs: object) -> Outcome:
        with open(f"/proc/self/fd/{argv[2]}", "rb") as args:
            words = args.read().split(b"\0")
        for fd in kwargs["close_after_spawn"]:  # type: ignore[attr-defined]
            os.close(fd)
        os.close(kwargs["info_read_fd"])  # type: ignore[arg-type]
        seen.append([words[i + 2].decode() for i, word in enumerate(words) if word == b"--ro-bind" and words[i + 1] == b"/dev/null"])
        if vanish is not None and len(seen) == 1:
            vanish.unlink()  # the daemon ended while bwrap was setting up
            raise SandboxSetupError("bwrap could not set up the sandbox")
        return Outcome(0)

    return supervise


def test_a_socket_gone_during_set_up_starts_the_run_again_without_it(tmp_path: Path, calls: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    gone, stays = tmp_path / "gone.sock", tmp_path / "stays.sock"
    sockets = [_socket(gone), _socket(stays)]
    monkeypatch.setattr(execute, "supervise", _fake_supervise(calls, gone))
    outcome, masked = execute._supervised(_launch([str(gone), str(stays)], []), plan_limits(None, None, None, "s"), None)
    assert outcome.exit_code == 0 and masked == [str(stays)]
    assert calls == [[str(gone), str(stays)], [str(stays)]]
    for item in sockets:
        item.close()


def test_a_networked_run_gets_a_new_proxy_session_for_the_second_start(
    tmp_path: Path, calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone.sock"
    server = _socket(gone)
    steps: list[str] = []

    class Bridge:
        handover = None
        credentials: list[object] = []

        def open(self) -> None:
            steps.append("open")

        def close(self) -> None:
            steps.append("close")

        def attach(self) -> None:
            steps.append("attach")

    monkeypatch.setattr(execute, "supervise", _fake_supervise(calls, gone))
    monkeypatch.setattr(execute, "_preexec", lambda limits, bridge, layers=(), then=None, stage=None: None)
    outcome, masked = execute._supervised(_launch([str(gone)], []), plan_limits(None, None, None, "s"), Bridge())  # type: ignore[arg-type]
    assert outcome.exit_code == 0 and masked == [] and steps == ["open", "close", "open"]
    server.close()


def test_a_set_up_failure_with_every_socket_still_there_is_not_hidden(
    tmp_path: Path, calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    stays = tmp_path / "stays.sock"
    server = _socket(stays)

    def failing(argv: list[str], **kwargs: object) -> Outcome:
        _fake_supervise(calls, None)(argv, **kwargs)
        raise SandboxSetupError("bwrap could not set up the sandbox")

    monkeypatch.setattr(execute, "supervise", failing)
    with pytest.raises(SandboxSetupError):
        execute._supervised(_launch([str(stays)], []), plan_limits(None, None, None, "s"), None)
    assert len(calls) == 1
    server.close()


def test_only_the_empty_file_bwrap_made_in_a_writable_place_is_removed(tmp_path: Path) -> None:
    writable, elsewhere = tmp_path / "project", tmp_path / "outside"
    writable.mkdir()
    elsewhere.mkdir()
    since = time.time()
    made, kept_data, kept_outside = writable / "a.sock", writable / "b.sock", elsewhere / "c.sock"
    made.write_bytes(b"")
    kept_data.write_bytes(b"the run wrote this")
    kept_outside.write_bytes(b"")
    execute._remove_made_mount_points([str(made), str(kept_data), str(kept_outside)], [str(writable)], since)
    assert not made.exists() and kept_data.exists() and kept_outside.exists()
    old = writable / "old"
    old.write_bytes(b"")
    os.utime(old, (since - 3600, since - 3600))
    execute._remove_made_mount_points([str(old)], [str(writable)], since + 3600)
    assert old.exists()  # made before the run: not bwrap's


def test_a_socket_made_anew_during_the_start_is_started_again_with_it(
    tmp_path: Path, calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon restarting in those milliseconds: the path is there again, another socket."""
    path = tmp_path / "b.sock"
    first = _socket(path)

    def supervise(argv: list[str], **kwargs: object) -> Outcome:
        _fake_supervise(calls, None)(argv, **kwargs)
        if len(calls) == 1:
            first.close()
            path.unlink()
            time.sleep(0.02)  # a daemon's restart takes this long at least: its clock tick has passed
            _socket(path)  # made again: another file at the same path (perhaps the same inode number)
            raise SandboxSetupError("bwrap could not set up the sandbox")
        return Outcome(0)

    monkeypatch.setattr(execute, "supervise", supervise)
    outcome, masked = execute._supervised(_launch([str(path)], []), plan_limits(None, None, None, "s"), None)
    assert outcome.exit_code == 0 and calls == [[str(path)], [str(path)]] and masked == [str(path)]


def test_a_failure_with_no_socket_changed_is_no_race(tmp_path: Path, calls: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "b.sock"
    _socket(path)

    def supervise(argv: list[str], **kwargs: object) -> Outcome:
        _fake_supervise(calls, None)(argv, **kwargs)
        raise SandboxSetupError("bwrap could not set up the sandbox")

    monkeypatch.setattr(execute, "supervise", supervise)
    with pytest.raises(SandboxSetupError):
        execute._supervised(_launch([str(path)], []), plan_limits(None, None, None, "s"), None)
    assert len(calls) == 1


def test_a_failed_start_is_laid_to_a_changed_path_only_when_bwrap_names_a_path_of_the_plan() -> None:
    """bwrap spells paths from inside its set-up (/newroot/..., /oldroot/...): a message naming a
    mount of the plan may be a path that changed since planning (run.py plans and starts again)."""
    args = b"--ro-bind\0/\0/\0--tmpfs\0/p/secret\0--ro-bind\0/dev/null\0/p/.env\0"
    named = execute._names_a_planned_path
    assert named(b"bwrap: Can't mkdir /newroot/p/secret: File exists\n", args)
    assert named(b"bwrap: Can't bind mount /oldroot/dev/null on /newroot/p/.env: Not a directory\n", args)
    assert not named(b"bwrap: Can't mkdir parents for /proc/12/mounts: No such file or directory\n", args)
    assert not named(b"bwrap: No permissions to creating new namespace\n", args)
    assert not named(b"bwrap: Can't mkdir /newroot/p/secretive: File exists\n", args)  # a word of the plan, whole
    assert not named(b"bwrap: Can't mkdir /newroot/: x\n", args)  # / alone is in every plan
