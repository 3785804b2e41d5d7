"""How the checkpoint's thread reads bwrap's words and the calls it is told of."""

from __future__ import annotations

from stockade.bwrap.running import checkpointing
from stockade.bwrap.running.checkpointing import Places, _fd, _open_how
from stockade.checkpoints import store


def _words(*words: str) -> list[bytes]:
    return [word.encode() for word in words]


def test_places_map_the_sandbox_s_writable_binds_to_the_host() -> None:
    places = Places(
        _words(
            "--unshare-all",
            "--tmpfs",
            "/",
            "--ro-bind",
            "/usr",
            "/usr",
            "--bind",
            "/home/u/p",
            "/home/u/p",
            "--ro-bind",
            "/home/u/p/.envrc",
            "/home/u/p/.envrc",
            "--bind",
            "/home/u/p/.git",
            "/run/stockade-git/0",
            "--bind",
            "/home/u/.local/state/stockade/stage",
            "/home/u/p/.git",
            "--bind-data",
            "7",
            "/home/u/p/tool.cfg",
            "--setenv",
            "A",
            "B",
            "--",
            "--bind",
            "/x",
            "/x",
        ),  # fmt: skip
        own=("/home/u/.local/state/stockade",),
    )
    assert places.host_path("/home/u/p/src/a.py") == "/home/u/p/src/a.py"
    assert places.host_path("/home/u/p") == "/home/u/p"
    assert places.host_path("/run/stockade-git/0/refs/heads/main") == "/home/u/p/.git/refs/heads/main"
    assert places.host_path("/home/u/p/.envrc") is None  # read-only inside
    assert places.host_path("/home/u/p/.git/index") is None  # the stage: stockade's own, carried back checked
    assert places.host_path("/home/u/p/tool.cfg") is None  # a private copy
    assert places.host_path("/tmp/x") is None and places.host_path("/usr/bin/x") is None
    assert places.sources == ("/home/u/p/.git", "/home/u/p")


def test_the_later_of_two_mounts_at_one_place_wins() -> None:
    places = Places(_words("--bind", "/p", "/p", "--remount-ro", "/p"), own=())
    assert places.host_path("/p/x") is None
    places = Places(_words("--ro-bind", "/p", "/p", "--bind", "/p", "/p"), own=())
    assert places.host_path("/p/x") == "/p/x"


def test_open_flags_say_how_a_path_changes() -> None:
    assert _open_how(0) is None  # O_RDONLY
    assert _open_how(0o1) == store.WRITE and _open_how(0o2 | 0o100) == store.WRITE
    assert _open_how(0o1 | 0o1000) == store.TRUNCATE_OPEN and _open_how(0o1000) == store.TRUNCATE_OPEN
    assert _open_how(0o100) == store.CREATE
    assert _open_how(0o20000000 | 0o200000 | 0o2) is None  # O_TMPFILE: no name yet


def test_file_descriptor_arguments_are_signed_32_bit() -> None:
    assert _fd(0xFFFFFF9C) == -100 and _fd(0xFFFFFFFFFFFFFF9C) == -100 and _fd(5) == 5


def test_link_keeps_its_source_and_renameat2_exchange_both_sides() -> None:
    link = checkpointing.DECODERS["linkat"]((3, 10, 4, 20, 0x400))
    assert link == [(3, 10, store.META_CHANGE, True), (4, 20, store.CREATE, False)]
    exchange = checkpointing.DECODERS["renameat2"]((3, 10, 4, 20, 2))
    assert [how for _fd, _pointer, how, _follow in exchange] == [store.MOVE, store.MOVE]
    unlinkat = checkpointing.DECODERS["unlinkat"]((0xFFFFFF9C, 10, 0x200))
    assert unlinkat == [(-100, 10, store.RMDIR, False)]
