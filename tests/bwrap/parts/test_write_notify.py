"""The notifying filter: loaded in a real child, it makes exactly the calls that change paths wait."""

from __future__ import annotations

import _thread
import fcntl
import os
import socket
import struct
from pathlib import Path

import pytest

from stockade.bwrap.parts import write_notify
from stockade.bwrap.parts.netns import library_function
from stockade.bwrap.parts.seccomp_cache import looks_like_filter

ARCH = write_notify.machine()
pytestmark = pytest.mark.skipif(ARCH not in write_notify.CALLS, reason="no table for this architecture")


@pytest.mark.parametrize("arch", sorted(write_notify.CALLS))
def test_the_program_is_a_well_formed_filter(arch: str) -> None:
    assert looks_like_filter(write_notify.program(arch))


def _notified(folder: Path) -> list[str]:
    """Run a child under the filter; the names of the calls it was stopped at, in order."""
    load = write_notify.loader(ARCH)
    prctl = library_function(None, "prctl", "iLLLL")
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child: load, hand the listener over, then make each call once
        try:
            parent.close()
            prctl(38, 1, 0, 0, 0)  # no_new_privs: what lets an unprivileged process load a filter
            fd = load()
            socket.send_fds(child, [b"L"], [fd])
            os.close(fd)
            child.recv(1)  # the listener is served
            os.close(os.open(folder / "read-only", os.O_RDONLY))
            os.close(os.open(folder / "written", os.O_WRONLY | os.O_CREAT, 0o600))
            os.mkdir(folder / "made")
            os.getpid()
            os.chmod(folder / "written", 0o644)
            os.rename(folder / "written", folder / "renamed")
            os.unlink(folder / "renamed")
            os.rmdir(folder / "made")
        finally:
            os._exit(0)
    child.close()
    _message, fds, _flags, _address = socket.recv_fds(parent, 1, 1)
    listener = fds[0]
    names = {number: name for name, (number, _flags) in write_notify.CALLS[ARCH].items()}
    seen: list[str] = []
    done = _thread.allocate_lock()
    done.acquire()

    def serve() -> None:
        buffer = bytearray(80)
        try:
            while True:
                buffer[:] = bytes(80)
                try:
                    fcntl.ioctl(listener, 0xC0502100, buffer, True)
                except OSError:
                    return
                ident = struct.unpack_from("=Q", buffer)[0]
                seen.append(names.get(struct.unpack_from("=i", buffer, 16)[0], "?"))
                fcntl.ioctl(listener, 0xC0182101, struct.pack("=QqiI", ident, 0, 0, 1))
        finally:
            done.release()

    _thread.start_new_thread(serve, ())
    parent.send(b"go")
    os.waitpid(pid, 0)
    assert done.acquire(timeout=10)
    os.close(listener)
    return seen


def test_only_calls_that_change_paths_wait(tmp_path: Path) -> None:
    (tmp_path / "read-only").write_text("x")
    seen = _notified(tmp_path)
    expected_open = "openat"
    assert seen == [expected_open, "mkdir" if ARCH == "x86_64" else "mkdirat", *seen[2:]]
    assert seen.count("openat") == 1  # the read-only open went on without waiting
    assert {"chmod", "fchmodat"} & set(seen) and {"rename", "renameat", "renameat2"} & set(seen)
    assert {"unlink", "unlinkat"} & set(seen) and {"rmdir", "unlinkat"} & set(seen)
    assert "?" not in seen
