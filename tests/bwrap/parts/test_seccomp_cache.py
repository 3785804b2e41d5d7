"""The seccomp filter cache with a stand-in compiler: which programs pass as filters, when a file is trusted, and the fd handed on."""

from __future__ import annotations

import fcntl
import os
import re
import stat
import struct
from pathlib import Path

import pytest

from stockade.bwrap.parts import seccomp, seccomp_cache
from stockade.bwrap.parts.seccomp_cache import INSN_SIZE, MAX_INSNS, SOCK_FILTER, cache_path, looks_like_filter, open_filter, open_known
from stockade.core.errors import SandboxSetupError

RET_ALLOW = (0x06, 0, 0, 0x7FFF0000)  # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
LOAD_NR = (0x20, 0, 0, 0)  # BPF_LD|BPF_W|BPF_ABS: the syscall number
JEQ = 0x15  # BPF_JMP|BPF_JEQ|BPF_K
JA = 0x05  # BPF_JMP|BPF_JA


def bpf(*instructions: tuple[int, int, int, int]) -> bytes:
    return b"".join(struct.pack(SOCK_FILTER, *insn) for insn in instructions)


STRICT = bpf(LOAD_NR, (JEQ, 0, 1, 41), (0x06, 0, 0, 0x00050001), RET_ALLOW)  # socket: ERRNO(EPERM)
LOOSE = bpf(LOAD_NR, RET_ALLOW)


# -- looks_like_filter -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "good"),
    [
        pytest.param(bpf(RET_ALLOW), True, id="one-ret"),
        pytest.param(STRICT, True, id="a-jump-inside"),
        pytest.param(b"", False, id="empty"),
        pytest.param(bpf(RET_ALLOW)[:-1], False, id="part-of-an-instruction"),
        pytest.param(bpf(RET_ALLOW) + b"\x00", False, id="a-byte-too-many"),
        pytest.param(bpf(LOAD_NR), False, id="no-ret-last"),
        pytest.param(bpf(RET_ALLOW, LOAD_NR), False, id="ret-not-last"),
        pytest.param(bpf((JEQ, 1, 0, 41), RET_ALLOW), False, id="jt-past-the-end"),
        pytest.param(bpf((JEQ, 0, 1, 41), RET_ALLOW), False, id="jf-past-the-end"),
        pytest.param(bpf((JEQ, 1, 0, 41), RET_ALLOW, RET_ALLOW), True, id="jt-onto-the-last"),
        pytest.param(bpf((JA, 0, 0, 1), RET_ALLOW, RET_ALLOW), True, id="ja-onto-the-last"),
        pytest.param(bpf((JA, 0, 0, 2), RET_ALLOW, RET_ALLOW), False, id="ja-past-the-end"),
        pytest.param(bpf((JA, 0, 0, 0xFFFFFFFF), RET_ALLOW), False, id="ja-far-away"),
        pytest.param(bpf((JA, 9, 9, 0), RET_ALLOW), True, id="ja-ignores-jt-and-jf"),
        pytest.param(bytes(16), False, id="zeros"),
        pytest.param(bpf(*[LOAD_NR] * (MAX_INSNS - 1), RET_ALLOW), True, id="the-kernels-limit"),
        pytest.param(bpf(*[LOAD_NR] * MAX_INSNS, RET_ALLOW), False, id="over-the-limit"),
    ],
)
def test_looks_like_filter(program: bytes, good: bool) -> None:
    assert looks_like_filter(program) is good


def test_an_instruction_is_eight_bytes() -> None:
    assert INSN_SIZE == 8 and MAX_INSNS == 4096


# -- the cache -------------------------------------------------------------------------------------


