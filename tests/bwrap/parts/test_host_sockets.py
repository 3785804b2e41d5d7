"""host_sockets: the names /proc/net/unix lists, read whole and resolved."""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from stockade.bwrap.parts import host_sockets

HEAD = "Num       RefCount Protocol Flags    Type St Inode Path\n"


def _entry(name: str | None, inode: int = 123) -> str:
    return f"0000000000000000: 00000002 00000000 00010000 0001 01 {inode:5d}" + (f" {name}" if name is not None else "") + "\n"


def test_every_name_is_read_whole_the_last_one_too() -> None:
    table = HEAD + _entry("/a b ") + _entry(None) + _entry("/x\ny\rz\x1c") + _entry("@abstract") + _entry("rel.sock") + _entry("/last")
    assert host_sockets._joined(*host_sockets._parsed(table)) == ["/a b ", "/x\ny\rz\x1c", "/last"]


def test_a_name_ending_in_a_newline_keeps_it() -> None:
    assert host_sockets._joined(*host_sockets._parsed(HEAD + _entry("/x\n") + _entry("/y", 99999))) == ["/x\n", "/y"]


def test_resolve_follows_links_and_climbs_like_realpath(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for spelled in (f"{tmp_path}/link/a.sock", f"/tmp/../{tmp_path}/real/a.sock", f"{tmp_path}/missing/../link/x", f"{tmp_path}/loop/s"):
        assert host_sockets.resolve(spelled) == os.path.realpath(spelled), spelled


# The table's grammar as a regular expression: the hand parser must agree with it on any line.
_ENTRY = re.compile(r"[0-9a-f]+: [0-9A-F]{8} [0-9A-F]{8} [0-9A-F]{8} [0-9A-F]{4} [0-9A-F]{2} +[0-9]+(?: (.*))?$", re.DOTALL)
_PIECES = st.sampled_from(["0000000012ab", ": ", "00000002", "0001", "01", "03", " ", "  ", "1142", "/run/x.sock", "a", "G", "\r", "\x1c", ""])


@given(st.lists(_PIECES, max_size=14).map("".join) | st.text(max_size=40))
def test_the_entry_parser_agrees_with_the_grammar(line: str) -> None:
    expected = _ENTRY.match(line)
    got = host_sockets._entry_name(line)
    if expected is None:
        assert got is host_sockets.NOT_AN_ENTRY
    else:
        assert got == expected.group(1)


def test_real_entries_parse() -> None:
    line = "00000000fe897612: 00000003 00000000 00000000 0001 03  1142 /run/a b.sock"
    assert host_sockets._entry_name(line) == "/run/a b.sock"
    assert host_sockets._entry_name("00000000f51fbc61: 00000003 00000000 00000000 0001 03 2021404") is None
    assert host_sockets._entry_name("continued name") is host_sockets.NOT_AN_ENTRY


def test_a_name_going_on_like_an_entry_is_read_on_too() -> None:
    # The kernel prints "/p/s\n0: ... 1" as two lines; the second reads like an entry of a socket with no name.
    table = HEAD + _entry("/p/s\n0: 00000002 00000000 00010000 0001 01 1") + _entry("/p/plain.sock", 99999)
    assert host_sockets._joined(*host_sockets._parsed(table)) == ["/p/s", "/p/plain.sock"]  # the lines alone cannot tell
    longer = host_sockets._longer(*host_sockets._parsed(table))
    assert "/p/s\n0: 00000002 00000000 00010000 0001 01 1" in longer
    assert all(len(name.encode()) <= host_sockets.SUN_PATH for name in longer)


def test_paths_keeps_a_socket_whose_name_goes_on_like_an_entry() -> None:
    servers: list[socket.socket] = []
    where = Path(tempfile.mkdtemp(dir="/root" if os.access("/root", os.W_OK) else None))
    try:
        forged = where / "s\n0: 00000002 00000000 00010000 0001 01 1"
        plain = where / "plain.sock"
        for path in (forged, plain):
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(path))
            servers.append(server)
        found = host_sockets.paths(keep=(str(where),))
        assert str(forged) in found and str(plain) in found
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(where)
