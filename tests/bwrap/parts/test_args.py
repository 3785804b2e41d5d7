"""bwrap option pieces: the exact words each becomes, and their NUL-separated encoding for --args."""

from __future__ import annotations

import pytest

from stockade.bwrap.parts.args import (
    PROC_READ_ONLY,
    Bind,
    Chdir,
    Dev,
    FdOption,
    Flag,
    Piece,
    Proc,
    ReadOnlyBind,
    ReadOnlyBindFrom,
    SetEnv,
    Symlink,
    Tmpfs,
    encode,
    words,
)


@pytest.mark.parametrize(
    ("piece", "expected"),
    [
        pytest.param(Flag("--unshare-all"), ["--unshare-all"], id="flag"),
        pytest.param(Bind("/proj"), ["--bind", "/proj", "/proj"], id="bind"),
        pytest.param(ReadOnlyBind("/usr"), ["--ro-bind", "/usr", "/usr"], id="ro-bind"),
        pytest.param(ReadOnlyBindFrom("/run/mask", "/home/ann/.ssh/id"), ["--ro-bind", "/run/mask", "/home/ann/.ssh/id"], id="ro-bind-from"),
        pytest.param(Tmpfs("/tmp"), ["--tmpfs", "/tmp"], id="tmpfs"),
        pytest.param(Tmpfs("/tmp", size=1 << 20), ["--size", "1048576", "--tmpfs", "/tmp"], id="tmpfs-size"),
        pytest.param(
            Tmpfs("/h/.aws", read_only=True, mode="0000"), ["--perms", "0000", "--tmpfs", "/h/.aws", "--remount-ro", "/h/.aws"], id="tmpfs-mask"
        ),
        pytest.param(Tmpfs("/x", size=0, mode=""), ["--tmpfs", "/x"], id="tmpfs-zero-size-and-empty-mode-left-out"),
        pytest.param(
            Tmpfs("/run", size=4096, read_only=True, mode="0755"),
            ["--perms", "0755", "--size", "4096", "--tmpfs", "/run", "--remount-ro", "/run"],
            id="tmpfs-everything",
        ),
        pytest.param(Dev(), ["--dev", "/dev", "--remount-ro", "/dev"], id="dev"),
        pytest.param(Dev("/sandbox/dev"), ["--dev", "/sandbox/dev", "--remount-ro", "/sandbox/dev"], id="dev-elsewhere"),
        pytest.param(
            Proc(),
            ["--proc", "/proc", *(word for name in PROC_READ_ONLY for word in ("--ro-bind-try", f"/proc/{name}", f"/proc/{name}"))],
            id="proc",
        ),
        pytest.param(Chdir("/proj/sub dir"), ["--chdir", "/proj/sub dir"], id="chdir"),
        pytest.param(Symlink("usr/bin", "/bin"), ["--symlink", "usr/bin", "/bin"], id="symlink"),
        pytest.param(SetEnv("LANG", "C.UTF-8"), ["--setenv", "LANG", "C.UTF-8"], id="setenv"),
        pytest.param(SetEnv("EMPTY", ""), ["--setenv", "EMPTY", ""], id="setenv-empty"),
        pytest.param(FdOption("--seccomp", 7), ["--seccomp", "7"], id="fd"),
    ],
)
def test_each_piece_gives_its_words(piece: Piece, expected: list[str]) -> None:
    assert list(piece.to_args()) == expected
    assert words([piece]) == expected


def test_words_keep_the_order_of_the_pieces() -> None:
    pieces: list[Piece] = [Flag("--die-with-parent"), ReadOnlyBind("/usr"), Bind("/p"), Chdir("/p")]
    assert words(pieces) == ["--die-with-parent", "--ro-bind", "/usr", "/usr", "--bind", "/p", "/p", "--chdir", "/p"]
    assert words([]) == []


def test_repr_shows_the_words() -> None:
    assert repr(Bind("/p")) == "Bind(--bind /p /p)"
    assert repr(Tmpfs("/t", read_only=True)) == "Tmpfs(--tmpfs /t --remount-ro /t)"


def test_a_bare_piece_has_no_words() -> None:
    with pytest.raises(NotImplementedError):
        list(Piece().to_args())


def test_pieces_take_no_stray_attributes() -> None:
    with pytest.raises(AttributeError):
        Bind("/p").source = "/q"  # type: ignore[attr-defined]


def test_encode_is_nul_separated_and_nul_terminated() -> None:
    assert encode([SetEnv("A", "x y"), Flag("--")]) == b"--setenv\0A\0x y\0--\0"
    assert encode([]) == b""


def test_encode_keeps_option_like_and_newline_text_as_one_word() -> None:
    assert encode([Bind("--bind\n/etc")]) == b"--bind\0--bind\n/etc\0--bind\n/etc\0"


def test_encode_writes_undecodable_names_back_as_their_bytes() -> None:
    name = b"/p/caf\xe9".decode("utf-8", "surrogateescape")  # as os.listdir gives a Latin-1 name
    assert encode([Chdir(name), SetEnv("U", "ü")]) == b"--chdir\0/p/caf\xe9\0--setenv\0U\0\xc3\xbc\0"


@pytest.mark.parametrize("piece", [Bind("/a\0b"), SetEnv("A", "x\0y"), Symlink("t", "/p\0")])
def test_encode_refuses_a_nul_inside_a_word(piece: Piece) -> None:
    with pytest.raises(ValueError, match="NUL byte"):
        encode([piece])