@pytest.fixture
def compiler(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """build_bpf as a stand-in that counts its calls; a fixed libseccomp version for the key."""
    calls: list[bool] = []

    def build(allow_unix: bool, **_: object) -> bytes:
        calls.append(allow_unix)
        return LOOSE if allow_unix else STRICT

    monkeypatch.setattr(seccomp, "build_bpf", build)
    monkeypatch.setattr(seccomp_cache, "libseccomp_version", lambda: "2.5.4")
    return calls


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "stockade"


def read(fd: int) -> bytes:
    try:
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0 and not os.get_inheritable(fd)
        return os.pread(fd, 1 << 16, 0)
    finally:
        os.close(fd)


def test_cache_path_names_the_key(compiler: list[bool], cache_dir: Path) -> None:
    strict, loose = cache_path(cache_dir, False), cache_path(cache_dir, True)
    assert os.path.dirname(strict) == str(cache_dir)
    assert re.fullmatch(r"seccomp-[0-9a-f]{64}\.bpf", os.path.basename(strict))
    assert strict != loose and cache_path(str(cache_dir), False) == strict


def test_a_cold_call_compiles_and_stores_a_warm_one_reads(compiler: list[bool], cache_dir: Path) -> None:
    assert read(open_filter(cache_dir, False)) == STRICT
    path = Path(cache_path(cache_dir, False))
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o400
    assert [p.name for p in cache_dir.iterdir()] == [path.name]
    assert read(open_filter(cache_dir, False)) == STRICT
    assert compiler == [False]
    assert read(open_filter(cache_dir, True)) == LOOSE and compiler == [False, True]


@pytest.mark.parametrize(
    ("content", "mode"),
    [
        pytest.param(b"", 0o400, id="empty"),
        pytest.param(STRICT[:-3], 0o400, id="truncated"),
        pytest.param(bpf(LOAD_NR), 0o400, id="no-ret"),
        pytest.param(LOOSE, 0o420, id="group-writable"),
        pytest.param(LOOSE, 0o402, id="world-writable"),
        pytest.param(LOOSE * (MAX_INSNS // 2 + 1), 0o400, id="too-long"),
    ],
)
def test_a_file_not_to_be_trusted_is_compiled_again_and_replaced(compiler: list[bool], cache_dir: Path, content: bytes, mode: int) -> None:
    cache_dir.mkdir(parents=True, mode=0o700)
    path = Path(cache_path(cache_dir, False))
    path.write_bytes(content)
    path.chmod(mode)
    assert read(open_filter(cache_dir, False)) == STRICT
    assert compiler == [False] and path.read_bytes() == STRICT and stat.S_IMODE(path.stat().st_mode) == 0o400


def test_a_link_is_not_followed(compiler: list[bool], cache_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.bpf"
    elsewhere.write_bytes(LOOSE)
    elsewhere.chmod(0o400)
    cache_dir.mkdir(parents=True, mode=0o700)
    path = Path(cache_path(cache_dir, False))
    path.symlink_to(elsewhere)
    assert read(open_filter(cache_dir, False)) == STRICT
    assert not path.is_symlink() and elsewhere.read_bytes() == LOOSE


def test_a_loose_folder_is_not_trusted_and_is_tightened(compiler: list[bool], cache_dir: Path) -> None:
    cache_dir.mkdir(parents=True)
    path = Path(cache_path(cache_dir, False))
    path.write_bytes(LOOSE)
    path.chmod(0o400)
    cache_dir.chmod(0o777)
    assert read(open_filter(cache_dir, False)) == STRICT
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700 and path.read_bytes() == STRICT


def test_a_cache_that_cannot_be_written_still_gives_a_sealed_filter(compiler: list[bool], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    fd = open_filter(blocker / "stockade", False)
    with pytest.raises(OSError):
        os.write(fd, b"x")  # read-only
    assert read(fd) == STRICT
    assert read(open_filter(blocker / "stockade", False)) == STRICT and compiler == [False, False]  # no cache: compiled each time


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        pytest.param(ImportError("No module named 'pyseccomp'"), "cannot compile the seccomp filter: .*install pyseccomp", id="no-pyseccomp"),
        pytest.param(OSError("libseccomp failed"), "libseccomp could not compile the seccomp filter: libseccomp failed", id="oserror"),
        pytest.param(RuntimeError("bad rule"), "libseccomp could not compile the seccomp filter: bad rule", id="runtimeerror"),
    ],
)
def test_a_compiler_failure_is_a_setup_error(compiler: list[bool], cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                             raised: Exception, message: str) -> None:  # fmt: skip
    def broken(allow_unix: bool, **_: object) -> bytes:
        raise raised

    monkeypatch.setattr(seccomp, "build_bpf", broken)
    with pytest.raises(SandboxSetupError, match=message) as caught:
        open_filter(cache_dir, False)
    assert caught.value.exit_code == 125


def test_an_unusable_program_is_a_setup_error_and_not_stored(compiler: list[bool], cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seccomp, "build_bpf", lambda allow_unix, **_: bpf(LOAD_NR))
    with pytest.raises(SandboxSetupError, match=r"libseccomp produced an unusable seccomp filter \(8 bytes\)"):
        open_filter(cache_dir, False)
    assert not Path(cache_path(cache_dir, False)).exists()


def test_missing_libseccomp_is_a_setup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    def no_library(name: str, *args: object, **kwargs: object) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    with pytest.raises(SandboxSetupError, match=r"libseccomp.so.2 not found: install it"):
        seccomp_cache.libseccomp_version()


# -- open_known --------------------------------------------------------------------------------------


def test_open_known_reads_a_trusted_file_without_compiling(compiler: list[bool], cache_dir: Path) -> None:
    os.close(open_filter(cache_dir, False))
    path = cache_path(cache_dir, False)
    fd = open_known(path)
    assert fd is not None and read(fd) == STRICT and compiler == [False]


def test_open_known_sends_the_caller_back_otherwise(compiler: list[bool], cache_dir: Path) -> None:
    path = cache_path(cache_dir, False)
    assert open_known(path) is None  # no folder yet
    os.close(open_filter(cache_dir, False))
    cache_dir.chmod(0o755)
    assert open_known(path) is not None  # 0755: nobody else can write it
    cache_dir.chmod(0o775)
    assert open_known(path) is None  # a folder others may write in is not trusted
    cache_dir.chmod(0o700)
    Path(path).chmod(0o600)
    Path(path).write_bytes(b"junk")
    assert open_known(path) is None
    assert open_known(str(cache_dir / "seccomp-unknown.bpf")) is None
