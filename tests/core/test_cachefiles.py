"""write_once: a cache file named by its content, reused only when intact, replaced otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.core.cachefiles import write_once


def test_a_file_under_the_expected_name_is_used_only_if_it_holds_the_content(tmp_path: Path) -> None:
    """Names come from the content, so they can be foreseen: what sits under one (other content, a link to
    elsewhere, another owner's file) is replaced, never trusted nor written through."""
    folder = tmp_path / "ssh"
    content = b"Host *\n    ProxyCommand /bin/bash /run/stockade/ssh-proxy %h %p\n"
    path = Path(write_once(str(folder), "ssh_config", content))
    assert path.read_bytes() == content and path.stat().st_mode & 0o777 == 0o644
    assert write_once(str(folder), "ssh_config", content) == str(path)  # the control: the same file, kept
    path.write_bytes(b"Host *\n    ProxyCommand sh -c 'evil'\n")  # planted under the expected name
    assert Path(write_once(str(folder), "ssh_config", content)).read_bytes() == content
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep me\n")
    path.unlink()
    path.symlink_to(target)  # a link under the expected name: replaced, its target untouched
    assert Path(write_once(str(folder), "ssh_config", content)).read_bytes() == content
    assert not path.is_symlink() and target.read_bytes() == b"keep me\n"
    path.chmod(0o666)  # writable by others: replaced with its own mode
    write_once(str(folder), "ssh_config", content)
    assert path.stat().st_mode & 0o777 == 0o644
    if os.geteuid() == 0:  # another user's file under the name
        os.chown(path, 12345, 12345)
        write_once(str(folder), "ssh_config", content)
        assert path.stat().st_uid == 0
    assert [p.name for p in folder.iterdir()] == [path.name]  # no temporary files left


def test_a_folder_others_can_write_to_is_refused(tmp_path: Path) -> None:
    from stockade.core.errors import SandboxSetupError

    folder = tmp_path / "ssh"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    with pytest.raises(SandboxSetupError):
        write_once(str(folder), "ssh_config", b"x")
    folder.chmod(0o700)
    assert Path(write_once(str(folder), "ssh_config", b"x")).read_bytes() == b"x"
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(SandboxSetupError):
        write_once(str(link), "ssh_config", b"x")


def test_a_suffix_keeps_the_bundles_name(tmp_path: Path) -> None:
    path = write_once(str(tmp_path / "ca"), "bundle", b"PEM", 0o644, suffix=".pem")
    assert Path(path).name.startswith("bundle-") and path.endswith(".pem") and Path(path).read_bytes() == b"PEM"
