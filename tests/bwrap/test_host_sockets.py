"""host_sockets: the names /proc/net/unix lists, read whole and resolved."""

from __future__ import annotations

import os
from pathlib import Path

from stockade.bwrap import host_sockets

HEAD = "Num       RefCount Protocol Flags    Type St Inode Path\n"


def _entry(name: str | None, inode: int = 123) -> str:
    return f"0000000000000000: 00000002 00000000 00010000 0001 01 {inode:5d}" + (f" {name}" if name is not None else "") + "\n"


def test_every_name_is_read_whole_the_last_one_too() -> None:
    table = HEAD + _entry("/a b ") + _entry(None) + _entry("/x\ny\rz\x1c") + _entry("@abstract") + _entry("rel.sock") + _entry("/last")
    assert host_sockets._listed(table) == ["/a b ", "/x\ny\rz\x1c", "/last"]


def test_a_name_ending_in_a_newline_keeps_it() -> None:
    assert host_sockets._listed(HEAD + _entry("/x\n") + _entry("/y", 99999)) == ["/x\n", "/y"]


def test_resolve_follows_links_and_climbs_like_realpath(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for spelled in (f"{tmp_path}/link/a.sock", f"/tmp/../{tmp_path}/real/a.sock", f"{tmp_path}/missing/../link/x", f"{tmp_path}/loop/s"):
        assert host_sockets.resolve(spelled) == os.path.realpath(spelled), spelled
